// ggml_kquant_encode.cc: quantdiff's encoders for q2_K..q6_K and iq4_nl,
// held to docs/ggml_blocks.md section 4.5's per-weight bound (not to ggml's
// bytes). Round to nearest with grids that cover each sub-block's range,
// exactly as the bound's derivation assumes: super-scales from the largest
// sub-block step, integer sub-block scales by rounding, codes by rounding
// (x + ml) / dl and clamping. The decode arithmetic (dl = d*scale, ml =
// dmin*min) is the decoder's, so the codes are chosen on the decoded grid.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "codecs/float16.h"
#include "codecs/ggml_blocks.h"
#include "codecs/ggml_blocks_kernels.h"

namespace qd::codec {
namespace {

// F16 bits of v (finite), and v as decoded from them.
std::uint16_t Half(float v) { return F32ToF16(v); }
float Widened(std::uint16_t h) { return F16ToF32(h); }

void StoreHalfAt(std::uint8_t* p, std::uint16_t h) {
  p[0] = static_cast<std::uint8_t>(h & 0xFF);
  p[1] = static_cast<std::uint8_t>(h >> 8);
}

int RoundClamp(float v, int lo, int hi) {
  if (!(v == v)) return lo;
  const float r = std::nearbyint(std::clamp(v, static_cast<float>(lo), static_cast<float>(hi)));
  return static_cast<int>(r);
}

// Codes of one sub-block on the decoded grid dl*q - ml, q in [lo, hi].
void Codes(const float* x, int n, float dl, float ml, int lo, int hi, int* q) {
  for (int i = 0; i < n; ++i) q[i] = dl == 0.0f ? (lo < 0 ? 0 : lo) : RoundClamp((x[i] + ml) / dl, lo, hi);
}

// Min types (q2_K, q4_K, q5_K): per sub-block step D = (max - min(0, min)) / n,
// offset M = -min(0, min); d = max D / S, dmin = max M / S (binary16).
struct MinGrid {
  float d = 0.0f;
  float dmin = 0.0f;
  std::uint16_t d_bits = 0;
  std::uint16_t dmin_bits = 0;
  int scale[16] = {};
  int min[16] = {};
  int q[256] = {};
};

MinGrid FitMinGrid(const float* x, int subs, int per_sub, int n, int s_max) {
  MinGrid g;
  float steps[16];
  float offsets[16];
  float max_step = 0.0f;
  float max_offset = 0.0f;
  for (int j = 0; j < subs; ++j) {
    float lo = 0.0f;
    float hi = -INFINITY;
    for (int i = 0; i < per_sub; ++i) {
      lo = std::min(lo, x[j * per_sub + i]);
      hi = std::max(hi, x[j * per_sub + i]);
    }
    steps[j] = std::max(0.0f, (hi - lo) / static_cast<float>(n));
    offsets[j] = -lo;
    max_step = std::max(max_step, steps[j]);
    max_offset = std::max(max_offset, offsets[j]);
  }
  g.d_bits = Half(max_step / static_cast<float>(s_max));
  g.dmin_bits = Half(max_offset / static_cast<float>(s_max));
  g.d = Widened(g.d_bits);
  g.dmin = Widened(g.dmin_bits);
  for (int j = 0; j < subs; ++j) {
    g.scale[j] = g.d == 0.0f ? 0 : RoundClamp(steps[j] / g.d, 0, s_max);
    g.min[j] = g.dmin == 0.0f ? 0 : RoundClamp(offsets[j] / g.dmin, 0, s_max);
    const float dl = g.d * static_cast<float>(g.scale[j]);
    const float ml = g.dmin * static_cast<float>(g.min[j]);
    Codes(x + j * per_sub, per_sub, dl, ml, 0, n, g.q + j * per_sub);
  }
  return g;
}

// Symmetric types (q3_K, q6_K): D = max|x| / h, codes in [-(h+1), h],
// signed scales up to s_max.
struct SymGrid {
  float d = 0.0f;
  std::uint16_t d_bits = 0;
  int scale[16] = {};
  int q[256] = {};
};

SymGrid FitSymGrid(const float* x, int h, int s_max) {
  SymGrid g;
  float steps[16];
  float max_step = 0.0f;
  for (int j = 0; j < 16; ++j) {
    float a = 0.0f;
    for (int i = 0; i < 16; ++i) a = std::max(a, std::fabs(x[16 * j + i]));
    steps[j] = a / static_cast<float>(h);
    max_step = std::max(max_step, steps[j]);
  }
  g.d_bits = Half(max_step / static_cast<float>(s_max));
  g.d = Widened(g.d_bits);
  for (int j = 0; j < 16; ++j) {
    g.scale[j] = g.d == 0.0f ? 0 : RoundClamp(steps[j] / g.d, 0, s_max);
    Codes(x + 16 * j, 16, g.d * static_cast<float>(g.scale[j]), 0.0f, -(h + 1), h, g.q + 16 * j);
  }
  return g;
}

void EncodeQ2_K(const float* x, std::uint8_t* b) {
  const MinGrid g = FitMinGrid(x, 16, 16, 3, 15);
  std::memset(b, 0, 84);
  for (int s = 0; s < 16; ++s) {
    b[s] = static_cast<std::uint8_t>(g.scale[s] | (g.min[s] << 4));
    for (int l = 0; l < 16; ++l) {
      // Section 3.6: qs byte 32*(s/8) + 16*(s%2) + l, plane (s%8)/2.
      b[16 + 32 * (s / 8) + 16 * (s % 2) + l] |= static_cast<std::uint8_t>(g.q[16 * s + l] << (2 * ((s % 8) / 2)));
    }
  }
  StoreHalfAt(b + 80, g.d_bits);
  StoreHalfAt(b + 82, g.dmin_bits);
}

// Section 3.8's packing of eight 6-bit scales and mins into 12 bytes.
void PackScaleMinK4(const int* scale, const int* min, std::uint8_t* t) {
  for (int j = 0; j < 4; ++j) {
    t[j] = static_cast<std::uint8_t>((scale[j] & 63) | ((scale[j + 4] >> 4) << 6));
    t[j + 4] = static_cast<std::uint8_t>((min[j] & 63) | ((min[j + 4] >> 4) << 6));
    t[j + 8] = static_cast<std::uint8_t>((scale[j + 4] & 15) | ((min[j + 4] & 15) << 4));
  }
}

void EncodeScaleMinK(const float* x, std::uint8_t* b, bool fifth) {
  const MinGrid g = FitMinGrid(x, 8, 32, fifth ? 31 : 15, 63);
  const int bytes = fifth ? 176 : 144;
  const int qs_at = fifth ? 48 : 16;
  std::memset(b, 0, static_cast<std::size_t>(bytes));
  StoreHalfAt(b, g.d_bits);
  StoreHalfAt(b + 2, g.dmin_bits);
  PackScaleMinK4(g.scale, g.min, b + 4);
  for (int s = 0; s < 8; ++s) {
    for (int l = 0; l < 32; ++l) {
      const int q = g.q[32 * s + l];
      b[qs_at + 32 * (s / 2) + l] |= static_cast<std::uint8_t>((q & 15) << (4 * (s % 2)));
      if (fifth) b[16 + l] |= static_cast<std::uint8_t>(((q >> 4) & 1) << s);
    }
  }
}

void EncodeQ3_K(const float* x, std::uint8_t* b) {
  const SymGrid g = FitSymGrid(x, 3, 31);
  std::memset(b, 0, 110);
  for (int s = 0; s < 16; ++s) {
    const int biased = g.scale[s] + 32;  // 6 bits
    b[96 + s % 8] |= static_cast<std::uint8_t>((biased & 15) << (4 * (s / 8)));
    b[104 + s % 4] |= static_cast<std::uint8_t>((biased >> 4) << (2 * (s / 4)));
    const int plane = (s % 8) / 2;
    for (int l = 0; l < 16; ++l) {
      const int column = 16 * (s % 2) + l;
      const int q = g.q[16 * s + l] + 4;  // 0..7: low two bits, high bit set when q >= 0
      b[32 + 32 * (s / 8) + column] |= static_cast<std::uint8_t>((q & 3) << (2 * plane));
      b[column] |= static_cast<std::uint8_t>(((q >> 2) & 1) << (4 * (s / 8) + plane));
    }
  }
  StoreHalfAt(b + 108, g.d_bits);
}

void EncodeQ6_K(const float* x, std::uint8_t* b) {
  const SymGrid g = FitSymGrid(x, 31, 127);
  std::memset(b, 0, 210);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128;
    const int quarter = (i % 128) / 32;
    const int column = i % 32;
    const int q = g.q[i] + 32;  // 0..63
    b[64 * h + 32 * (quarter % 2) + column] |= static_cast<std::uint8_t>((q & 15) << (quarter < 2 ? 0 : 4));
    b[128 + 32 * h + column] |= static_cast<std::uint8_t>((q >> 4) << (2 * quarter));
  }
  for (int s = 0; s < 16; ++s) b[192 + s] = static_cast<std::uint8_t>(static_cast<std::int8_t>(g.scale[s]));
  StoreHalfAt(b + 208, g.d_bits);
}

void EncodeIq4Nl(const float* x, std::uint8_t* b) {
  float a = 0.0f;
  for (int i = 0; i < 32; ++i) a = std::max(a, std::fabs(x[i]));
  const std::uint16_t d_bits = Half(a / 113.0f);
  const float d = Widened(d_bits);
  std::memset(b, 0, 18);
  StoreHalfAt(b, d_bits);
  for (int i = 0; i < 32; ++i) {
    int best = 8;  // value 1 * d: any code when d is 0
    float best_error = INFINITY;
    for (int c = 0; c < 16; ++c) {
      const float error = std::fabs(x[i] - d * static_cast<float>(kGgmlIq4NlValues[static_cast<std::size_t>(c)]));
      if (error < best_error) {
        best_error = error;
        best = c;
      }
    }
    b[2 + i % 16] |= static_cast<std::uint8_t>(best << (4 * (i / 16)));
  }
}

}  // namespace

bool GgmlEncodeWithinBound(GgmlType type, const float* in, std::size_t block_count, std::uint8_t* blocks) {
  const GgmlTypeInfo& info = GgmlInfo(type);
  void (*encode)(const float*, std::uint8_t*) = nullptr;
  switch (type) {
    case GgmlType::kQ2_K: encode = EncodeQ2_K; break;
    case GgmlType::kQ3_K: encode = EncodeQ3_K; break;
    case GgmlType::kQ4_K: encode = [](const float* x, std::uint8_t* b) { EncodeScaleMinK(x, b, false); }; break;
    case GgmlType::kQ5_K: encode = [](const float* x, std::uint8_t* b) { EncodeScaleMinK(x, b, true); }; break;
    case GgmlType::kQ6_K: encode = EncodeQ6_K; break;
    case GgmlType::kIq4Nl: encode = EncodeIq4Nl; break;
    default: return false;
  }
  for (std::size_t k = 0; k < block_count; ++k) {
    encode(in + k * static_cast<std::size_t>(info.values), blocks + k * static_cast<std::size_t>(info.bytes));
  }
  return true;
}

}  // namespace qd::codec
