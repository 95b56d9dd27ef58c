// generators.h: valid and rule-targeted invalid instances of every format.
//
// Instances are built with quantdiff's own encoders and writers (codecs/);
// the oracle, not the generator, says what a file means. A violation
// generator starts from a valid instance and breaks exactly one rule, so
// both readers must refuse it with that rule ID (the catalogue's check order
// guarantees no earlier rule fires).
//
//   qd::harness::Rng rng(seed);
//   qd::harness::Generated g = qd::gen::RbqViolation("RBQ-005", rng);
#ifndef QUANTDIFF_GENERATORS_GENERATORS_H_
#define QUANTDIFF_GENERATORS_GENERATORS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codecs/safetensors.h"
#include "harness/registry.h"

namespace qd::gen {

// A uniform choice in 0..n-1 (n > 0), and a one-in-n chance.
inline std::uint64_t Pick(harness::Rng& rng, std::uint64_t n) { return rng() % n; }
inline bool Coin(harness::Rng& rng, std::uint64_t one_in = 2) { return Pick(rng, one_in) == 0; }

// safetensors container (rules ST-*): random tensors of every dtype.
harness::Generated SafetensorsValid(harness::Rng& rng);
std::vector<std::string> SafetensorsViolableRules();
harness::Generated SafetensorsViolation(std::string_view rule, harness::Rng& rng);

// Q4B32 / Q8B32 (rules RBQ-*): quantized matrices plus kept norm vectors.
harness::Generated RbqValid(harness::Rng& rng);
std::vector<std::string> RbqViolableRules();
harness::Generated RbqViolation(std::string_view rule, harness::Rng& rng);

// bitsandbytes (rules BNB-*, docs/bnb.md): 4-bit NF4/FP4 (HF and GPT-QModel
// names, flat or nested statistics, any quant_storage), 8-bit blockwise and
// int8 row-scaled layers, made with the codec's encoders.
harness::Generated BnbValid(harness::Rng& rng);
std::vector<std::string> BnbViolableRules();
harness::Generated BnbViolation(std::string_view rule, harness::Rng& rng);

// GPTQ (rules GPTQ-*, CFG-*, docs/gptq.md): v1 / v2 continuous and planar
// layers packed with codec::GptqEncode, one or two per file, sorted or
// act-order g_idx, F16 / BF16 / F32 scales, optional bias and dense
// tensors; config sources (Generated::side_files) spelled with every alias,
// sometimes a quantize_config.json plus an agreeing nested config.json.
harness::Generated GptqValid(harness::Rng& rng);
std::vector<std::string> GptqViolableRules();
harness::Generated GptqViolation(std::string_view rule, harness::Rng& rng);

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
std::vector<codec::TensorWithBytes> BuildGptqLayer(const GptqLayerParams& params, harness::Rng& rng);
// A canonical quantize_config.json text for those parameters.
std::string GptqConfigText(int format, int bits, std::int64_t group_size);

// torch .pt / .bin files (rules PT-*, docs/pt.md), written by a torch.save-like
// writer of quantdiff's own (generators/pt.cc): stored ZIP entries with the
// FB alignment padding, data descriptors and zip64 end records torch writes
// (or Python zipfile's plain layout), and a data.pkl of hand-written protocol
// 2 (sometimes 4) opcodes: an OrderedDict or dict root, tensors through
// _rebuild_tensor_v2 and persistent-ID storages, views sharing a storage,
// nested dicts, int keys and plain values beside the tensors.
harness::Generated PtValid(harness::Rng& rng);
std::vector<std::string> PtViolableRules();
harness::Generated PtViolation(std::string_view rule, harness::Rng& rng);

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

struct PtDraftOptions {
  int max_items = 6;        // items of the root dict (at least 1)
  bool copies = false;      // each view gets a contiguous copy "<name>_copy" beside it
  bool allow_big = true;    // byteorder = big sometimes
  int protocol = 0;         // 0: random (2 mostly, 3..5 sometimes)
};
PtDraft PtRandomDraft(harness::Rng& rng, const PtDraftOptions& options = {});
std::vector<std::uint8_t> PtWriteDraft(const PtDraft& draft, PtZipLayout* layout = nullptr);

// Parameters of one RBQ file, exposed so fuzz targets can build from input.
struct RbqFileParams {
  int bits = 4;
  std::uint64_t rows = 1;
  std::uint64_t columns = 32;
  int tensor_count = 1;   // block tensors
  bool with_norm = true;  // a one-dimensional F32 tensor beside them
  float magnitude = 1.0f;
};
std::vector<std::uint8_t> BuildRbqFile(const RbqFileParams& params, harness::Rng& rng);

// Random weights with the shapes quantizers meet: normal-ish values, exact
// zeros, all-zero blocks, outliers and tiny values near binary16 underflow.
std::vector<float> RandomWeights(std::uint64_t count, float magnitude, harness::Rng& rng);

}  // namespace qd::gen

#endif  // QUANTDIFF_GENERATORS_GENERATORS_H_
