// rbq_file_input.cc: builds the file an rbq_file_diff input stands for.
#include "fuzz/common/rbq_file_input.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>

#include "fuzz/common/fuzz_support.h"
#include "generators/generators.h"
#include "harness/registry.h"

namespace qd::fuzz {

// The name EntryIndex gives a missing entry under.
constexpr char kWho[] = "rbq_file_input";

const std::vector<std::string_view> kRbqTokens = {
    // widths, declarations and their near misses
    "Q4B32", "Q8B32", "Q4B31", "q4b32", "rabbit-q4b32", "rabbit-q8b32", "rabbit-", "rabbit-q16b32",
    "\"32\"", "\"64\"", "\"f16\"", "\"bf16\"", "\"F16\"", "32", "f16",
    // shapes and offsets
    "[3,32]", "[2,64]", "[1,31]", "[32]", "[2,16,32]", "[0,32]", "[1,0]", "[0,0]", "[]",
    "[4294967296,32]", "[18446744073709551615,32]", "[0,18]", "[18,0]", "[0,34]",
    "\"shape\":[1,", "\"F32\",\"shape\":[1,", "[3,", "[0,", "16]", "48]", "33]",
    // JSON values and hostile numbers
    "{}", "null", "true", "1e400", "-1", "0", "01", "1.0", "18446744073709551615",
    "18446744073709551616", "\"\\ud800\"", "\"\\u0000\"",
    // keys
    "\"__metadata__\"", "\"format\"", "\"block\"", "\"scale\"", "\"dtype\"", "\"shape\"",
    "\"data_offsets\"", "\"F32\"", "\"BF16\"", "\"F16\"", "\"U8\"", "\"Q4B32\"", "\"Q8B32\"",
    // structure
    ",", ":", "{", "}", "[", "]", "\"", " ", "\t", "\n", std::string_view("\0", 1), "\xc0\x80",
    "\xff", "\xef\xbb\xbf",
    // whole members
    ",\"x\":1", ",\"format\":\"rabbit-q8b32\"", ",\"block\":\"32\"", ",\"extra\":\"v\"",
    "\"w\":{\"dtype\":\"Q8B32\",\"shape\":[0,32],\"data_offsets\":[0,0]},",
    "\"w\":{\"dtype\":\"Q4B32\",\"shape\":[1,0],\"data_offsets\":[0,0]},",
};

const std::vector<std::string_view> kRbqAnchors = {
    "Q4B32", "Q8B32", "rabbit-q4b32", "rabbit-q8b32", "\"32\"", "\"f16\"", "\"format\"",
    "\"block\"", "\"scale\"", "\"__metadata__\"", "\"dtype\"", "\"shape\"", "\"data_offsets\"",
    "\"F32\"", "\"shape\":[", "\"F32\",\"shape\":[", "norm.weight", "layers.0.weight",
    "layers.1.weight", "32]", "[1,", "[2,", "[0,", "[", "]", ",", ":", "{", "}", "\"", " ",
    "0", "1", "2", "3", "32", "64",
};

namespace {


// Where things are in the file being mutated. header_length follows the
// header text through splices; the prefix may be made to lie about it.
struct Layout {
  std::size_t header_length = 0;
  std::size_t tensor_bytes = 0;  // bytes of one block tensor
  std::size_t block_bytes = 0;
  std::size_t blocks_per_tensor = 0;
  int tensor_count = 0;
};

// The header text actually present: [8, 8 + length) clipped to the file.
std::size_t TextLength(const std::vector<std::uint8_t>& file, const Layout& layout) {
  if (file.size() < 8) return 0;
  return std::min(layout.header_length, file.size() - 8);
}

// Replaces text [at, at + removed) with token and re-fixes the prefix.
void Rewrite(std::vector<std::uint8_t>* file, Layout* layout, std::size_t at,
             std::size_t removed, std::string_view token) {
  const std::size_t text = TextLength(*file, *layout);
  file->erase(file->begin() + 8 + at, file->begin() + 8 + at + removed);
  file->insert(file->begin() + 8 + at, token.begin(), token.end());
  layout->header_length = text - removed + token.size();
  WritePrefix(file, layout->header_length);
}

void ApplyOps(InputReader& in, std::vector<std::uint8_t>* file, Layout* layout) {
  constexpr int kMaxOps = 32;
  for (int n = 0; n < kMaxOps && !in.empty(); ++n) {
    const auto op = static_cast<RbqOp>(in.U8() % static_cast<std::uint8_t>(RbqOp::kCount));
    switch (op) {
      case RbqOp::kHeaderByte: {
        const std::uint16_t pos = in.U16();
        const std::uint8_t value = in.U8();
        const std::size_t text = TextLength(*file, *layout);
        if (text > 0) (*file)[8 + pos % text] = value;
        break;
      }
      case RbqOp::kDataByte: {
        const std::uint16_t pos = in.U16();
        const std::uint8_t value = in.U8();
        const std::size_t start = 8 + layout->header_length;
        if (file->size() > start) (*file)[start + pos % (file->size() - start)] = value;
        break;
      }
      case RbqOp::kScaleRaw:
      case RbqOp::kScaleSpecial: {
        const std::uint16_t block = in.U16();
        std::uint16_t scale;
        if (op == RbqOp::kScaleRaw) {
          scale = in.U16();
        } else {
          scale = kScaleSpecials[in.U8() % std::size(kScaleSpecials)];
        }
        const std::size_t total = layout->blocks_per_tensor * layout->tensor_count;
        if (total == 0) break;
        const std::size_t b = block % total;
        const std::size_t at = 8 + layout->header_length +
                               (b / layout->blocks_per_tensor) * layout->tensor_bytes +
                               (b % layout->blocks_per_tensor) * layout->block_bytes;
        if (at + 2 <= file->size()) {
          (*file)[at] = static_cast<std::uint8_t>(scale & 0xff);
          (*file)[at + 1] = static_cast<std::uint8_t>(scale >> 8);
        }
        break;
      }
      case RbqOp::kTruncate: {
        const std::size_t cut = in.U16() % (file->size() + 1);
        file->resize(file->size() - cut);
        break;
      }
      case RbqOp::kAppend: {
        const std::size_t count = 1 + in.U8() % 64;
        const std::uint8_t value = in.U8();
        file->insert(file->end(), count, value);
        break;
      }
      case RbqOp::kLengthPrefix: {
        const std::uint8_t mode = in.U8() % 3;
        const std::uint64_t now = ReadPrefix(*file);
        if (mode == 0) {
          const auto delta = static_cast<std::int8_t>(in.U8());
          WritePrefix(file, now + static_cast<std::uint64_t>(static_cast<std::int64_t>(delta)));
        } else if (mode == 1) {
          const std::uint64_t size = file->size();
          const std::uint64_t specials[] = {
              0, 1, 2, 7, 8, 100000000, 100000001, 1ull << 63, ~0ull, size - 8, size - 7,
              size, layout->header_length + 1, layout->header_length - 1, 0x100000000ull,
          };
          WritePrefix(file, specials[in.U8() % std::size(specials)]);
        } else {
          WritePrefix(file, in.U64());
        }
        break;
      }
      case RbqOp::kSplice: {
        const std::string_view token = kRbqTokens[in.U8() % kRbqTokens.size()];
        const std::uint16_t pos = in.U16();
        const std::uint8_t removed = in.U8() % 8;
        if (file->size() < 8) break;
        const std::size_t text = TextLength(*file, *layout);
        const std::size_t at = pos % (text + 1);
        Rewrite(file, layout, at, std::min<std::size_t>(removed, text - at), token);
        break;
      }
      case RbqOp::kReplace: {
        const std::string_view anchor = kRbqAnchors[in.U8() % kRbqAnchors.size()];
        const std::uint8_t occurrence = in.U8();
        const std::string_view token = kRbqTokens[in.U8() % kRbqTokens.size()];
        if (file->size() < 8) break;
        const std::string_view text(reinterpret_cast<const char*>(file->data()) + 8,
                                    TextLength(*file, *layout));
        std::vector<std::size_t> hits;
        for (std::size_t p = text.find(anchor); p != std::string_view::npos;
             p = text.find(anchor, p + 1)) {
          hits.push_back(p);
        }
        if (hits.empty()) break;
        Rewrite(file, layout, hits[occurrence % hits.size()], anchor.size(), token);
        break;
      }
      case RbqOp::kFlipBit: {
        const std::uint32_t bit = in.U32();
        if (!file->empty()) (*file)[(bit / 8) % file->size()] ^= static_cast<std::uint8_t>(1u << (bit % 8));
        break;
      }
      case RbqOp::kRepad: {
        const std::uint8_t mode = in.U8();
        if (file->size() < 8) break;
        static const char kPad[] = {' ', '\t', '\n', '\r', '\0'};
        const std::size_t text = TextLength(*file, *layout);
        std::size_t pad = (8 - text % 8) % 8;
        if (pad == 0 && (mode & 0x80) != 0) pad = 8;
        Rewrite(file, layout, text, 0, std::string(pad, kPad[mode % std::size(kPad)]));
        break;
      }
      case RbqOp::kCount:
        break;
    }
  }
}

}  // namespace

std::uint8_t RbqTokenIndex(std::string_view token) { return EntryIndex(kRbqTokens, token, kWho); }
std::uint8_t RbqAnchorIndex(std::string_view anchor) { return EntryIndex(kRbqAnchors, anchor, kWho); }

RbqFileTail DecodeRbqFileTail(const std::uint8_t* t) {
  RbqFileTail tail;
  tail.raw = (t[0] >> 4) == 0xF;
  tail.bits = (t[0] & 1) ? 8 : 4;
  tail.with_norm = (t[0] & 2) != 0;
  tail.tensor_count = 1 + ((t[0] >> 2) & 3) % 3;
  tail.rows = 1 + (t[1] & 7);
  tail.blocks_per_row = 1 + ((t[1] >> 3) & 3);
  tail.magnitude_exponent = t[2] % 56 - 40;
  tail.seed = 0;
  for (int i = 0; i < 5; ++i) tail.seed |= static_cast<std::uint64_t>(t[3 + i]) << (8 * i);
  return tail;
}

std::array<std::uint8_t, kRbqFileTailSize> EncodeRbqFileTail(const RbqFileTail& tail) {
  std::array<std::uint8_t, kRbqFileTailSize> t{};
  t[0] = static_cast<std::uint8_t>((tail.bits == 8 ? 1 : 0) | (tail.with_norm ? 2 : 0) |
                                   (((tail.tensor_count - 1) % 3) << 2) | (tail.raw ? 0xF0 : 0));
  t[1] = static_cast<std::uint8_t>(((tail.rows - 1) & 7) | (((tail.blocks_per_row - 1) & 3) << 3));
  t[2] = static_cast<std::uint8_t>(((tail.magnitude_exponent + 40) % 56 + 56) % 56);
  for (int i = 0; i < 5; ++i) t[3 + i] = static_cast<std::uint8_t>(tail.seed >> (8 * i));
  return t;
}

RbqOpWriter& RbqOpWriter::HeaderByte(std::uint16_t position, std::uint8_t value) {
  Op(RbqOp::kHeaderByte); U16(position); U8(value);
  return *this;
}
RbqOpWriter& RbqOpWriter::DataByte(std::uint16_t position, std::uint8_t value) {
  Op(RbqOp::kDataByte); U16(position); U8(value);
  return *this;
}
RbqOpWriter& RbqOpWriter::ScaleRaw(std::uint16_t block, std::uint16_t scale) {
  Op(RbqOp::kScaleRaw); U16(block); U16(scale);
  return *this;
}
RbqOpWriter& RbqOpWriter::ScaleSpecial(std::uint16_t block, std::uint16_t special) {
  std::size_t i = 0;
  while (i < std::size(kScaleSpecials) && kScaleSpecials[i] != special) ++i;
  if (i == std::size(kScaleSpecials)) std::abort();
  Op(RbqOp::kScaleSpecial); U16(block); U8(static_cast<std::uint8_t>(i));
  return *this;
}
RbqOpWriter& RbqOpWriter::Truncate(std::uint16_t count) {
  Op(RbqOp::kTruncate); U16(count);
  return *this;
}
RbqOpWriter& RbqOpWriter::Append(std::uint8_t count, std::uint8_t value) {
  Op(RbqOp::kAppend); U8(static_cast<std::uint8_t>(count - 1)); U8(value);
  return *this;
}
RbqOpWriter& RbqOpWriter::LengthDelta(std::int8_t delta) {
  Op(RbqOp::kLengthPrefix); U8(0); U8(static_cast<std::uint8_t>(delta));
  return *this;
}
RbqOpWriter& RbqOpWriter::LengthRaw(std::uint64_t value) {
  Op(RbqOp::kLengthPrefix); U8(2);
  for (int i = 0; i < 8; ++i) U8(static_cast<std::uint8_t>(value >> (8 * i)));
  return *this;
}
RbqOpWriter& RbqOpWriter::Splice(std::string_view token, std::uint16_t position,
                                 std::uint8_t removed) {
  Op(RbqOp::kSplice); U8(RbqTokenIndex(token)); U16(position); U8(removed);
  return *this;
}
RbqOpWriter& RbqOpWriter::Replace(std::string_view anchor, std::uint8_t occurrence,
                                  std::string_view token) {
  Op(RbqOp::kReplace); U8(RbqAnchorIndex(anchor)); U8(occurrence); U8(RbqTokenIndex(token));
  return *this;
}
RbqOpWriter& RbqOpWriter::FlipBit(std::uint32_t bit) {
  Op(RbqOp::kFlipBit);
  U32(bit);
  return *this;
}
RbqOpWriter& RbqOpWriter::Repad(std::uint8_t mode) {
  Op(RbqOp::kRepad); U8(mode);
  return *this;
}
std::vector<std::uint8_t> RbqOpWriter::Finish(const RbqFileTail& tail) const {
  return out_.Finish(EncodeRbqFileTail(tail));
}

std::vector<std::uint8_t> RbqFileFromInput(const std::uint8_t* data, std::size_t size) {
  if (size < kRbqFileTailSize) return std::vector<std::uint8_t>(data, data + size);
  const std::size_t body = size - kRbqFileTailSize;
  const RbqFileTail tail = DecodeRbqFileTail(data + body);
  if (tail.raw) return std::vector<std::uint8_t>(data, data + body);

  gen::RbqFileParams params;
  params.bits = tail.bits;
  params.rows = static_cast<std::uint64_t>(tail.rows);
  params.columns = 32 * static_cast<std::uint64_t>(tail.blocks_per_row);
  params.tensor_count = tail.tensor_count;
  params.with_norm = tail.with_norm;
  params.magnitude = std::ldexp(1.0f, tail.magnitude_exponent);
  harness::Rng rng(tail.seed);
  std::vector<std::uint8_t> file = gen::BuildRbqFile(params, rng);

  Layout layout;
  layout.header_length = static_cast<std::size_t>(ReadPrefix(file));
  layout.block_bytes = tail.bits == 4 ? 18 : 34;
  layout.blocks_per_tensor = static_cast<std::size_t>(tail.rows * tail.blocks_per_row);
  layout.tensor_bytes = layout.blocks_per_tensor * layout.block_bytes;
  layout.tensor_count = tail.tensor_count;
  InputReader in(data, body);
  ApplyOps(in, &file, &layout);
  return file;
}

}  // namespace qd::fuzz
