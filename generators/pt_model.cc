// pt_model.cc: the .pt generator's records and files: random element bytes,
// a model's records laid out as torch 1.13 or 2.x writes them, the random
// valid model, and the helpers every violation starts from. See pt_model.h.
#include "generators/pt_model.h"

namespace qd::gen::pt_gen {
namespace {

bool IsWholeStorage(const Tensor& t, const Storage& st) {
  return t.offset == 0 && t.stride == ContiguousStrides(t.size) && Numel(t.size) == st.numel;
}

void Flatten(const Model& m, const V& d, const std::string& prefix, PtDraft* draft) {
  for (const auto& [k, v] : d->entries) {
    const std::string name = prefix + (k->kind == Value::kInt ? std::to_string(k->i) : k->s);
    if (v->kind == Value::kDict || v->kind == Value::kODict) {
      Flatten(m, v, name + ".", draft);
    } else if (v->kind == Value::kTensor) {
      const Tensor& t = m.tensors[v->tensor];
      const Storage& st = m.storages[t.storage];
      PtExpectedTensor e;
      e.name = name;
      e.dtype = kDtypes[st.dtype].code;
      for (std::int64_t s : t.size) e.shape.push_back(static_cast<std::uint64_t>(s));
      e.bytes = Materialise(t, st);
      e.view = !IsWholeStorage(t, st);
      draft->tensors.push_back(std::move(e));
    } else {
      draft->values.push_back(name);
    }
  }
}

}  // namespace

Bytes RandomElements(int dtype, std::uint64_t n, Rng& rng) {
  const int isz = kDtypes[dtype].size;
  Bytes b(n * isz);
  const std::string code = kDtypes[dtype].code;
  for (std::uint64_t e = 0; e < n; ++e) {
    std::uint8_t* p = b.data() + e * isz;
    if (code == "BOOL") {
      p[0] = static_cast<std::uint8_t>(Pick(rng, 2));
    } else if (code == "F32") {
      const float v = Coin(rng, 8) ? std::bit_cast<float>(static_cast<std::uint32_t>(rng()))
                                   : static_cast<float>(static_cast<std::int64_t>(Pick(rng, 2001)) - 1000) / 64.0f;
      std::memcpy(p, &v, 4);
    } else if (code == "F64") {
      const std::int64_t whole = static_cast<std::int64_t>(Pick(rng, 200001)) - 100000;
      const std::uint64_t tiny = Pick(rng, 1000);
      double v = static_cast<double>(whole) / 1024.0 + std::ldexp(static_cast<double>(tiny), -40);
      if (Coin(rng, 8)) v = std::bit_cast<double>(static_cast<std::uint64_t>(rng()));
      std::memcpy(p, &v, 8);
    } else {
      const std::uint64_t r = rng();
      for (int i = 0; i < isz; ++i) p[i] = static_cast<std::uint8_t>(r >> (8 * i));
    }
  }
  return b;
}

Bytes Materialise(const Tensor& t, const Storage& st) {
  const int isz = kDtypes[st.dtype].size;
  // Violations write geometry no reader accepts: nothing to materialise.
  if (t.size.size() != t.stride.size() || t.size.size() > 64 || t.offset < 0) return {};
  for (std::size_t k = 0; k < t.size.size(); ++k) {
    if (t.size[k] < 0 || t.size[k] > (1 << 20) || t.stride[k] < 0) return {};
  }
  const std::uint64_t n = Numel(t.size);
  if (n > (1u << 24) || Extent(t) * isz > st.bytes.size()) return {};
  Bytes out;
  out.reserve(n * isz);
  ForEachElement(t, [&](std::uint64_t, std::uint64_t s) {
    out.insert(out.end(), st.bytes.begin() + s * isz, st.bytes.begin() + (s + 1) * isz);
  });
  return out;
}

bool g_torch113_shape = false;

// Integer and bool storages: torch builds no such tensor with requires_grad.
bool IsIntegerDtype(int dtype) { return std::string_view(kDtypes[dtype].code).find('F') == std::string_view::npos; }

// Every float value under V becomes the int 0 (in place: the shape is
// idempotent, and a model written twice is written the same).
void DropFloats(const V& v) {
  if (!v) return;
  if (v->kind == Value::kFloat) {
    v->kind = Value::kInt;
    v->i = 0;
  }
  for (const V& item : v->items) DropFloats(item);
  for (const auto& [key, value] : v->entries) {
    DropFloats(key);
    DropFloats(value);
  }
  DropFloats(v->state);
}

// M as torch 1.13 writes it (generators.h SetPtTorch113Shape).
Model Torch113Shaped(const Model& m) {
  Model shaped = m;
  shaped.protocol = 2;
  for (Tensor& t : shaped.tensors) {
    t.metadata = 0;
    if (t.storage >= 0 && t.storage < static_cast<int>(shaped.storages.size()) &&
        IsIntegerDtype(shaped.storages[t.storage].dtype)) {
      t.requires_grad = false;
    }
  }
  DropFloats(shaped.root);
  return shaped;
}

// Pickles the model and lays out its records as torch 1.13 (data.pkl,
// data/<k>, version) or torch 2.x (data.pkl, .format_version,
// .storage_alignment, byteorder, data/<k>, .data/version,
// .data/serialization_id) writes them.
PtDraft Serialize(const Model& model) {
  const Model shaped = g_torch113_shape ? Torch113Shaped(model) : Model{};
  const Model& m = g_torch113_shape ? shaped : model;
  PtDraft d;
  d.prefix = m.prefix;
  d.torch_style = m.torch_style;
  d.zip64_end = m.zip64_end;
  d.records.emplace_back("data.pkl", PickleRoot(m.protocol, m.tensors, m.storages, m.root, &d.pickle_ops));
  if (m.newer_records) {
    d.records.emplace_back(".format_version", TextBytes("1"));
    d.records.emplace_back(".storage_alignment", TextBytes("64"));
  }
  if (m.byteorder == 1) d.records.emplace_back("byteorder", TextBytes("little"));
  if (m.byteorder == 2) d.records.emplace_back("byteorder", TextBytes("big"));
  for (const Storage& st : m.storages) {
    Bytes b = st.bytes;
    if (m.byteorder == 2) {
      const int isz = kDtypes[st.dtype].size;
      for (std::size_t e = 0; e + isz <= b.size(); e += isz) std::reverse(b.begin() + e, b.begin() + e + isz);
    }
    d.records.emplace_back("data/" + st.key, std::move(b));
  }
  d.records.emplace_back(m.data_version ? ".data/version" : "version", TextBytes(m.version));
  if (m.newer_records) d.records.emplace_back(".data/serialization_id", TextBytes("1234567890123456789"));
  for (const auto& r : m.extra_records) d.records.push_back(r);
  if (m.root && (m.root->kind == Value::kDict || m.root->kind == Value::kODict)) Flatten(m, m.root, "", &d);
  return d;
}

Model RandomModel(Rng& rng, const PtDraftOptions& options) {
  Model m;
  const int protocols[] = {2, 2, 2, 2, 2, 3, 4, 4, 5};
  m.protocol = options.protocol ? options.protocol : protocols[Pick(rng, std::size(protocols))];
  m.torch_style = !Coin(rng, 5);
  m.zip64_end = m.torch_style && !Coin(rng, 6);
  const char* const prefixes[] = {"archive", "model", "pytorch_model", "gptq4_sd", "a", "x_1"};
  m.prefix = prefixes[Pick(rng, std::size(prefixes))];
  m.byteorder = static_cast<int>(Pick(rng, options.allow_big ? 3 : 2));
  if (m.byteorder == 2 && !Coin(rng, 2)) m.byteorder = 1;
  m.newer_records = Coin(rng, 3);
  m.data_version = m.newer_records ? !Coin(rng, 4) : Coin(rng, 8);
  m.version = Coin(rng, 4) ? "3" : "3\n";
  m.root = Dict(!Coin(rng, 5));
  m.Fill(m.root, static_cast<int>(1 + Pick(rng, static_cast<std::uint64_t>(std::max(1, options.max_items)))), rng, 1);
  if (options.copies) {
    // Each view gets a contiguous copy on its own storage (bytes set after Finish).
    std::vector<std::pair<V, V>> entries = m.root->entries;
    m.root->entries.clear();
    for (auto& [k, v] : entries) {
      m.root->entries.emplace_back(k, v);
      if (v->kind == Value::kTensor && k->kind == Value::kStr) {
        const Tensor t = m.tensors[v->tensor];
        V copy = m.NewTensor(m.storages[t.storage].dtype, t.size, rng);
        m.root->entries.emplace_back(Str(k->s + "_copy"), copy);
      }
    }
  }
  if (m.root->kind == Value::kODict && Coin(rng, 3)) {  // torch's _metadata, set by BUILD
    V meta = Dict(true);
    V version = Dict(false);
    version->entries.emplace_back(Str("version"), Int(1));
    meta->entries.emplace_back(Str(""), version);
    m.root->state = Dict(false);
    m.root->state->entries.emplace_back(Str("_metadata"), meta);
  }
  m.Finish(rng);
  if (options.copies) {
    for (const auto& [k, v] : m.root->entries) {
      if (v->kind != Value::kTensor || k->kind != Value::kStr || k->s.size() < 5 ||
          k->s.compare(k->s.size() - 5, 5, "_copy") != 0) {
        continue;
      }
      // The entry before is the original.
      for (std::size_t i = 1; i < m.root->entries.size(); ++i) {
        if (m.root->entries[i].second == v) {
          const Tensor& orig = m.tensors[m.root->entries[i - 1].second->tensor];
          Storage& st = m.storages[m.tensors[v->tensor].storage];
          st.bytes = Materialise(orig, m.storages[orig.storage]);
          st.explicit_bytes = true;
        }
      }
    }
  }
  if (!options.extra.empty()) m.Insert(options.extra, rng);
  return m;
}

std::vector<PtZipEntry> Entries(const PtDraft& d) {
  std::vector<PtZipEntry> entries;
  for (const auto& [name, bytes] : d.records) {
    PtZipEntry e;
    e.name = d.prefix + "/" + name;
    e.data = bytes;
    e.torch_style = d.torch_style;
    entries.push_back(std::move(e));
  }
  return entries;
}

PtZipOptions Options(const PtDraft& d) {
  PtZipOptions o;
  o.zip64_end = d.zip64_end;
  return o;
}

std::size_t RecordIndex(const PtDraft& d, const std::string& name) {
  for (std::size_t i = 0; i < d.records.size(); ++i) {
    if (d.records[i].first == name) return i;
  }
  return d.records.size();
}

Generated Done(Bytes bytes, std::string rule, std::string what) {
  return Generated{std::move(bytes), std::move(rule), std::move(what), {}};
}

Model BaseModel(Rng& rng, int protocol) {
  PtDraftOptions o;
  o.max_items = 3;
  o.allow_big = false;
  o.protocol = protocol;
  Model m = RandomModel(rng, o);
  V t = m.NewTensor(1, {2, 3}, rng);
  m.tensors[t->tensor].args = nullptr;
  m.root->entries.emplace_back(Str("tail" + std::to_string(m.counter++) + ".weight"), t);
  m.Finish(rng);
  return m;
}

Bytes WriteModel(const Model& m, PtZipLayout* layout) { return PtWriteDraft(Serialize(m), layout); }

}  // namespace qd::gen::pt_gen

namespace qd::gen {
void SetPtTorch113Shape(bool on) { pt_gen::g_torch113_shape = on; }
bool PtTorch113Shape() { return pt_gen::g_torch113_shape; }
}  // namespace qd::gen
