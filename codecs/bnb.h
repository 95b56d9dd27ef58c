// bnb.h: production codec for bitsandbytes weight files (docs/bnb.md; spec
// ../shared/specs/000_0c91ab05e721f99e.txt; rules BNB-001..BNB-004,
// BNB-101..BNB-108; peer vectors ../shared/peer/bnb/).
//
// A safetensors file holds bnb *layers*: one logical weight W plus the
// tensors that describe it. Three kinds are read: 4-bit NF4/FP4 (HF and
// GPT-QModel key layouts, flat or nested statistics), 8-bit blockwise (the
// peer harness's layout) and int8 row-scaled (Linear8bitLt). ReadBnb runs the
// container rules, then every layer's checks in the documented order, and
// stops at the first error. DecodeBnbFile turns an accepted file into
// binary32 tensors with scalar or AVX2 kernels; every kernel gives the same
// bits.
//
//   qd::Outcome o = qd::codec::DecodeBnbFile(bytes, "model.safetensors");
//   if (!o.refused) for (const qd::DecodedTensor& t : o.tensors) Use(t);
//
// The encoders reproduce bitsandbytes' default (pure torch) backend as the
// peer vectors record it, so that corpus files can be made here and checked
// against bnb's own output.
#ifndef QUANTDIFF_CODECS_BNB_H_
#define QUANTDIFF_CODECS_BNB_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "quantdiff/tensor_sink.h"
#include "codecs/kernels.h"
#include "codecs/tensor_table.h"
#include "quantdiff/plain_data.h"

namespace qd::codec {

enum class BnbLayerKind : std::uint8_t { k4bit, kBlockwise8, kInt8Rows };
enum class Bnb4bitType : std::uint8_t { kNf4, kFp4 };
// The restored dtype: decoded values are rounded to it (RNE) and widened.
enum class BnbDtype : std::uint8_t { kFloat16, kBfloat16, kFloat32 };

// get_4bit_type(quant_type): 16 binary32 values indexed by the 4-bit code.
// FP4 code 8 is +0.0, as bnb's Python table has it (docs/bnb.md "FP4 code 8").
const std::array<float, 16>& Bnb4bitTable(Bnb4bitType type);

// binary32 nearest 1/127, the int8 row-scale factor (0x3c010204).
inline constexpr std::uint32_t kBnbInt8ScaleBits = 0x3c010204u;

inline constexpr std::size_t kBnbNoTensor = static_cast<std::size_t>(-1);

// One layer of an accepted file; tensor fields index BnbResult::table
// (kBnbNoTensor when absent), so a moved result stays valid.
struct BnbLayer {
  BnbLayerKind kind = BnbLayerKind::k4bit;
  std::string name;  // W, the decoded tensor's name
  std::size_t weight = kBnbNoTensor;
  std::size_t state = kBnbNoTensor;  // 4-bit quant_state tensor (none for a list state)
  std::size_t absmax = kBnbNoTensor;
  std::size_t quant_map = kBnbNoTensor;
  std::size_t nested_absmax = kBnbNoTensor;
  std::size_t nested_quant_map = kBnbNoTensor;
  std::size_t scale = kBnbNoTensor;          // int8: SCB / weight_scb
  std::size_t weight_format = kBnbNoTensor;  // int8 HF, optional

  Bnb4bitType quant_type = Bnb4bitType::kNf4;
  BnbDtype dtype = BnbDtype::kFloat32;
  std::uint64_t blocksize = 0;
  std::uint64_t n = 0;                // elements of W
  std::vector<std::uint64_t> shape;   // decoded shape (compatibility transpose applied)
  bool transposed = false;            // bnb's compatibility transpose: shape is [c, r]
  bool nested = false;
  std::uint64_t nested_blocksize = 0;
  float nested_offset = 0.0f;         // fl32 of the JSON number
  std::uint64_t rows = 0, columns = 0;  // int8
};

struct BnbResult {
  bool refused = false;
  bool is_bnb = false;  // false: no layer; the container's own reading stands
  std::vector<qd::Finding> findings;
  // The tensors the layers index; a list layer's pieces are appended to it
  // as unlisted value tensors named W.quant_state[...] (docs/pt.md 7.3).
  TensorTable table;
  std::vector<BnbLayer> layers;  // in byte order of W
  // Floating tensors (F32, F16, BF16, F64) of the table that belong to no layer, by name.
  std::vector<std::size_t> plain_float_tensors;

  // A result refused by its container, before any layer was read.
  static BnbResult Refusal(std::vector<qd::Finding> findings) {
    BnbResult r;
    r.refused = true;
    r.findings = std::move(findings);
    return r;
  }
};

// ---- the QuantState list layout (docs/pt.md 7) --------------------------------
// A list lives in a container's value model (a .pt file), which this reader
// does not know: the container's side finds the lists and maps each onto the
// dict layout's keys (codecs/bnb_pt_layers.cc), and the checks below run on
// the mapped keys as on a JSON state.

// The state keys of docs/bnb.md 4-bit step 2 / blockwise step 1, read from a
// JSON object or mapped from a QuantState list (docs/pt.md 7.3), so that the
// later steps run once for every layout.
struct BnbStateKeys {
  std::string quant_type;
  std::uint64_t blocksize = 0;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  bool nested = false;  // JSON: a nested_* key; list: S[4] is not None
  std::optional<std::uint64_t> nested_blocksize;
  std::optional<std::string> nested_dtype;
  std::optional<double> nested_offset;
  // Where findings about the state point: the state tensor and the start of
  // its JSON text, or the list (`W.quant_state`) at the header offset.
  std::string tensor;
  std::int64_t at = 0;
};

// One list mapped (docs/pt.md 7.4 step 2): its keys, the list-only facts step
// 7 checks before the shared ones, and its pieces appended to the table as
// value tensors named W.quant_state[...]; or its BNB-101 refusal.
struct BnbListMapping {
  BnbStateKeys keys;
  bool state2_without_code = false;  // the docstring's 6-item state2
  bool nested_of_nested = false;     // nested2 True, offset2 or state2b not None
  std::size_t absmax = kBnbNoTensor, quant_map = kBnbNoTensor;
  std::size_t nested_absmax = kBnbNoTensor, nested_quant_map = kBnbNoTensor;
  bool refused = false;  // BNB-101 on keys.tensor with field, offset, message
  std::string field;
  std::int64_t offset = 0;
  std::string message;
};

// The lists of one table: W and the id `map` knows the list by, in value
// table order (docs/pt.md 7.2); `map` maps one (and may append value tensors
// to table).
struct BnbListStates {
  std::vector<std::pair<std::string, std::uint32_t>> lists;
  BnbListMapping (*map)(TensorTable* table, std::uint32_t list, const std::string& w) = nullptr;
};

// Detection (README "Which format a file is"): a state tensor names a layer,
// or the blockwise-8 key and a W with absmax and quant_map are there.
bool HasBnbLayer(const TensorTable& table);
// Container rules, then the bnb rules in docs/bnb.md's order.
BnbResult ReadBnb(qd::ByteView file, const std::string& file_name);
// The bnb rules on an accepted container's tensor table: a safetensors
// container, or a .pt file's table with its QuantState list layers
// (docs/pt.md 6.4, 7). The container's findings (warnings) come first.
BnbResult ReadBnbTable(TensorTable table, const std::string& file_name,
                       std::vector<qd::Finding> container_findings = {},
                       const BnbListStates& lists = {});
// Announces and passes an accepted bnb result's tensors (is_bnb): every
// layer's W and every floating tensor of no layer, sorted by name bytes.
// False when the sink stopped early.
bool StreamBnbLayers(const BnbResult& result, TensorSink& sink, Kernel kernel = BestKernel());

// Findings, and for an accepted bnb file every layer's W plus every floating
// tensor of no layer, sorted by name bytes. A file without a bnb layer decodes
// exactly as the container reading does (floating tensors in container order).
// StreamBnbFile passes the same tensors one at a time to a sink (announced
// first); DecodeBnbFile collects them.
qd::Outcome StreamBnbFile(qd::ByteView file, const std::string& file_name, TensorSink& sink,
                          Kernel kernel = BestKernel());
qd::Outcome DecodeBnbFile(qd::ByteView file, const std::string& file_name,
                          Kernel kernel = BestKernel());

// True when an accepted file has an FP4 layer using code 8, whose value the
// upstream decoders disagree on (+0.0 in bnb's Python table, which quantdiff
// follows; -0.0 in its CUDA and C++ CPU decoders): docs/bnb.md "FP4 code 8".
bool BnbUsesFp4Code8(const BnbResult& result);

// ---- kernels -----------------------------------------------------------------
// absmax_eff[b] = fl(fl(nested_quant_map[codes[b]] * nested_absmax[b / nested_blocksize])
//                    + offset), two roundings, never fused. nested_blocksize: a power of two.
void BnbNestedAbsmax(const std::uint8_t* codes, std::uint64_t nblocks,
                     const float* nested_quant_map, const float* nested_absmax,
                     std::uint64_t nested_blocksize, float offset, float* absmax_eff);

// out[i] = dtype(fl(TABLE[code_i] * absmax_eff[i / blocksize])) widened, i < n;
// code_i: high nibble of packed[i / 2] for even i, low nibble for odd i.
// blocksize: a power of two >= 32.
void BnbDequantize4bit(Bnb4bitType type, const std::uint8_t* packed, std::uint64_t n,
                       const float* absmax_eff, std::uint64_t blocksize, BnbDtype dtype,
                       float* out, Kernel kernel = BestKernel());

// out[i] = dtype(fl(quant_map[codes[i]] * absmax_eff[i / blocksize])) widened.
void BnbDequantizeBlockwise8(const std::uint8_t* codes, std::uint64_t n,
                             const float* quant_map, const float* absmax_eff,
                             std::uint64_t blocksize, BnbDtype dtype, float* out,
                             Kernel kernel = BestKernel());

// out[r][c] = fl(fl(float(w[r][c]) * scb[r]) * 0x3c010204), kept binary32.
void BnbDequantizeInt8Rows(const std::int8_t* w, std::uint64_t rows, std::uint64_t columns,
                           const float* scb, float* out, Kernel kernel = BestKernel());

// x rounded to binary16 / bfloat16 (RNE) and widened back; float32: x itself.
float BnbRoundToDtype(float x, BnbDtype dtype);
// The same over an array with the given kernel (exposed to test kernel agreement).
void BnbRoundArrayToDtype(const float* in, std::uint64_t n, BnbDtype dtype, float* out,
                          Kernel kernel = BestKernel());

// ---- encoders (bitsandbytes' default backend, as the peer vectors record it) --
// create_dynamic_map(signed, max_exponent_bits, total_bits) from its definition:
// torch.linspace(0.1, 1, 2^(i+k)+1) in binary32 (start + step*i for the lower
// half, end - step*(steps-1-i) for the upper), means fl(fl(b[j]+b[j+1])/2),
// scaled by fl32(10^(i-(max_exponent_bits-1))), with 0 and 1, zero-padded to 256
// and sorted. bnb's recorded map may differ by an ulp (the peer README says so);
// decoders always use the stored map.
std::vector<float> CreateDynamicMap(bool signed_map = true, int max_exponent_bits = 7,
                                    int total_bits = 8);

// torch.mean of a binary32 vector on a CPU whose Vectorized<float> has 8
// lanes: cascade sum (4 vector accumulators, 4 levels) then fl(sum / n).
float TorchMeanF32(const float* x, std::uint64_t n);

// quantize_blockwise (8-bit) on the default backend: absmax per block (the
// partial last block stored clamped to >= 1e-38), scaled = x * fl(1/a) for full
// blocks, x / a for the partial block, code = number of map midpoints
// fl(fl(m[k]+m[k+1])/2) strictly below the scaled value. map: 256 sorted values.
bool QuantizeBlockwise8(const float* x, std::uint64_t n, const float* map,
                        std::uint64_t blocksize, std::vector<std::uint8_t>* codes,
                        std::vector<float>* absmax, std::string* error);

struct Bnb4bitQuantized {
  std::vector<std::uint8_t> packed;  // ceil(n / 2) bytes, high nibble = even element
  std::vector<float> absmax;         // flat statistics (always filled)
  bool nested = false;
  std::vector<std::uint8_t> absmax_codes;  // nested: 8-bit codes of absmax - offset
  std::vector<float> nested_absmax;
  std::vector<float> nested_quant_map;     // the map the codes index
  float nested_offset = 0.0f;
  std::uint64_t nested_blocksize = 0;
};

// quantize_4bit on the default backend: absmax per block = max|x| (the partial
// last block stored clamped to >= 1e-38, full blocks unclamped; scaling always
// uses the clamped value), scaled = x * fl(1/a) (full blocks) or x / a (partial
// block), code = number of table midpoints strictly below scaled (FP4 through
// the table's sort order), odd n padded with the code of 0.0 (7 nf4, 0 fp4).
// compress_statistics: offset = TorchMeanF32(absmax), then QuantizeBlockwise8
// of fl(absmax - offset) with nested_map (256 values; CreateDynamicMap() when
// null) and nested_blocksize (bnb uses 256). x: binary32 (bf16/f16 widened).
// False with *error on a non-finite input, a bad blocksize or nested stats of
// an empty tensor.
bool QuantizeBnb4bit(const float* x, std::uint64_t n, Bnb4bitType type,
                     std::uint64_t blocksize, bool compress_statistics, Bnb4bitQuantized* out,
                     std::string* error, const float* nested_map = nullptr,
                     std::uint64_t nested_blocksize = 256);

// Int8Params / int8_vectorwise_quant on the default backend: w cast to
// binary16 (RNE) first, SCB[r] = max|w16| of row r, k = fl(fl(1/SCB[r]) * 127),
// CB = round-half-even(fl(w16 * k)). A zero row gives SCB 0 and codes 0.
bool QuantizeBnbInt8Rows(const float* w, std::uint64_t rows, std::uint64_t columns,
                         std::vector<std::int8_t>* cb, std::vector<float>* scb,
                         std::string* error);

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_BNB_H_
