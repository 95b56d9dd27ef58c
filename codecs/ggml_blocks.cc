// ggml_blocks.cc: ggml block decoding and the legacy reference encoders
// (docs/ggml_blocks.md). Every binary32 operation here rounds once and in
// the contract's order (compiled with -ffp-contract=off: q4_1's x*d + m is
// two roundings, never an FMA, section 3).
#include "codecs/ggml_blocks.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "codecs/float16.h"
#include "codecs/ggml_blocks_kernels.h"

namespace qd::codec {
namespace {

constexpr std::array<GgmlTypeInfo, 12> kTypes = {{
    {GgmlType::kQ4_0, "q4_0", 2, 32, 18, true},
    {GgmlType::kQ4_1, "q4_1", 3, 32, 20, true},
    {GgmlType::kQ5_0, "q5_0", 6, 32, 22, true},
    {GgmlType::kQ5_1, "q5_1", 7, 32, 24, true},
    {GgmlType::kQ8_0, "q8_0", 8, 32, 34, true},
    {GgmlType::kQ2_K, "q2_K", 10, 256, 84, false},
    {GgmlType::kQ3_K, "q3_K", 11, 256, 110, false},
    {GgmlType::kQ4_K, "q4_K", 12, 256, 144, false},
    {GgmlType::kQ5_K, "q5_K", 13, 256, 176, false},
    {GgmlType::kQ6_K, "q6_K", 14, 256, 210, false},
    {GgmlType::kIq4Nl, "iq4_nl", 20, 32, 18, false},
    {GgmlType::kMxfp4, "mxfp4", 39, 32, 17, false},
}};

void DecodeQ4_0(const std::uint8_t* b, float* y) {
  const float d = GgmlHalfAt(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((b[2 + j] & 0x0F) - 8) * d;
    y[j + 16] = static_cast<float>((b[2 + j] >> 4) - 8) * d;
  }
}

void DecodeQ4_1(const std::uint8_t* b, float* y) {
  const float d = GgmlHalfAt(b);
  const float m = GgmlHalfAt(b + 2);
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(b[4 + j] & 0x0F) * d + m;
    y[j + 16] = static_cast<float>(b[4 + j] >> 4) * d + m;
  }
}

void DecodeQ5_0(const std::uint8_t* b, float* y) {
  const float d = GgmlHalfAt(b);
  const std::uint32_t qh = GgmlU32At(b + 2);
  for (int j = 0; j < 16; ++j) {
    const int lo = static_cast<int>((b[6 + j] & 0x0F) | (((qh >> j) & 1u) << 4));
    const int hi = static_cast<int>((b[6 + j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
    y[j] = static_cast<float>(lo - 16) * d;
    y[j + 16] = static_cast<float>(hi - 16) * d;
  }
}

void DecodeQ5_1(const std::uint8_t* b, float* y) {
  const float d = GgmlHalfAt(b);
  const float m = GgmlHalfAt(b + 2);
  const std::uint32_t qh = GgmlU32At(b + 4);
  for (int j = 0; j < 16; ++j) {
    const unsigned lo = (b[8 + j] & 0x0Fu) | (((qh >> j) & 1u) << 4);
    const unsigned hi = (b[8 + j] >> 4) | (((qh >> (j + 16)) & 1u) << 4);
    y[j] = static_cast<float>(lo) * d + m;
    y[j + 16] = static_cast<float>(hi) * d + m;
  }
}

void DecodeQ8_0(const std::uint8_t* b, float* y) {
  const float d = GgmlHalfAt(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<std::int8_t>(b[2 + j])) * d;
}

void DecodeQ2_K(const std::uint8_t* b, float* y) {
  const std::uint8_t* scales = b;
  const std::uint8_t* qs = b + 16;
  const float d = GgmlHalfAt(b + 80);
  const float dmin = GgmlHalfAt(b + 82);
  // Section 3.6: sub-block s (16 weights) uses scales[s]; its weights are
  // 2-bit fields of qs[32*(s/8) + 16*(s%2) + l] at bit 2*((s%8)/2).
  for (int s = 0; s < 16; ++s) {
    const float dl = d * static_cast<float>(scales[s] & 0x0F);
    const float ml = dmin * static_cast<float>(scales[s] >> 4);
    const std::uint8_t* q = qs + 32 * (s / 8) + 16 * (s % 2);
    const int shift = 2 * ((s % 8) / 2);
    for (int l = 0; l < 16; ++l) y[16 * s + l] = dl * static_cast<float>((q[l] >> shift) & 3) - ml;
  }
}

void DecodeQ3_K(const std::uint8_t* b, float* y) {
  const std::uint8_t* hmask = b;
  const std::uint8_t* qs = b + 32;
  const std::uint8_t* sc = b + 96;
  const float d = GgmlHalfAt(b + 108);
  for (int s = 0; s < 16; ++s) {
    // Section 3.7: 6-bit scale, low nibble from sc[s % 8] (high half for
    // s >= 8), top two bits from sc[8 + s % 4] at bit 2*(s/4); bias 32.
    const int low = (s < 8) ? (sc[s] & 0x0F) : (sc[s - 8] >> 4);
    const int high = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    const float dl = d * static_cast<float>((low | (high << 4)) - 32);
    const int group = s / 8;           // which 128-weight half
    const int plane = (s % 8) / 2;     // which 2-bit plane and hmask bit
    const int offset = 16 * (s % 2);   // first or second 16 of the 32 bytes
    const std::uint8_t* q = qs + 32 * group + offset;
    const std::uint8_t* hm = hmask + offset;
    const int bit = 4 * group + plane;
    for (int l = 0; l < 16; ++l) {
      const int low2 = (q[l] >> (2 * plane)) & 3;
      const int value = low2 - (((hm[l] >> bit) & 1) ? 0 : 4);
      y[16 * s + l] = dl * static_cast<float>(value);
    }
  }
}

// q4_K and q5_K (sections 3.8, 3.9): eight sub-blocks of 32 with a 6-bit
// scale and min each; q5_K adds a fifth bit per weight from qh (bit s of
// qh[l] for weight l of sub-block s). qh is null for q4_K.
void DecodeScaleMinK(const std::uint8_t* b, const std::uint8_t* qh, const std::uint8_t* qs, float* y) {
  for (int s = 0; s < 8; ++s) {
    float dl = 0.0f;
    float ml = 0.0f;
    GgmlSubBlockScaleMin(b, s, &dl, &ml);
    const std::uint8_t* q = qs + 32 * (s / 2);
    const int shift = 4 * (s % 2);
    for (int l = 0; l < 32; ++l) {
      const int high = qh == nullptr ? 0 : ((qh[l] >> s) & 1) << 4;
      y[32 * s + l] = dl * static_cast<float>(((q[l] >> shift) & 0x0F) | high) - ml;
    }
  }
}

void DecodeQ4_K(const std::uint8_t* b, float* y) { DecodeScaleMinK(b, nullptr, b + 16, y); }

void DecodeQ5_K(const std::uint8_t* b, float* y) { DecodeScaleMinK(b, b + 16, b + 48, y); }

void DecodeQ6_K(const std::uint8_t* b, float* y) {
  const std::uint8_t* ql = b;
  const std::uint8_t* qh = b + 128;
  const std::uint8_t* sc = b + 192;
  const float d = GgmlHalfAt(b + 208);
  // Section 3.10: weight i = 128*h + 32*quarter + l.
  for (int h = 0; h < 2; ++h) {
    for (int quarter = 0; quarter < 4; ++quarter) {
      for (int l = 0; l < 32; ++l) {
        const std::uint8_t low_byte = ql[64 * h + 32 * (quarter % 2) + l];
        const int low = (quarter < 2) ? (low_byte & 0x0F) : (low_byte >> 4);
        const int high = (qh[32 * h + l] >> (2 * quarter)) & 3;
        const int q = (low | (high << 4)) - 32;
        const float scale = static_cast<float>(static_cast<std::int8_t>(sc[8 * h + 2 * quarter + l / 16]));
        y[128 * h + 32 * quarter + l] = d * scale * static_cast<float>(q);
      }
    }
  }
}

void DecodeIq4Nl(const std::uint8_t* b, float* y) {
  const float d = GgmlHalfAt(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(kGgmlIq4NlValues[b[2 + j] & 0x0F]);
    y[j + 16] = d * static_cast<float>(kGgmlIq4NlValues[b[2 + j] >> 4]);
  }
}

void DecodeMxfp4(const std::uint8_t* b, float* y) {
  const float d = GgmlE8M0HalfToF32(b[0]);
  for (int j = 0; j < 16; ++j) {
    y[j] = kGgmlFp4Doubled[b[1 + j] & 0x0F] * d;
    y[j + 16] = kGgmlFp4Doubled[b[1 + j] >> 4] * d;
  }
}

using BlockDecoder = void (*)(const std::uint8_t*, float*);
constexpr std::array<BlockDecoder, 12> kDecoders = {DecodeQ4_0, DecodeQ4_1, DecodeQ5_0, DecodeQ5_1,
                                                    DecodeQ8_0, DecodeQ2_K, DecodeQ3_K, DecodeQ4_K,
                                                    DecodeQ5_K, DecodeQ6_K, DecodeIq4Nl, DecodeMxfp4};

// ---- Legacy encoders (section 4) ----

// Section 4.1: binary32 to binary16 rounding to nearest, ties to even; a NaN
// becomes the sign with 0x7E00, as ggml's conversion writes it.
void StoreHalf(float value, std::uint8_t* p) {
  const std::uint16_t h = std::isnan(value) ? static_cast<std::uint16_t>((std::signbit(value) ? 0x8000u : 0u) | 0x7E00u)
                                            : F32ToF16(value);
  p[0] = static_cast<std::uint8_t>(h & 0xFF);
  p[1] = static_cast<std::uint8_t>(h >> 8);
}

// Section 4.2: ggml converts float to a narrow integer with a C cast; a
// value with no int32 truncation (NaN, infinity, |v| >= 2^31) is undefined
// in C and gives x86-64's integer indefinite, whose low byte is 0. Otherwise
// the low byte of the truncated int32.
std::uint8_t LowByteOfTruncation(float v) {
  if (!(std::fabs(v) < 2147483648.0f)) return 0;
  return static_cast<std::uint8_t>(static_cast<std::uint32_t>(static_cast<std::int32_t>(v)) & 0xFFu);
}

// The value of largest magnitude (the first of equal magnitudes) and that
// magnitude; NaNs never win (section 4.3).
float SignedAbsMax(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void MinMax(const float* x, int n, float* min, float* max) {
  *min = std::numeric_limits<float>::max();
  *max = -std::numeric_limits<float>::max();
  for (int j = 0; j < n; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

float Reciprocal(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

int MinInt(int a, int b) { return a < b ? a : b; }

// Symmetric 4/5-bit: d = max / -(2^(bits-1)), code = min(2^bits - 1, trunc(x*id + 2^(bits-1) + 0.5)).
void EncodeSymmetric(const float* x, int bits, std::uint8_t* q) {
  const float max = SignedAbsMax(x, 32);
  const float d = max / -static_cast<float>(1 << (bits - 1));
  const float id = Reciprocal(d);
  const float offset = static_cast<float>(1 << (bits - 1)) + 0.5f;
  for (int j = 0; j < 32; ++j) {
    const int code = static_cast<std::int8_t>(LowByteOfTruncation(x[j] * id + offset));
    q[j] = static_cast<std::uint8_t>(MinInt((1 << bits) - 1, code));
  }
  StoreHalf(d, q + 32);
}

// Asymmetric 4/5-bit: d = (max - min) / (2^bits - 1), code = trunc((x - min)*id + 0.5)
// (q4_1 caps at 15 after an int8 cast; q5_1 takes the uint8 cast as is).
void EncodeAsymmetric(const float* x, int bits, std::uint8_t* q, float* min_out) {
  float min = 0.0f;
  float max = 0.0f;
  MinMax(x, 32, &min, &max);
  const float d = (max - min) / static_cast<float>((1 << bits) - 1);
  const float id = Reciprocal(d);
  for (int j = 0; j < 32; ++j) {
    const std::uint8_t low = LowByteOfTruncation((x[j] - min) * id + 0.5f);
    q[j] = bits == 4 ? static_cast<std::uint8_t>(MinInt(15, static_cast<std::int8_t>(low))) : low;
  }
  StoreHalf(d, q + 32);
  *min_out = min;
}

// q[0..31] are the block's codes, q[32..33] its stored d; packs nibbles
// (weight j low, j + 16 high) and, for 5 bits, the fifth bits into qh.
void PackNibbles(const std::uint8_t* q, std::uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<std::uint8_t>((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
}

void PackFifthBits(const std::uint8_t* q, std::uint8_t* qh) {
  std::uint32_t bits = 0;
  for (int j = 0; j < 32; ++j) bits |= static_cast<std::uint32_t>((q[j] >> 4) & 1u) << j;
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<std::uint8_t>(bits >> (8 * k));
}

// Where the legacy 4/5-bit encoders put their fields (section 3.1 to 3.4).
struct LegacyLayout {
  int bits;
  bool with_min;  // asymmetric: m at bytes 2..3
  int qh_at;      // fifth bits, or -1
  int qs_at;      // nibbles
};

void EncodeBlock(GgmlType type, const float* x, std::uint8_t* out) {
  static constexpr LegacyLayout kLayouts[] = {{4, false, -1, 2}, {4, true, -1, 4}, {5, false, 2, 6}, {5, true, 4, 8}};
  if (type != GgmlType::kQ8_0) {
    const LegacyLayout& layout = kLayouts[static_cast<std::size_t>(type)];
    std::uint8_t q[34];
    float min = 0.0f;
    if (layout.with_min) {
      EncodeAsymmetric(x, layout.bits, q, &min);
      StoreHalf(min, out + 2);
    } else {
      EncodeSymmetric(x, layout.bits, q);
    }
    std::memcpy(out, q + 32, 2);
    if (layout.qh_at >= 0) PackFifthBits(q, out + layout.qh_at);
    PackNibbles(q, out + layout.qs_at);
    return;
  }
  // q8_0 (section 4.4): d = amax / 127, code = roundf(x * id). ggml's
  // MAX(a, b) is a > b ? a : b, so a NaN input makes amax NaN.
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = amax > std::fabs(x[j]) ? amax : std::fabs(x[j]);
  const float d = amax / 127.0f;
  const float id = Reciprocal(d);
  StoreHalf(d, out);
  for (int j = 0; j < 32; ++j) out[2 + j] = LowByteOfTruncation(std::round(x[j] * id));
}

}  // namespace

std::span<const GgmlTypeInfo> GgmlTypes() { return kTypes; }

const GgmlTypeInfo* FindGgmlType(std::string_view name) {
  for (const GgmlTypeInfo& info : kTypes) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

const GgmlTypeInfo& GgmlInfo(GgmlType type) { return kTypes[static_cast<std::size_t>(type)]; }

void GgmlDecode(GgmlType type, const std::uint8_t* blocks, std::size_t block_count, float* out, Kernel kernel) {
  // The scalar kernel (and a build without AVX2 code) runs the scalar
  // decoders, the truth the AVX2 ones are tested against.
  if (HasAvx2Code(kernel) && GgmlDecodeAvx2(type, blocks, block_count, out)) return;
  const GgmlTypeInfo& info = GgmlInfo(type);
  const BlockDecoder decode = kDecoders[static_cast<std::size_t>(type)];
  for (std::size_t i = 0; i < block_count; ++i) {
    decode(blocks + i * static_cast<std::size_t>(info.bytes), out + i * static_cast<std::size_t>(info.values));
  }
}

bool GgmlEncode(GgmlType type, const float* in, std::size_t block_count, std::uint8_t* blocks) {
  const GgmlTypeInfo& info = GgmlInfo(type);
  if (!info.legacy_encoder) return false;
  for (std::size_t i = 0; i < block_count; ++i) {
    EncodeBlock(type, in + i * 32, blocks + i * static_cast<std::size_t>(info.bytes));
  }
  return true;
}

}  // namespace qd::codec
