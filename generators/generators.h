// generators.h: valid and rule-targeted invalid instances of every format.
//
// Instances are built with quantdiff's own encoders and writers (codecs/);
// the oracle, not the generator, says what a file means. A violation
// generator starts from a valid instance and breaks exactly one rule, so
// both readers must refuse it with that rule ID (the catalogue's check order
// guarantees no earlier rule fires).
//
//   qd::gen::Rng rng(seed);
//   qd::gen::Generated g = qd::gen::RbqViolation("RBQ-005", rng);
#ifndef QUANTDIFF_GENERATORS_GENERATORS_H_
#define QUANTDIFF_GENERATORS_GENERATORS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codecs/bnb.h"
#include "codecs/safetensors.h"
#include "generators/generated.h"

namespace qd::gen {

// A uniform choice in 0..n-1 (n > 0), and a one-in-n chance.
inline std::uint64_t Pick(Rng& rng, std::uint64_t n) { return rng() % n; }
inline bool Coin(Rng& rng, std::uint64_t one_in = 2) { return Pick(rng, one_in) == 0; }

// safetensors container (rules ST-*): random tensors of every dtype.
Generated SafetensorsValid(Rng& rng);
std::vector<std::string> SafetensorsViolableRules();
Generated SafetensorsViolation(std::string_view rule, Rng& rng);

// FP8 weight checkpoints (rules FP8-*; docs/fp8.md): one or two layers of
// FP8 codes with F32 inverse scales (tensor, row or block), the config as
// GPT-QModel writes it, in config.json, or none.
Generated Fp8Valid(Rng& rng);
std::vector<std::string> Fp8ViolableRules();
Generated Fp8Violation(std::string_view rule, Rng& rng);

// AWQ GEMM / GEMV / GEMV_FAST (rules AWQ-*, CFG-003 and CFG-005;
// docs/awq.md): one or two layers packed with codec::AwqEncode, the config
// as GPT-QModel or AutoAWQ (config.json or legacy) writes it.
Generated AwqValid(Rng& rng);
std::vector<std::string> AwqViolableRules();
Generated AwqViolation(std::string_view rule, Rng& rng);

// Native .gguf files (rules GGUF-*, docs/gguf.md): typed metadata (nested
// arrays too), tensors of the decoded ggml types written by generators/gguf.h.
Generated GgufValid(Rng& rng);
std::vector<std::string> GgufViolableRules();
Generated GgufViolation(std::string_view rule, Rng& rng);
// GGUF-family safetensors (rules GGST-*, CFG-003 and CFG-005;
// docs/ggml_safetensors.md): GPT-QModel GGUF linears of q4_0, q8_0, q4_K,
// q5_K or q6_K blocks made by the codec's block encoders, K padded; and
// section 7's block-vector layout of every block type.
Generated GgmlStValid(Rng& rng);
std::vector<std::string> GgmlStViolableRules();
Generated GgmlStViolation(std::string_view rule, Rng& rng);
// Section 7's block-vector layout alone (GgmlStValid and GgmlStViolation
// make it one time in three): a valid file of TYPE (ggml's spelling) with or
// without `cols`, and a file breaking one of the rules section 7 checks.
Generated GgmlStBlockVectorsValid(Rng& rng, std::string_view type, bool with_cols);
std::vector<std::string> GgmlStBlockVectorsViolableRules();
Generated GgmlStBlockVectorsViolation(std::string_view rule, Rng& rng);
// The instances seeds and vectors always hold beside the drawn ones (a few
// draws would miss most of them): section 7's layout in each block type with
// and without cols, then each of its rules broken twice.
std::vector<Generated> GgmlStFixedInstances();

// Q4B32 / Q8B32 (rules RBQ-*): quantized matrices plus kept norm vectors.
Generated RbqValid(Rng& rng);
std::vector<std::string> RbqViolableRules();
Generated RbqViolation(std::string_view rule, Rng& rng);

// Recognised, not decoded (rules REC-*, docs/recognised.md): EXL3 layers
// with their config's tensor_storage, VPTQ, QQQ and ParoQuant layers, and
// BitBLAS layers with their config's bitblas label, beside dense tensors.
Generated RecognisedValid(Rng& rng);
std::vector<std::string> RecognisedViolableRules();
Generated RecognisedViolation(std::string_view rule, Rng& rng);

// bitsandbytes (rules BNB-*, docs/bnb.md): 4-bit NF4/FP4 (HF and GPT-QModel
// names, flat or nested statistics, any quant_storage), 8-bit blockwise and
// int8 row-scaled layers, made with the codec's encoders.
Generated BnbValid(Rng& rng);
std::vector<std::string> BnbViolableRules();
Generated BnbViolation(std::string_view rule, Rng& rng);

// One 4-bit layer quantized with codec::QuantizeBnb4bit from random weights
// (layer.q.nested: flat or nested statistics), before any layout names it:
// BnbValid's and BnbViolation's layers, and the .pt layers below, are made
// from these. W is module + ".weight".
struct Bnb4bitLayer {
  std::string module = "model.layers.0.mlp.down_proj";
  codec::Bnb4bitType type = codec::Bnb4bitType::kNf4;
  std::uint64_t blocksize = 64;
  codec::BnbDtype dtype = codec::BnbDtype::kFloat32;
  std::vector<std::uint64_t> shape;  // the JSON / list shape; n = its product
  codec::Bnb4bitQuantized q;
};
// How the JSON state and the list layout spell them: "nf4" / "fp4";
// "float16" / "bfloat16" / "float32".
const char* Bnb4bitTypeName(codec::Bnb4bitType type);
const char* BnbDtypeName(codec::BnbDtype dtype);
// force_nested: -1 random, 0 flat, 1 nested.
Bnb4bitLayer RandomBnb4bitLayer(Rng& rng, int force_nested = -1);
// A quant_storage dtype ("U8" mostly, "F16", "BF16", "F32" when it divides
// packed_bytes) for W's packed bytes (docs/bnb.md step 8: any dtype).
std::string RandomBnbQuantStorage(std::uint64_t packed_bytes, Rng& rng);
// The layer's tensors in the HF layout (W, W.quant_map, W.absmax [,
// W.nested_absmax, W.nested_quant_map], W.quant_state.bitsandbytes__T as a
// U8 JSON text, last) or GPT-QModel's (M.weight_*); W holds the packed bytes
// as `storage` of shape [bytes / item size, 1].
std::vector<codec::TensorWithBytes> Bnb4bitTensors(const Bnb4bitLayer& layer, bool gptqmodel,
                                                   std::string_view storage = "U8");
// An int8 row-scaled layer of module M quantized with codec::QuantizeBnbInt8Rows:
// M.weight I8 [rows, columns] and M.SCB F32 [rows] with M.weight_format U8 0
// (Linear8bitLt), or M.weight_scb (GPT-QModel).
std::vector<codec::TensorWithBytes> BnbInt8Tensors(const std::string& module, bool gptqmodel,
                                                   Rng& rng);
// The bitsandbytes generator's safetensors writer (metadata {"format": "pt"}).
std::vector<std::uint8_t> BnbWriteSafetensors(const std::vector<codec::TensorWithBytes>& tensors);
// A BnbViolation instance before it is written, limited to the layouts a
// tensor table holds (no 8-bit blockwise: its state is __metadata__, which a
// .pt file does not have; docs/pt.md 6.4).
struct BnbTensorSet {
  std::vector<codec::TensorWithBytes> tensors;
  std::string expected_rule, description;
};
BnbTensorSet BnbViolationTensors(std::string_view rule, Rng& rng);

// GPTQ (rules GPTQ-*, CFG-*, docs/gptq.md): v1 / v2 continuous and planar
// layers packed with codec::GptqEncode, one or two per file, sorted or
// act-order g_idx, F16 / BF16 / F32 scales, optional bias and dense
// tensors; config sources (Generated::side_files) spelled with every alias,
// sometimes a quantize_config.json plus an agreeing nested config.json.
Generated GptqValid(Rng& rng);
std::vector<std::string> GptqViolableRules();
Generated GptqViolation(std::string_view rule, Rng& rng);

// One GPTQ layer, exposed so fuzz targets and tests can build from input.
struct GptqLayerParams {
  std::string prefix = "model.layers.0.mlp.up_proj.";  // with its dot ("" for bare names)
  int format = 0;                  // 0 gptq, 1 gptq_v2, 2 gptq_p
  int bits = 4;                    // allowed for the format
  std::int64_t in_features = 64;   // K, a multiple of 32
  std::int64_t out_features = 32;  // N, a multiple of 32
  std::int64_t group_size = 32;    // -1 or >= 1
  int g_idx_mode = 0;              // 0 k / gs, 1 a permutation of it, 2 any group per k
  int scales_dtype = 0;            // 0 F16, 1 BF16, 2 F32
  int bias_dtype = -1;             // -1 no bias, else as scales_dtype
  int zero_mode = 0;               // 0 random, 1 smallest zero, 2 largest (v1: 2^b, GPTQ-107)
};
// P+qweight, P+qzeros, P+scales, P+g_idx (and P+bias), in that order, with
// random codes, zeros and finite scales (subnormals, zeros, negatives).
std::vector<codec::TensorWithBytes> BuildGptqLayer(const GptqLayerParams& params, Rng& rng);
// A canonical quantize_config.json text for those parameters.
std::string GptqConfigText(int format, int bits, std::int64_t group_size);

// torch .pt / .bin files (rules PT-*, docs/pt.md), written by a torch.save-like
// writer of quantdiff's own (generators/pt.cc): stored ZIP entries with the
// FB alignment padding, data descriptors and zip64 end records torch writes
// (or Python zipfile's plain layout), and a data.pkl of hand-written protocol
// 2 (sometimes 4) opcodes: an OrderedDict or dict root, tensors through
// _rebuild_tensor_v2 and persistent-ID storages, views sharing a storage,
// nested dicts, int keys and plain values beside the tensors; one valid file
// in three also holds bitsandbytes layers (RandomPtBnbLayers). The violable
// rules are PT-* and the BNB-* rules a .pt file can break (docs/pt.md 6.4,
// 7.4: BNB-001, -002, -004, -101..-106, -108), each in one layer, list
// layout or tensors, of a file that is otherwise valid.
Generated PtValid(Rng& rng);
std::vector<std::string> PtViolableRules();
Generated PtViolation(std::string_view rule, Rng& rng);
// The torch-1.13 shape (issue 13 triage items 13..15): while on, every state
// dict the .pt generators pickle is written as torch 1.13's torch.save writes
// one: protocol 2 (no FRAME), the 6-item _rebuild_tensor_v2, requires_grad
// False on integer and bool tensors, and no float value (BINFLOAT, which 1.13's
// weights-only unpickler lacks: each becomes the int 0). The draws are the same
// either way (the shape is applied as a model is written), so off (the
// default) leaves every seed and vector as it was; on makes vectors torch 1.13
// can be expected to read, refused (when invalid) for their own rule.
void SetPtTorch113Shape(bool on);
bool PtTorch113Shape();

// One ZIP entry for PtWriteZip.
struct PtZipEntry {
  std::string name;  // the whole entry name, "archive/data.pkl"
  std::vector<std::uint8_t> data;
  // true: as torch writes (version 0, flags 0x0808, CRC and sizes 0 in the
  // local header, a 16-byte data descriptor after the data, an FB extra field
  // of Z bytes aligning the data to 64); false: as Python's zipfile writes
  // (version 20, flags 0, real CRC and sizes in the local header, nothing else).
  bool torch_style = true;
  std::vector<std::uint8_t> central_extra;  // the central entry's extra field, as is
  // >= 0: the entry has no local header of its own; its central entry points
  // at data offset embed_at of entry embed_in, whose data holds one
  // (PtLocalRecord) -- how overlapping entries are made.
  int embed_in = -1;
  std::uint64_t embed_at = 0;
};

// Where PtWriteZip put things (absolute offsets).
struct PtZipLayout {
  struct Entry {
    std::uint64_t local = 0;       // local header
    std::uint64_t data_start = 0;  // ds
    std::uint64_t end = 0;         // after the data (and the descriptor)
    std::uint64_t central = 0;     // central directory entry
    std::uint64_t fb = 0, fb_size = 0;  // the FB field's Z bytes (fb_size 0: none)
  };
  std::vector<Entry> entries;
  std::uint64_t cd_off = 0, cd_size = 0;
  bool zip64 = false;
  std::uint64_t zip64_record = 0, locator = 0;
  std::uint64_t eocd = 0;
};

struct PtZipOptions {
  bool zip64_end = true;  // zip64 end record and locator before the end record (torch)
  std::vector<std::uint8_t> central_tail;  // bytes after the last central entry, counted in cd_size
};

std::vector<std::uint8_t> PtWriteZip(const std::vector<PtZipEntry>& entries,
                                     const PtZipOptions& options, PtZipLayout* layout = nullptr);
// A Python-zipfile-style local header followed by the data: what an entry
// with embed_in points at.
std::vector<std::uint8_t> PtLocalRecord(const std::string& name, const std::vector<std::uint8_t>& data);
std::uint32_t PtCrc32(const std::uint8_t* data, std::size_t size);

// One tensor of the expected tensor table (docs/pt.md 5.3, 6.1).
struct PtExpectedTensor {
  std::string name;
  std::string dtype;  // "F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"
  std::vector<std::uint64_t> shape;
  std::vector<std::uint8_t> bytes;  // C order, little-endian
  bool view = false;                // not the whole storage in C order
};

// A valid file before it is written: its records (data.pkl first) and the
// tensor table it stands for.
struct PtDraft {
  std::string prefix = "archive";
  std::vector<std::pair<std::string, std::vector<std::uint8_t>>> records;  // name without P/
  std::vector<std::size_t> pickle_ops;  // offsets of data.pkl's opcodes
  bool torch_style = true;
  bool zip64_end = true;
  std::vector<PtExpectedTensor> tensors;  // the tensor table, flattening order
  std::vector<std::string> values;        // names of the value table entries
};

// ---- a state dict given value by value (docs/pt.md 4.2, 5, 6) ------------------

// A tensor: what the readers' tensor table must give back (docs/pt.md 5.3),
// and how its storage holds it.
struct PtTensorData {
  std::string dtype = "F32";  // "F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"
  std::vector<std::uint64_t> shape;
  std::vector<std::uint8_t> bytes;  // C order, little-endian, numel * item size
  // kContiguous: the whole storage. The others make a view readers must
  // materialise: kTransposed, the storage holds the tensor with its axes
  // reversed (rank >= 2; rank 0 and 1 get kStrided); kOffsetSlice, a slice
  // starting at storage element 1..3 of a longer storage; kStrided, every
  // other storage element. Unused storage elements hold 0xEE bytes.
  enum class Layout : std::uint8_t { kContiguous, kTransposed, kOffsetSlice, kStrided };
  Layout layout = Layout::kContiguous;
};

// Item size in bytes of a tensor table dtype (docs/pt.md 4.3); 1 for any other text.
std::uint64_t PtItemSize(std::string_view dtype);

// One value of a state dict, as the pickle builds it (docs/pt.md 4.2).
struct PtObject {
  enum class Kind : std::uint8_t {
    kNone, kBool, kInt, kFloat, kStr, kTuple, kList, kSize, kToken, kDict, kTensor,
  };
  Kind kind = Kind::kNone;
  bool boolean = false;      // kBool; kDict: collections.OrderedDict() rather than {}
  std::int64_t integer = 0;  // kInt
  double real = 0.0;         // kFloat (binary64, BINFLOAT)
  // kStr: the text; kToken: the name of an allow-listed torch global pickled
  // unreduced: a dtype ("float16", "float32", ..., how torch.float16 pickles)
  // or a storage class ("FloatStorage") or "Size".
  std::string text = {};
  std::vector<PtObject> items = {};                            // kTuple, kList, kSize (kInt items)
  std::vector<std::pair<std::string, PtObject>> entries = {};  // kDict, insertion order
  PtTensorData tensor = {};                                    // kTensor

  static PtObject None() { return {}; }
  static PtObject Bool(bool b);
  static PtObject Int(std::int64_t i);
  static PtObject Float(double f);
  static PtObject Str(std::string s);
  static PtObject Tuple(std::vector<PtObject> items);
  static PtObject List(std::vector<PtObject> items);
  static PtObject Size(const std::vector<std::int64_t>& dims);  // torch.Size
  static PtObject Token(std::string name);
  static PtObject Dict(std::vector<std::pair<std::string, PtObject>> entries = {}, bool ordered = false);
  static PtObject Tensor(PtTensorData tensor);
};

// The root dict's items, in order.
using PtStateDict = std::vector<std::pair<std::string, PtObject>>;

// Adds `value` under the flattened name `name` (docs/pt.md 6.1): at the root
// when nest is 0, else the first `nest` dot-separated segments become nested
// dicts (joined with dicts already there), so {"a": {"b.c": v}} for "a.b.c"
// and nest 1. The caller keeps names unique; a segment that is already a
// non-dict key gives a file with a repeated key (PT-017).
void PtPut(PtStateDict* dict, std::string_view name, PtObject value, int nest = 0);

struct PtWriteOptions {
  int protocol = 2;         // 2..5 (4 and 5 add FRAME, MEMOIZE, STACK_GLOBAL)
  bool ordered = true;      // the root is an OrderedDict (torch's state_dict()) or a plain dict
  bool big_endian = false;  // a byteorder record "big", every storage byte-swapped (docs/pt.md 5.2)
};
// The file torch.save would write for this root (torch 1.13 style ZIP,
// archive/ prefix), and where its entries are.
std::vector<std::uint8_t> PtWriteStateDict(const PtStateDict& root, const PtWriteOptions& options = {},
                                           PtZipLayout* layout = nullptr);

struct PtDraftOptions {
  int max_items = 6;        // items of the root dict (at least 1)
  bool copies = false;      // each view gets a contiguous copy "<name>_copy" beside it
  bool allow_big = true;    // byteorder = big sometimes
  int protocol = 0;         // 0: random (2 mostly, 3..5 sometimes)
  // Items put into the random root after its content, each at a random place
  // (names must not collide with the random content's, which are a word and
  // a number: "weight3", "layers5.bias7", 1004).
  PtStateDict extra;
};
PtDraft PtRandomDraft(Rng& rng, const PtDraftOptions& options = {});
std::vector<std::uint8_t> PtWriteDraft(const PtDraft& draft, PtZipLayout* layout = nullptr);

// ---- bitsandbytes layers in a state dict (docs/pt.md 6.4, 7; docs/bnb.md) --------

// How a 4-bit layer is written in the QuantState list layout (docs/pt.md 7.3):
// flat [absmax, shape, dtype token, blocksize, None, quant_type(, table)] or
// nested [absmax codes U8, shape, dtype, blocksize, [offset, state2], quant_type(, table)]
// with state2 = [nested_absmax, code F32[256], nested_blocksize, False,
// torch.float32, None, None] (quantize_blockwise's list).
struct BnbListOptions {
  bool tuple = false;            // S a tuple (else a list)
  int shape_as = 0;              // S[1]: 0 torch.Size, 1 tuple, 2 list
  bool with_table = true;        // S[6]: get_4bit_type(quant_type), F32[16] (bnb 0.40); else 6 items
  bool offset_as_float = false;  // nested: offset a Python float, else a 0-d F32 tensor (absmax.mean())
  bool pair_tuple = false;       // nested: S[4] a tuple (else a list)
  bool state2_tuple = false;     // nested: state2 a tuple (else a list)
  // W holds the packed bytes (bnb 0.40: U8 [ceil(n/2), 1]); other dtypes
  // when their size divides the byte count; w_flat: shape [bytes / size].
  std::string w_storage = "U8";
  bool w_flat = false;
};
BnbListOptions RandomBnbListOptions(const Bnb4bitLayer& layer, Rng& rng);
// The list S (`W.quant_state`) and the packed weight W.
PtObject Bnb4bitListState(const Bnb4bitLayer& layer, const BnbListOptions& options);
PtTensorData Bnb4bitListWeight(const Bnb4bitLayer& layer, const BnbListOptions& options);
// Puts W and W.quant_state into dict (PtPut with nest).
void PtPutBnbListLayer(PtStateDict* dict, const Bnb4bitLayer& layer, const BnbListOptions& options,
                       int nest = 0);
// The tensors of a safetensors-style layer (Bnb4bitTensors, BnbInt8Tensors)
// put into dict under their names, contiguous (PtPut with nest).
void PtPutTensors(PtStateDict* dict, const std::vector<codec::TensorWithBytes>& tensors, int nest = 0);
// Every tensor of dict and of the values below it (lists, tuples, dicts),
// depth first: to give some a non-contiguous layout.
std::vector<PtTensorData*> PtTensorsIn(PtStateDict* dict);
// One or two valid layers of the kinds a .pt file holds (list layout flat or
// nested in all its spellings, HF and GPT-QModel 4-bit, both int8 layouts),
// modules "blocks.<i>.<proj>", some dicts nested, some tensors views.
PtStateDict RandomPtBnbLayers(Rng& rng);

// Model directories (rules IDX-*, docs/model_dir.md; generators/model_dir*.cc):
// a GPTQ, bitsandbytes or plain safetensors model cut into shards
// model-0000i-of-0000k.safetensors at tensor boundaries (layers split across
// shards too) with model.safetensors.index.json (total_size in either
// convention, or none), its config sources as the directory's configs, and
// entries the readers ignore; RBQ and .pt models as a one-file set. Each
// violation breaks one IDX rule of a valid sharded directory.
GeneratedDir ModelDirValid(Rng& rng);
std::vector<std::string> ModelDirViolableRules();
GeneratedDir ModelDirViolation(std::string_view rule, Rng& rng);
// FILE (a valid single-file safetensors model and its side files, as
// GptqValid, BnbValid or SafetensorsValid make it) as a directory that must
// check and decode exactly like it: cut into 1..4 shards at tensor
// boundaries of its (begin, end, name) order (one shard sometimes without an
// index), __metadata__ in every shard or spread over them, the side files
// as the configs of the same priority and kind (plain ones among
// model.quantize_config.json, quantize_config.json, quant_config.json in that
// order; config.json nested). A file the container refuses is put in alone.
GeneratedDir ShardModel(const Generated& file, Rng& rng);
// The same with the cuts given: each is the index of the first tensor of a
// new shard in that order (out of range and repeated ones are ignored).
GeneratedDir ShardModelAt(const Generated& file, const std::vector<std::size_t>& cuts, Rng& rng);
// A torch model (random floating and integer tensors, some views, flat or in
// nested dicts, sometimes a non-tensor value; any pickle protocol, either
// byte order) as one .pt file, and the same model cut at root items into
// 1..n pytorch_model-0000i-of-0000k.bin shards with
// pytorch_model.bin.index.json (total_size in either convention, or none):
// the directory must check and decode exactly like the file.
struct PtModelDir {
  Generated file;
  GeneratedDir dir;
};
PtModelDir PtShardedModel(Rng& rng);
// FILE cut at CUTS as ShardModelAt cuts it, and the same directory with every
// shard written as a torch .bin of the same tensors (a flat state dict,
// contiguous, in the shard's order): pytorch_model.bin or
// pytorch_model-0000i-of-0000k.bin, pytorch_model.bin.index.json,
// model.quantize_config.json renamed pytorch_model.quantize_config.json, no
// __metadata__ (docs/pt.md 6.5: a GPTQ or AWQ model reads alike in both).
// A file the container refuses, or with a tensor of a dtype a .pt file
// cannot hold (docs/pt.md 4.3), has no torch twin (has_torch false).
struct TorchTwinDirs {
  GeneratedDir safetensors;
  GeneratedDir torch;
  bool has_torch = false;
};
TorchTwinDirs TorchTwinAt(const Generated& file, const std::vector<std::size_t>& cuts, Rng& rng);

// Parameters of one RBQ file, exposed so fuzz targets can build from input.
struct RbqFileParams {
  int bits = 4;
  std::uint64_t rows = 1;
  std::uint64_t columns = 32;
  int tensor_count = 1;   // block tensors
  bool with_norm = true;  // a one-dimensional F32 tensor beside them
  float magnitude = 1.0f;
};
std::vector<std::uint8_t> BuildRbqFile(const RbqFileParams& params, Rng& rng);

// Random weights with the shapes quantizers meet: normal-ish values, exact
// zeros, all-zero blocks, outliers and tiny values near binary16 underflow.
std::vector<float> RandomWeights(std::uint64_t count, float magnitude, Rng& rng);

}  // namespace qd::gen

#endif  // QUANTDIFF_GENERATORS_GENERATORS_H_
