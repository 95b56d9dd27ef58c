// Generators for torch .pt / .bin files (rules PT-*, docs/pt.md).
//
// The writer here is quantdiff's own: a ZIP of stored entries laid out as
// torch's PyTorchStreamWriter lays them out (FB padding to 64 bytes, flags
// 0x0808 with a data descriptor, zip64 end records) or as Python's zipfile
// does, and a data.pkl written opcode by opcode as pickle's protocol 2 (or
// 4) writes a state dict. Nothing here reads a file: the readers say what the
// bytes mean. A violation starts from such a file and breaks one thing,
// chosen so that no check earlier in docs/pt.md section 8's order fires.
//
// The units: pt_model.h (the model), pt_pickler.cc (data.pkl), pt_model.cc
// (records, the random valid model), pt_zip.cc (the ZIP writer),
// pt_violations.cc (one rule broken each: the ZIP, the records, kPtRules),
// pt_violations.h and pt_pickle_violations.cc (the pickle rules); here the
// public entry points.
#include "generators/pt_bnb.h"
#include "generators/pt_model.h"

namespace qd::gen {

using namespace pt_gen;

std::vector<std::uint8_t> PtWriteDraft(const PtDraft& draft, PtZipLayout* layout) {
  return PtWriteZip(Entries(draft), Options(draft), layout);
}

PtDraft PtRandomDraft(Rng& rng, const PtDraftOptions& options) {
  return Serialize(RandomModel(rng, options));
}

std::uint64_t PtItemSize(std::string_view dtype) {
  for (const PtDtype& d : kDtypes) {
    if (dtype == d.code) return static_cast<std::uint64_t>(d.size);
  }
  return 1;
}

std::vector<std::uint8_t> PtWriteStateDict(const PtStateDict& root, const PtWriteOptions& options,
                                           PtZipLayout* layout) {
  Model m;
  m.protocol = options.protocol;
  m.byteorder = options.big_endian ? 2 : 0;
  m.root = Dict(options.ordered);
  for (const auto& [k, v] : root) m.root->entries.emplace_back(Str(k), m.FromObject(v));
  return WriteModel(m, layout);
}

PtObject PtObject::Bool(bool b) { return {.kind = Kind::kBool, .boolean = b}; }
PtObject PtObject::Int(std::int64_t i) { return {.kind = Kind::kInt, .integer = i}; }
PtObject PtObject::Float(double f) { return {.kind = Kind::kFloat, .real = f}; }
PtObject PtObject::Str(std::string s) { return {.kind = Kind::kStr, .text = std::move(s)}; }
PtObject PtObject::Token(std::string name) { return {.kind = Kind::kToken, .text = std::move(name)}; }
PtObject PtObject::Tuple(std::vector<PtObject> items) { return {.kind = Kind::kTuple, .items = std::move(items)}; }
PtObject PtObject::List(std::vector<PtObject> items) { return {.kind = Kind::kList, .items = std::move(items)}; }
PtObject PtObject::Size(const std::vector<std::int64_t>& dims) {
  PtObject o{.kind = Kind::kSize};
  for (std::int64_t d : dims) o.items.push_back(Int(d));
  return o;
}
PtObject PtObject::Dict(std::vector<std::pair<std::string, PtObject>> entries, bool ordered) {
  return {.kind = Kind::kDict, .boolean = ordered, .entries = std::move(entries)};
}
PtObject PtObject::Tensor(PtTensorData tensor) { return {.kind = Kind::kTensor, .tensor = std::move(tensor)}; }

void PtPut(PtStateDict* dict, std::string_view name, PtObject value, int nest) {
  const std::size_t dot = name.find('.');
  if (nest > 0 && dot != std::string_view::npos && dot > 0 && dot + 1 < name.size()) {
    const std::string key(name.substr(0, dot));
    for (auto& [k, v] : *dict) {
      if (k == key && v.kind == PtObject::Kind::kDict) {
        PtPut(&v.entries, name.substr(dot + 1), std::move(value), nest - 1);
        return;
      }
    }
    PtObject sub = PtObject::Dict();
    PtPut(&sub.entries, name.substr(dot + 1), std::move(value), nest - 1);
    dict->emplace_back(key, std::move(sub));
    return;
  }
  dict->emplace_back(std::string(name), std::move(value));
}

// One valid file in three carries bitsandbytes layers beside its random
// content (docs/pt.md 6.4, 7); drawn after the content so that the other two
// are the files this generator has always written.
Generated PtValid(Rng& rng) {
  Model m = RandomModel(rng, {});
  if (!Coin(rng, 3)) return Done(WriteModel(m), "", "valid torch.save-like file");
  m.Insert(RandomPtBnbLayers(rng), rng);
  return Done(WriteModel(m), "", "valid torch.save-like file with bitsandbytes layers");
}

}  // namespace qd::gen
