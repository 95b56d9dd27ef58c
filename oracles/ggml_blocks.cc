// ggml_blocks.cc: ggml block decoding as docs/ggml_blocks.md section 3
// states it, weight by weight. Compiled with -ffp-contract=off: each
// product and each sum below rounds once to binary32, in the written order.
#include "oracles/ggml_blocks.h"

#include <cstddef>
#include <string>

#include "oracles/bytes.h"
#include "oracles/safetensors.h"

namespace qd::oracle {
namespace {

// `width` bits starting at bit `bit` of the block, bit 0 being the least
// significant bit of byte 0 (every ggml field is little endian, section 2).
int Bits(const std::uint8_t* block, int bit, int width) {
  int value = 0;
  for (int k = 0; k < width; ++k) {
    const int at = bit + k;
    const int one = (block[at / 8] >> (at % 8)) & 1;
    value = value | (one << k);
  }
  return value;
}

float HalfField(const std::uint8_t* block, int byte_offset) { return HalfToFloat(LoadU16(block + byte_offset)); }

// Section 2.2: E8M0 byte e means 2^(e - 127); 255 means NaN.
float E8M0(int e) {
  if (e == 255) return FloatFromBits(0x7FC00000u);
  if (e == 0) return FloatFromBits(0x00400000u);  // 2^-127, subnormal
  return FloatFromBits(static_cast<std::uint32_t>(e) << 23);
}

// --- Legacy types, section 3.1 to 3.5: weight i of 32. Nibble of weight i:
// byte (i mod 16) of qs, low half for i < 16, high half otherwise.
int Nibble(const std::uint8_t* block, int qs_offset, int i) {
  return Bits(block, 8 * (qs_offset + i % 16) + 4 * (i / 16), 4);
}

float Q4_0(const std::uint8_t* b, int i) {
  const float d = HalfField(b, 0);
  const int q = Nibble(b, 2, i) - 8;
  return static_cast<float>(q) * d;
}

float Q4_1(const std::uint8_t* b, int i) {
  const float d = HalfField(b, 0);
  const float m = HalfField(b, 2);
  const float scaled = static_cast<float>(Nibble(b, 4, i)) * d;
  return scaled + m;
}

float Q5_0(const std::uint8_t* b, int i) {
  const float d = HalfField(b, 0);
  const int fifth = Bits(b, 8 * 2 + i, 1);
  const int q = (Nibble(b, 6, i) + 16 * fifth) - 16;
  return static_cast<float>(q) * d;
}

float Q5_1(const std::uint8_t* b, int i) {
  const float d = HalfField(b, 0);
  const float m = HalfField(b, 2);
  const int fifth = Bits(b, 8 * 4 + i, 1);
  const int q = Nibble(b, 8, i) + 16 * fifth;
  const float scaled = static_cast<float>(q) * d;
  return scaled + m;
}

float Q8_0(const std::uint8_t* b, int i) {
  const float d = HalfField(b, 0);
  int q = b[2 + i];
  if (q >= 128) q -= 256;
  return static_cast<float>(q) * d;
}

// q2_K, q4_K and q5_K: (d*scale)*q minus (dmin*min), each product and the
// difference rounded once (sections 3.6, 3.8, 3.9).
float ScaledMinusMin(float d, float dmin, int scale, int min, int q) {
  const float dl = d * static_cast<float>(scale);
  const float ml = dmin * static_cast<float>(min);
  const float scaled = dl * static_cast<float>(q);
  return scaled - ml;
}

// --- K-quants, 256 weights, section 3.6 to 3.10. Weight i lies in half
// h = i / 128 and, within it, at r = i % 128.

float Q2_K(const std::uint8_t* b, int i) {
  const int h = i / 128;
  const int r = i % 128;
  const int plane = r / 32;       // 2-bit plane: bits 2*plane of the byte
  const int byte = 32 * h + r % 32;
  const int sub = i / 16;          // 16 sub-blocks of 16
  const int q = Bits(b, 8 * (16 + byte) + 2 * plane, 2);
  return ScaledMinusMin(HalfField(b, 80), HalfField(b, 82), Bits(b, 8 * sub, 4), Bits(b, 8 * sub + 4, 4), q);
}

float Q3_K(const std::uint8_t* b, int i) {
  const int h = i / 128;
  const int r = i % 128;
  const int plane = r / 32;
  const int column = r % 32;
  const int sub = i / 16;
  const int low2 = Bits(b, 8 * (32 + 32 * h + column) + 2 * plane, 2);
  const int high_bit = Bits(b, 8 * column + 4 * h + plane, 1);
  const int q = low2 - (high_bit == 1 ? 0 : 4);
  // 6-bit scale of sub-block s: low 4 bits at scales byte s % 8 (bit 4 * (s / 8)),
  // high 2 bits at scales byte 8 + s % 4 (bit 2 * (s / 4)); minus 32.
  const int low4 = Bits(b, 8 * (96 + sub % 8) + 4 * (sub / 8), 4);
  const int high2 = Bits(b, 8 * (96 + 8 + sub % 4) + 2 * (sub / 4), 2);
  const int scale = (low4 + 16 * high2) - 32;
  const float d = HalfField(b, 108);
  const float dl = d * static_cast<float>(scale);
  return dl * static_cast<float>(q);
}

// Section 3.8: 6-bit scale and min number j (0..7) of the 12 bytes at `at`.
void ScaleAndMin(const std::uint8_t* b, int at, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = Bits(b, 8 * (at + j), 6);
    *min = Bits(b, 8 * (at + 4 + j), 6);
  } else {
    *scale = Bits(b, 8 * (at + 4 + j), 4) + 16 * Bits(b, 8 * (at + j - 4) + 6, 2);
    *min = Bits(b, 8 * (at + 4 + j) + 4, 4) + 16 * Bits(b, 8 * (at + j) + 6, 2);
  }
}

// Sections 3.8 and 3.9: weight i of sub-block i / 32 with its 6-bit scale
// and min.
float ScaleMinK(const std::uint8_t* b, int i, int q) {
  int scale = 0;
  int min = 0;
  ScaleAndMin(b, 4, i / 32, &scale, &min);
  return ScaledMinusMin(HalfField(b, 0), HalfField(b, 2), scale, min, q);
}

float Q4_K(const std::uint8_t* b, int i) {
  const int sub = i / 32;
  const int q = Bits(b, 8 * (16 + 32 * (sub / 2) + i % 32) + 4 * (sub % 2), 4);
  return ScaleMinK(b, i, q);
}

float Q5_K(const std::uint8_t* b, int i) {
  const int sub = i / 32;
  const int low4 = Bits(b, 8 * (48 + 32 * (sub / 2) + i % 32) + 4 * (sub % 2), 4);
  const int fifth = Bits(b, 8 * (16 + i % 32) + sub, 1);
  return ScaleMinK(b, i, low4 + 16 * fifth);
}

float Q6_K(const std::uint8_t* b, int i) {
  const int h = i / 128;
  const int r = i % 128;
  const int quarter = r / 32;
  const int column = r % 32;
  const int low4 = Bits(b, 8 * (64 * h + 32 * (quarter % 2) + column) + 4 * (quarter / 2), 4);
  const int high2 = Bits(b, 8 * (128 + 32 * h + column) + 2 * quarter, 2);
  const int q = (low4 + 16 * high2) - 32;
  int scale = b[192 + i / 16];
  if (scale >= 128) scale -= 256;
  const float d = HalfField(b, 208);
  const float ds = d * static_cast<float>(scale);
  return ds * static_cast<float>(q);
}

float Iq4Nl(const std::uint8_t* b, int i) {
  static const int kCodeBook[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  const float d = HalfField(b, 0);
  return d * static_cast<float>(kCodeBook[Nibble(b, 2, i)]);
}

float Mxfp4(const std::uint8_t* b, int i) {
  // Section 3.12: E2M1 code (sign, 2-bit exponent, 1-bit mantissa) times
  // the E8M0 scale; a code's value is listed, not computed.
  static const float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const int code = Nibble(b, 1, i);
  const float magnitude = kE2M1[code % 8];
  const float value = code >= 8 ? -magnitude : magnitude;
  return value * E8M0(b[0]);
}

struct TypeRow {
  const char* name;
  int weights;
  int bytes;
  float (*weight)(const std::uint8_t*, int);
};

const TypeRow kRows[] = {
    {"q4_0", 32, 18, Q4_0},   {"q4_1", 32, 20, Q4_1},    {"q5_0", 32, 22, Q5_0},   {"q5_1", 32, 24, Q5_1},
    {"q8_0", 32, 34, Q8_0},   {"q2_K", 256, 84, Q2_K},   {"q3_K", 256, 110, Q3_K}, {"q4_K", 256, 144, Q4_K},
    {"q5_K", 256, 176, Q5_K}, {"q6_K", 256, 210, Q6_K},  {"iq4_nl", 32, 18, Iq4Nl}, {"mxfp4", 32, 17, Mxfp4},
};

const TypeRow* RowOf(std::string_view type) {
  for (const TypeRow& row : kRows) {
    if (type == row.name) return &row;
  }
  return nullptr;
}

}  // namespace

std::optional<GgmlBlockShape> GgmlBlockShapeOf(std::string_view type) {
  const TypeRow* row = RowOf(type);
  if (row == nullptr) return std::nullopt;
  return GgmlBlockShape{row->weights, row->bytes};
}

bool DecodeGgmlBlocks(std::string_view type, const std::vector<std::uint8_t>& bytes, std::vector<float>* out) {
  out->clear();
  const TypeRow* row = RowOf(type);
  if (row == nullptr || bytes.size() % static_cast<std::size_t>(row->bytes) != 0) return false;
  const std::size_t blocks = bytes.size() / static_cast<std::size_t>(row->bytes);
  out->reserve(blocks * static_cast<std::size_t>(row->weights));
  for (std::size_t k = 0; k < blocks; ++k) {
    const std::uint8_t* block = bytes.data() + k * static_cast<std::size_t>(row->bytes);
    for (int i = 0; i < row->weights; ++i) out->push_back(row->weight(block, i));
  }
  return true;
}

}  // namespace qd::oracle
