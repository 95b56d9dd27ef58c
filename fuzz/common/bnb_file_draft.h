// bnb_file_draft.h: the bitsandbytes layer a bnb_file_diff input stands for,
// before its ops edit it and it is written (bnb_file_input.cc): the tensors,
// the JSON quant_state and the metadata, built from the input's tail with
// the codec's encoders (bnb_file_draft.cc). Internal to fuzz/common.
#ifndef QUANTDIFF_FUZZ_COMMON_BNB_FILE_DRAFT_H_
#define QUANTDIFF_FUZZ_COMMON_BNB_FILE_DRAFT_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "codecs/safetensors.h"
#include "fuzz/common/bnb_file_input.h"

namespace qd::fuzz::bnb_draft {

using Json = nlohmann::ordered_json;

// kBnbJsonValues, each parsed once.
const std::vector<Json>& ParsedJsonValues();
// Bytes per element of a safetensors dtype (1 for the 1-byte and unknown ones).
std::uint64_t ItemSize(std::string_view dtype);

template <typename T>
std::vector<std::uint8_t> AsBytes(const std::vector<T>& values) {
  std::vector<std::uint8_t> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

struct DraftTensor {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::vector<std::uint8_t> bytes;
  int role = -1;          // BnbRole, or -1 for tensors an op added
  bool json = false;      // bytes are the state's JSON text, made at write time
  bool refit = false;     // the shape follows the bytes at write time
  int shape_mode = -1;    // kTensorShape's mode, applied with refit
};

struct TextEdit {
  std::string_view token;
  std::uint16_t position = 0;
  std::uint8_t removed = 0;
};

// The layer before it is written.
struct Draft {
  BnbFileKind kind = BnbFileKind::k4bitHf;
  std::string module_dot;  // "M." or ""
  std::string weight;      // W
  std::string type_text;   // "nf4" / "fp4"
  Json state = Json::object();
  bool state_in_metadata = false;  // blockwise8
  std::vector<TextEdit> text_edits;
  std::vector<DraftTensor> tensors;
  codec::MetadataList metadata = {{"format", "pt"}};

  DraftTensor* Role(BnbRole role) {
    for (DraftTensor& t : tensors) {
      if (t.role == static_cast<int>(role)) return &t;
    }
    return nullptr;
  }
  void Add(std::string name, std::string dtype, std::vector<std::uint64_t> shape,
           std::vector<std::uint8_t> bytes, int role) {
    DraftTensor t;
    t.name = std::move(name);
    t.dtype = std::move(dtype);
    t.shape = std::move(shape);
    t.bytes = std::move(bytes);
    t.role = role;
    tensors.push_back(std::move(t));
  }
  void Add(std::string name, std::string dtype, std::vector<std::uint64_t> shape,
           std::vector<std::uint8_t> bytes, BnbRole role) {
    Add(std::move(name), std::move(dtype), std::move(shape), std::move(bytes),
        static_cast<int>(role));
  }

  std::string StateText(bool with_edits) const {
    std::string text = state.dump();
    if (!with_edits) return text;
    for (const TextEdit& e : text_edits) {
      const std::size_t at = e.position % (text.size() + 1);
      const std::size_t removed = std::min<std::size_t>(e.removed, text.size() - at);
      text.replace(at, removed, e.token);
    }
    return text;
  }
};

// The shape a refitted tensor gets: k = bytes / item elements, laid out by
// shape_mode, else the old shape with its first dimension adjusted, else [k].
std::vector<std::uint64_t> Refit(const DraftTensor& t);

// The valid layer TAIL describes.
Draft BuildDraft(const BnbFileTail& tail);

}  // namespace qd::fuzz::bnb_draft

#endif  // QUANTDIFF_FUZZ_COMMON_BNB_FILE_DRAFT_H_
