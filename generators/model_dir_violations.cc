// model_dir_violations.cc: one IDX rule broken in a valid sharded directory
// (docs/model_dir.md 3). Every builder starts from a GPTQ or bitsandbytes
// model cut into two or more shards with an index (drawn first, in that
// order) and makes one change chosen so that every step before the rule's
// passes. See model_dir.h.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "generators/model_dir.h"

namespace qd::gen {
namespace dir_gen {
namespace {

GeneratedDirFile Regular(std::string name, std::vector<std::uint8_t> bytes) {
  return {std::move(name), qd::DirEntryKind::kRegular, std::move(bytes)};
}
GeneratedDirFile Regular(std::string name, const std::string& text) {
  return Regular(std::move(name), std::vector<std::uint8_t>(text.begin(), text.end()));
}
GeneratedDirFile Special(std::string name, qd::DirEntryKind kind) { return {std::move(name), kind, {}}; }

GeneratedDirFile* FindFile(GeneratedDir& g, const std::string& name) {
  for (GeneratedDirFile& f : g.files) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

void RemoveFile(GeneratedDir& g, const std::string& name) {
  g.files.erase(std::remove_if(g.files.begin(), g.files.end(),
                               [&](const GeneratedDirFile& f) { return f.name == name; }),
                g.files.end());
}

GeneratedDir Done(const DirDraft& d, const std::string& r, const std::string& what) {
  return Write(d, r, what + "; " + d.what);
}

// Every weight_map value `from` becomes `to`.
void Remap(DirDraft& d, const std::string& from, const std::string& to) {
  for (auto& entry : d.weight_map) {
    if (entry.second == from) entry.second = to;
  }
}

void Unmap(DirDraft& d, const std::string& tensor) {
  d.weight_map.erase(std::remove_if(d.weight_map.begin(), d.weight_map.end(),
                                    [&](const auto& e) { return e.first == tensor; }),
                     d.weight_map.end());
}

// Two shard ranks a < b (the draft has two or more shards).
std::pair<std::size_t, std::size_t> TwoShards(const DirDraft& d, Rng& rng) {
  const std::size_t a = Pick(rng, d.shards.size() - 1);
  return {a, a + 1 + Pick(rng, d.shards.size() - 1 - a)};
}

// A shard rank holding two or more tensors (so it stays named when one
// leaves the index), or -1.
int ShardWithTwo(const DirDraft& d, Rng& rng) {
  std::vector<int> ranks;
  for (std::size_t s = 0; s < d.shards.size(); ++s) {
    if (d.shards[s].tensors.size() >= 2) ranks.push_back(static_cast<int>(s));
  }
  return ranks.empty() ? -1 : ranks[Pick(rng, ranks.size())];
}

// Puts t into shard s at a random place of its data order.
void Insert(ShardDraft& s, codec::TensorWithBytes t, Rng& rng) {
  const std::size_t at = Pick(rng, s.tensors.size() + 1);
  s.tensors.insert(s.tensors.begin() + static_cast<std::ptrdiff_t>(at), std::move(t));
}

codec::TensorWithBytes TakeTensor(ShardDraft& s, Rng& rng) {
  const std::size_t i = Pick(rng, s.tensors.size());
  codec::TensorWithBytes t = std::move(s.tensors[i]);
  s.tensors.erase(s.tensors.begin() + static_cast<std::ptrdiff_t>(i));
  return t;
}

// ---- section 2: the weight set ---------------------------------------------

GeneratedDir NoWeightSet(const std::string& r, DirDraft& d, Rng& rng) {
  GeneratedDir g;
  g.expected_rule = r;
  const std::uint64_t variant = Pick(rng, 4);
  if (variant != 0) g.files = d.others;  // the configs stay
  switch (variant) {
    case 0:
      g.description = "an empty directory";
      break;
    case 1:
      g.files.push_back(Regular("generation_config.json", std::string("{\"bos_token_id\": 1}")));
      g.files.push_back(Regular("tokenizer.json", std::string("{}")));
      g.description = "configs and a tokenizer, no weights";
      break;
    case 2:
      g.files.push_back(Special("model.safetensors", qd::DirEntryKind::kEscaping));
      g.description = "the one weight file is a link out of the directory (not regular)";
      break;
    default:
      g.files.push_back(Regular("training_args.bin", std::string("not a weight file")));
      g.files.push_back(Regular("optimizer.pt", std::string("not a weight file")));
      g.files.push_back(Regular("model.safetensors.bak", std::string("not a weight file")));
      g.files.push_back(Special("model.safetensors", qd::DirEntryKind::kOther));
      g.files.push_back(Special("pytorch_model.bin.index.json", qd::DirEntryKind::kOther));
      g.description = "names that are not weight files, weight names that are not regular files";
      break;
  }
  return g;
}

GeneratedDir SeveralWeightSets(const std::string& r, DirDraft& d, Rng& rng) {
  const std::uint64_t variant = Pick(rng, 5);
  if (variant == 3) {
    d.with_index = false;
    return Done(d, r, "several shards and no index");
  }
  if (variant == 4) {
    // Names decide (docs/model_dir.md 2): the bytes are a shard's.
    GeneratedDir g = Done(d, r, "the weights replaced by two torch files and no index");
    const std::vector<std::uint8_t> first = g.files[0].bytes;
    for (const ShardDraft& s : d.shards) RemoveFile(g, s.name);
    RemoveFile(g, kIndexName);
    g.files.push_back(Regular("pytorch_model-00001-of-00002.bin", first));
    g.files.push_back(Regular("pytorch_model-00002-of-00002.bin", first));
    return g;
  }
  IndexParts parts;
  GeneratedDir g = Write(d, r, "", &parts);
  const std::string index = IndexText(parts);
  static const char* const kSecondIndex[] = {"model.fp16.safetensors.index.json",
                                             "diffusion_pytorch_model.safetensors.index.json"};
  switch (variant) {
    case 0:
      g.files.push_back(Regular("pytorch_model.bin", g.files[0].bytes));
      g.description = "safetensors shards and pytorch_model.bin";
      break;
    case 1:
      g.files.push_back(Regular("pytorch_model.bin.index.json", index));
      g.description = "a safetensors index and a torch index";
      break;
    default:
      g.files.push_back(Regular(kSecondIndex[Pick(rng, 2)], index));
      g.description = "two safetensors indexes";
      break;
  }
  g.description += "; " + d.what;
  return g;
}

// ---- section 3 steps 2-5: the index and the shard names ------------------------

GeneratedDir IndexNotStrict(const std::string& r, DirDraft& d, Rng& rng) {
  IndexParts p;
  GeneratedDir g = Write(d, r, "", &p);
  // The index respelled: bad parts and extra members through IndexText, or
  // the whole text when the break is outside them.
  IndexParts bad = p;
  std::vector<std::string> extra;
  std::string text, what;
  static const char* const kNotObjects[] = {"[]", "null", "\"model.safetensors\"", "7", "true"};
  static const char* const kNotStrings[] = {"1", "null", "[\"model.safetensors\"]", "{}", "false"};
  static const char* const kBadStrings[] = {"\"\xff\"", "\"\xc0\x80\"", "\"\\ud800\"", "\"a\x01z\"",
                                            "'single'"};
  switch (Pick(rng, 14)) {
    case 0: text = "\xEF\xBB\xBF" + IndexText(p); what = "a UTF-8 BOM"; break;
    case 1: text = IndexText(p); text.resize(text.rfind('}')); what = "truncated"; break;
    case 2: text = IndexText(p) + "{}"; what = "two values"; break;
    case 3: extra.push_back("\"weight_map\": " + p.weight_map); what = "weight_map twice"; break;
    case 4:
      bad.weight_map = "{" + JsonString(d.weight_map[0].first) + ": " +
                       JsonString(d.weight_map[0].second) + "," + p.weight_map.substr(1);
      what = "a tensor twice in weight_map";
      break;
    case 5: text = "[" + IndexText(p) + "]"; what = "an array on top"; break;
    case 6:
      text = "{\n  \"metadata\": " + (p.metadata.empty() ? std::string("{}") : p.metadata) +
             ",\n  \"weights\": " + p.weight_map + "\n}\n";
      what = "no weight_map member";
      break;
    case 7: bad.weight_map = kNotObjects[Pick(rng, std::size(kNotObjects))]; what = "weight_map not an object"; break;
    case 8: {
      std::vector<std::pair<std::string, std::string>> members;
      for (const auto& [tensor, shard] : d.weight_map) members.emplace_back(tensor, JsonString(shard));
      members[Pick(rng, members.size())].second = kNotStrings[Pick(rng, std::size(kNotStrings))];
      bad.weight_map = WeightMapText(members);
      what = "a weight_map value not a string";
      break;
    }
    case 9: bad.metadata = kNotObjects[Pick(rng, std::size(kNotObjects))]; what = "metadata not an object"; break;
    case 10:
      bad.metadata = Coin(rng) ? "{\"total_size\": 1e400}" : "{\"total_size\": -2e308}";
      what = "a number overflowing binary64";
      break;
    case 11:
      extra.push_back("\"nested\": " + std::string(64, '[') + std::string(64, ']'));
      what = "nesting deeper than 64";
      break;
    case 12:
      extra.push_back(std::string("\"note\": ") + kBadStrings[Pick(rng, std::size(kBadStrings))]);
      what = "a string that is not strict JSON";
      break;
    default:
      bad.weight_map = p.weight_map.substr(0, p.weight_map.rfind('}')) + ",}";
      what = "a trailing comma";
      break;
  }
  if (text.empty()) text = IndexText(bad, extra);
  FindFile(g, kIndexName)->bytes.assign(text.begin(), text.end());
  g.description = "index not strict JSON with weight_map: " + what + "; " + d.what;
  return g;
}

GeneratedDir ShardEscapes(const std::string& r, DirDraft& d, Rng& rng) {
  const std::string shard = d.shards[Pick(rng, d.shards.size())].name;
  const std::string nul = std::string(1, '\0');
  const std::vector<std::string> names = {"../" + shard, "/models/" + shard, "shards/" + shard,
                                          "..\\" + shard, "",  ".", "..", shard + nul};
  const std::size_t variant = Pick(rng, names.size() + 1);
  if (variant == names.size()) {
    GeneratedDir g = Done(d, r, "a shard is a link out of the directory");
    GeneratedDirFile* f = FindFile(g, shard);
    f->kind = qd::DirEntryKind::kEscaping;
    f->bytes.clear();
    return g;
  }
  Remap(d, shard, names[variant]);
  return Done(d, r, "the index names a shard outside the directory");
}

GeneratedDir ShardMissing(const std::string& r, DirDraft& d, Rng& rng) {
  const std::string shard = d.shards[Pick(rng, d.shards.size())].name;
  switch (Pick(rng, 3)) {
    case 0: {
      GeneratedDir g = Done(d, r, "a shard named by the index is missing");
      RemoveFile(g, shard);
      return g;
    }
    case 1: {
      GeneratedDir g = Done(d, r, "a shard named by the index is a subdirectory");
      GeneratedDirFile* f = FindFile(g, shard);
      f->kind = qd::DirEntryKind::kOther;
      f->bytes.clear();
      return g;
    }
    default:
      Remap(d, shard, "model-00099-of-00099.safetensors");
      return Done(d, r, "the index names a shard the directory does not hold");
  }
}

GeneratedDir ShardNotNamed(const std::string& r, DirDraft& d, Rng& rng) {
  if (Coin(rng)) {
    const std::string shard = d.shards[Pick(rng, d.shards.size())].name;
    for (const ShardDraft& s : d.shards) {
      if (s.name == shard) {
        for (const auto& t : s.tensors) Unmap(d, t.spec.name);
      }
    }
    return Done(d, r, "the index names none of a shard's tensors");
  }
  static const char* const kNames[] = {"model.safetensors", "model-00003-of-00002.safetensors",
                                       "adapter_model.safetensors", "model-00001-of-00001.safetensors"};
  GeneratedDir g = Done(d, r, "a weight file the index does not name");
  // Two draws in sequence (as arguments of one call, their order would be
  // the compiler's: GCC and clang would write different directories).
  const char* const name = kNames[Pick(rng, std::size(kNames))];
  const std::size_t copied = Pick(rng, d.shards.size());
  g.files.push_back(Regular(name, g.files[copied].bytes));
  return g;
}

// ---- section 3 step 7: the tensors against the index -----------------------------

GeneratedDir TensorInTwoShards(const std::string& r, DirDraft& d, Rng& rng) {
  // The index keeps the tensor in the earlier shard, so that shard passes
  // IDX-009 and the later one meets it again.
  const auto [a, b] = TwoShards(d, rng);
  const ShardDraft& from = d.shards[a];
  codec::TensorWithBytes copy = from.tensors[Pick(rng, from.tensors.size())];
  Insert(d.shards[b], std::move(copy), rng);
  return Done(d, r, "a tensor in two shards");
}

GeneratedDir TensorNotIndexed(const std::string& r, DirDraft& d, Rng& rng) {
  const int s = ShardWithTwo(d, rng);
  if (s >= 0 && Coin(rng)) {
    const ShardDraft& shard = d.shards[static_cast<std::size_t>(s)];
    Unmap(d, shard.tensors[Pick(rng, shard.tensors.size())].spec.name);
    return Done(d, r, "the index leaves out a tensor of a shard");
  }
  codec::TensorWithBytes extra;
  extra.spec = {"quantdiff.unindexed.weight", "F32", {2}, 8};
  extra.bytes = {0, 0, 128, 63, 0, 0, 0, 192};  // 1.0f, -2.0f
  Insert(d.shards[Pick(rng, d.shards.size())], std::move(extra), rng);
  return Done(d, r, "a shard holds a tensor the index does not list");
}

GeneratedDir TensorElsewhere(const std::string& r, DirDraft& d, Rng& rng) {
  const int s = ShardWithTwo(d, rng);
  const std::size_t other_offset = 1 + Pick(rng, d.shards.size() - 1);
  if (s >= 0 && Coin(rng)) {
    const auto from = static_cast<std::size_t>(s);
    const ShardDraft& shard = d.shards[from];
    const std::string tensor = shard.tensors[Pick(rng, shard.tensors.size())].spec.name;
    const std::string to = d.shards[(from + other_offset) % d.shards.size()].name;
    for (auto& entry : d.weight_map) {
      if (entry.first == tensor) entry.second = to;
    }
    return Done(d, r, "the index puts a tensor in another shard");
  }
  const std::size_t from = Pick(rng, d.shards.size());
  codec::TensorWithBytes t = TakeTensor(d.shards[from], rng);
  Insert(d.shards[(from + other_offset) % d.shards.size()], std::move(t), rng);
  return Done(d, r, "a tensor moved to another shard, the index unchanged");
}

GeneratedDir TensorInNoShard(const std::string& r, DirDraft& d, Rng& rng) {
  if (Coin(rng)) {
    const std::string shard = d.shards[Pick(rng, d.shards.size())].name;
    const std::size_t at = Pick(rng, d.weight_map.size() + 1);
    d.weight_map.insert(d.weight_map.begin() + static_cast<std::ptrdiff_t>(at),
                        {"model.layers.99.ghost.weight", shard});
    return Done(d, r, "the index lists a tensor no shard holds");
  }
  TakeTensor(d.shards[Pick(rng, d.shards.size())], rng);
  return Done(d, r, "a tensor removed from its shard, the index unchanged");
}

// ---- section 3 steps 8-10 ----------------------------------------------------------

GeneratedDir TotalSizeWrong(const std::string& r, DirDraft& d, Rng& rng) {
  // file bytes >= tensor bytes + 16 per shard (length and a padded "{}"), so
  // tensor + 1..8 and file - 1..8 match neither convention.
  const DirSizes sizes = SizesOf(d);
  const std::string tensor = std::to_string(sizes.tensor_bytes);
  switch (Pick(rng, 8)) {
    case 0: d.total_size_text = std::to_string(sizes.tensor_bytes + 1 + Pick(rng, 8)); break;
    case 1: d.total_size_text = std::to_string(sizes.file_bytes - 1 - Pick(rng, 8)); break;
    case 2: d.total_size_text = std::to_string(sizes.file_bytes + 1 + Pick(rng, 1000)); break;
    case 3: d.total_size_text = "-" + std::to_string(1 + sizes.tensor_bytes); break;
    case 4: d.total_size_text = tensor + ".0"; break;
    case 5: d.total_size_text = JsonString(tensor); break;
    case 6: d.total_size_text = Coin(rng) ? "null" : "[" + tensor + "]"; break;
    default: d.total_size_text = "18446744073709551616"; break;  // 2^64: not an integer that fits
  }
  return Done(d, r, "metadata.total_size " + d.total_size_text + " (tensors " + tensor + ", files " +
                        std::to_string(sizes.file_bytes) + ")");
}

GeneratedDir MetadataDisagrees(const std::string& r, DirDraft& d, Rng& rng) {
  const auto [a, b] = TwoShards(d, rng);
  ShardDraft& later = d.shards[b];
  const ShardDraft& earlier = d.shards[a];
  for (auto& [key, value] : later.metadata) {
    if (earlier.has_metadata && Coin(rng)) {
      for (const auto& [k, v] : earlier.metadata) {
        if (k == key) {
          value = v + "-other";
          return Done(d, r, "__metadata__[\"" + key + "\"] differs between two shards");
        }
      }
    }
  }
  d.shards[a].has_metadata = true;
  d.shards[a].metadata.emplace_back("quantdiff.writer", "first");
  later.has_metadata = true;
  later.metadata.emplace_back("quantdiff.writer", "second");
  return Done(d, r, "__metadata__[\"quantdiff.writer\"] differs between two shards");
}

GeneratedDir BlockDtypeInShard(const std::string& r, DirDraft& d, Rng& rng) {
  const Generated rbq = RbqValid(rng);
  if (Coin(rng)) {
    // The RBQ file itself, sharded with an index.
    DirDraft sharded = DraftOf(rbq, rng, {1, true});
    return Done(sharded, r, "an RBQ model sharded with an index");
  }
  std::vector<codec::TensorWithBytes> tensors;
  const codec::ContainerResult c = codec::ReadContainer({rbq.bytes.data(), rbq.bytes.size()}, "rbq");
  for (const codec::TensorEntry& t : c.container.tensors) {
    if (codec::InfoOf(t.dtype).is_block) {
      codec::TensorWithBytes block;
      block.spec = {"rbq." + std::string(t.name), std::string(codec::InfoOf(t.dtype).name), t.shape, t.end - t.begin};
      block.bytes.assign(c.container.Data(t), c.container.Data(t) + (t.end - t.begin));
      const std::size_t s = Pick(rng, d.shards.size());
      d.weight_map.emplace_back(block.spec.name, d.shards[s].name);
      Insert(d.shards[s], std::move(block), rng);
      break;
    }
  }
  return Done(d, r, "a Q4B32/Q8B32 tensor in a shard");
}

}  // namespace

const std::vector<DirRule>& DirRules() {
  static const std::vector<DirRule> rules = {
      {"IDX-001", NoWeightSet},       {"IDX-002", SeveralWeightSets}, {"IDX-003", IndexNotStrict},
      {"IDX-004", ShardEscapes},      {"IDX-005", ShardMissing},      {"IDX-006", ShardNotNamed},
      {"IDX-007", TensorInTwoShards}, {"IDX-008", TensorNotIndexed},  {"IDX-009", TensorElsewhere},
      {"IDX-010", TensorInNoShard},   {"IDX-011", TotalSizeWrong},    {"IDX-012", MetadataDisagrees},
      {"IDX-013", BlockDtypeInShard},
  };
  return rules;
}

}  // namespace dir_gen

using namespace dir_gen;

std::vector<std::string> ModelDirViolableRules() {
  std::vector<std::string> rules;
  for (const DirRule& rule : DirRules()) rules.emplace_back(rule.rule);
  return rules;
}

GeneratedDir ModelDirViolation(std::string_view rule, Rng& rng) {
  // The base: a GPTQ or bitsandbytes model (two or more tensors each) in two
  // or more shards with an index.
  const Generated model = Coin(rng) ? GptqValid(rng) : BnbValid(rng);
  DirDraft d = DraftOf(model, rng, {2, true});
  const std::string r(rule);
  for (const DirRule& entry : DirRules()) {
    if (r == entry.rule) return entry.build(r, d, rng);
  }
  return Write(d, "", "unknown rule " + r + ": a valid directory; " + d.what);
}

}  // namespace qd::gen
