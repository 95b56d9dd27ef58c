// files.h: hand packing of Q4B32 / Q8B32 blocks and a tiny safetensors
// writer of the tests' own, both written from the spec text
// (specs/002_a5b0561d4b728a5e.txt "The block", "The payload", "The file")
// and the safetensors layout, without the codec's writer or the oracle.
//
//   std::vector<std::uint8_t> block = qdtest::PackBlock(4, 0x3c00, codes);
//   std::vector<std::uint8_t> file = qdtest::RbqFile(4, 1, 32, block);
#ifndef QUANTDIFF_PROPERTY_TESTS_GEN_FILES_H_
#define QUANTDIFF_PROPERTY_TESTS_GEN_FILES_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace qdtest {

// One block: the scale as little-endian binary16 at offset 0, then the
// payload at offset 2. Four bits: byte j holds position 2j in its low nibble
// and position 2j+1 in its high nibble, each a two's complement nibble.
// Eight bits: byte k is position k as a two's complement byte.
inline std::vector<std::uint8_t> PackBlock(int bits, std::uint16_t scale,
                                           const std::vector<int>& codes) {
  std::vector<std::uint8_t> block;
  block.push_back(static_cast<std::uint8_t>(scale & 0xff));
  block.push_back(static_cast<std::uint8_t>(scale >> 8));
  if (bits == 4) {
    for (int j = 0; j < 16; ++j) {
      block.push_back(static_cast<std::uint8_t>((codes[2 * j] & 15) |
                                                ((codes[2 * j + 1] & 15) << 4)));
    }
  } else {
    for (int k = 0; k < 32; ++k) block.push_back(static_cast<std::uint8_t>(codes[k] & 0xff));
  }
  return block;
}

inline std::size_t BlockSize(int bits) { return bits == 4 ? 18 : 34; }

// Code at position k of a packed block (the inverse of PackBlock, written
// as "a nibble of 8 or more is negative" rather than with the xor trick).
inline int UnpackCode(int bits, const std::uint8_t* block, int k) {
  if (bits == 4) {
    const std::uint8_t byte = block[2 + k / 2];
    const int nibble = (k % 2 == 0) ? (byte & 15) : (byte >> 4);
    return nibble >= 8 ? nibble - 16 : nibble;
  }
  const int byte = block[2 + k];
  return byte >= 128 ? byte - 256 : byte;
}

inline std::uint16_t BlockScale(const std::uint8_t* block) {
  return static_cast<std::uint16_t>(block[0] + 256 * block[1]);
}

// JSON string literal (RFC 8259 section 7) for ASCII and UTF-8 text.
inline std::string JsonQuote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

struct RawTensor {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::vector<std::uint8_t> bytes;
};
using Metadata = std::vector<std::pair<std::string, std::string>>;

// Header JSON text for tensors laid out contiguously in the given order.
inline std::string HeaderJson(const std::vector<RawTensor>& tensors, const Metadata* metadata) {
  std::string json = "{";
  bool first = true;
  if (metadata != nullptr) {
    json += "\"__metadata__\":{";
    for (std::size_t i = 0; i < metadata->size(); ++i) {
      if (i) json += ",";
      json += JsonQuote((*metadata)[i].first) + ":" + JsonQuote((*metadata)[i].second);
    }
    json += "}";
    first = false;
  }
  std::uint64_t offset = 0;
  for (const RawTensor& t : tensors) {
    if (!first) json += ",";
    first = false;
    json += JsonQuote(t.name) + ":{\"dtype\":" + JsonQuote(t.dtype) + ",\"shape\":[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) {
      if (i) json += ",";
      json += std::to_string(t.shape[i]);
    }
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," +
            std::to_string(offset + t.bytes.size()) + "]}";
    offset += t.bytes.size();
  }
  return json + "}";
}

// 8-byte little-endian N, N bytes of header (space padded to a multiple of
// 8 when pad), then the data.
inline std::vector<std::uint8_t> FileFromHeader(std::string header,
                                                const std::vector<std::uint8_t>& data,
                                                bool pad = true) {
  while (pad && header.size() % 8 != 0) header += ' ';
  std::vector<std::uint8_t> file;
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) {
    file.push_back(static_cast<std::uint8_t>(n % 256));
    n /= 256;
  }
  file.insert(file.end(), header.begin(), header.end());
  file.insert(file.end(), data.begin(), data.end());
  return file;
}

inline std::vector<std::uint8_t> SafetensorsFile(const std::vector<RawTensor>& tensors,
                                                 const Metadata* metadata) {
  std::vector<std::uint8_t> data;
  for (const RawTensor& t : tensors) data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  return FileFromHeader(HeaderJson(tensors, metadata), data);
}

inline Metadata RbqMetadata(int bits) {
  return {{"format", bits == 4 ? "rabbit-q4b32" : "rabbit-q8b32"},
          {"block", "32"},
          {"scale", "f16"}};
}

// A file holding one block tensor "w" of rows x columns with the given block
// bytes (which need not match the shape: RBQ-004 vectors use that).
inline std::vector<std::uint8_t> RbqFile(int bits, std::uint64_t rows, std::uint64_t columns,
                                         const std::vector<std::uint8_t>& blocks) {
  const Metadata metadata = RbqMetadata(bits);
  return SafetensorsFile({RawTensor{"w", bits == 4 ? "Q4B32" : "Q8B32", {rows, columns}, blocks}},
                         &metadata);
}

// Offset of the data section (8 + N) of a file built above.
inline std::uint64_t DataStart(const std::vector<std::uint8_t>& file) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n * 256 + file[i];
  return 8 + n;
}

}  // namespace qdtest

#endif  // QUANTDIFF_PROPERTY_TESTS_GEN_FILES_H_
