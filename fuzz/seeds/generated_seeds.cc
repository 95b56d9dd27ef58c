// generated_seeds.cc: seeds written from the registry's and the directory generators: safetensors_header_diff, model_dir_diff, recognised_file_diff, ggml_st_file_diff, awq_file_diff, fp8_file_diff; and ggml_blocks_diff's block and encoder inputs.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "codecs/ggml_blocks.h"
#include "fuzz/common/awq_file_input.h"
#include "fuzz/common/fp8_file_input.h"
#include "fuzz/common/model_dir_input.h"
#include "fuzz/common/recognised_file_input.h"
#include "fuzz/seeds/seed_writer.h"
#include "generators/generators.h"
#include "harness/registry.h"
#include "oracles/model_dir.h"

namespace qd::fuzz::seeds {

// ---- safetensors_header_diff: the registry's generators -----------------------

void SafetensorsSeeds(SeedWriter& w) {
  const qd::harness::FormatEntry& st = *qd::harness::FindFormat("safetensors");
  const qd::harness::FormatEntry& rbq = *qd::harness::FindFormat("rbq");
  auto emit = [&](const qd::harness::Generated& g) {
    const qd::Outcome o = st.oracle_read({g.bytes.data(), g.bytes.size()}, "seed", g.side_files);
    const std::string verdict = Verdict(o);
    const std::string expected = g.expected_rule.empty() ? "valid" : g.expected_rule;
    if (verdict != expected) {
      std::printf("note: safetensors generator meant %s (%s), oracle says %s\n",
                  expected.c_str(), g.description.c_str(), verdict.c_str());
    }
    w.Write("safetensors_header_diff", verdict, g.bytes);
  };
  for (std::uint64_t s = 1; s <= 3; ++s) {
    qd::harness::Rng rng(s);
    emit(st.generate_valid(rng));
  }
  qd::harness::Rng rbq_rng(4);
  emit(rbq.generate_valid(rbq_rng));  // block dtypes, read as a plain container
  std::uint64_t s = 100;
  for (const std::string& rule : st.violable_rules()) {
    const int copies = (rule == "ST-004" || rule == "ST-007" || rule == "ST-009") ? 3 : 1;
    for (int c = 0; c < copies; ++c) {
      qd::harness::Rng rng(s++);
      emit(st.generate_violation(rule, rng));
    }
  }
}


// ---- model_dir_diff: whole directories, framed -------------------------------
// Valid directories (every kind ModelDirValid makes), each IDX rule broken,
// GPTQ, bitsandbytes and plain models cut into shards at drawn tensor
// boundaries, torch models cut into .bin shards, and FP8 models in shards; labelled with the
// oracle's verdict.

void ModelDirSeeds(SeedWriter& w) {
  auto emit = [&](const qd::gen::GeneratedDir& g) {
    const std::vector<std::uint8_t> input = qd::fuzz::ModelDirInput(g);
    const qd::Outcome o =
        qd::oracle::ReadModelDir(qd::fuzz::ModelDirListingFromInput(input.data(), input.size()));
    w.Write("model_dir_diff", Verdict(o), input);
  };
  std::uint64_t s = 2000;
  for (int k = 0; k < 6; ++k) {
    qd::gen::Rng rng(s++);
    emit(qd::gen::ModelDirValid(rng));
  }
  for (const std::string& rule : qd::gen::ModelDirViolableRules()) {
    qd::gen::Rng rng(s++);
    emit(qd::gen::ModelDirViolation(rule, rng));
  }
  for (qd::gen::Generated (*model)(qd::gen::Rng&) :
       {&qd::gen::GptqValid, &qd::gen::BnbValid, &qd::gen::SafetensorsValid}) {
    qd::gen::Rng rng(s++);
    const qd::gen::Generated file = model(rng);
    emit(qd::gen::ShardModel(file, rng));
  }
  for (int k = 0; k < 3; ++k) {  // torch models in .bin shards with their index
    qd::gen::Rng rng(s++);
    emit(qd::gen::PtShardedModel(rng).dir);
  }
  for (int k = 0; k < 2; ++k) {  // FP8 models in shards, one with CFG-010 across its sources
    qd::gen::Rng rng(s++);
    const qd::gen::Generated file = k == 0 ? qd::gen::Fp8Valid(rng) : qd::gen::Fp8Violation("CFG-010", rng);
    emit(qd::gen::ShardModel(file, rng));
  }
}


// ---- recognised_file_diff, ggml_st_file_diff: the registry's generator of
// FORMAT and its fixed instances, files in recognised_file_input.h's layout
// (file plus one config) ----

namespace {

// G in recognised_file_input.h's layout, with the oracle's verdict.
void EmitGeneratedFile(SeedWriter& w, const qd::harness::FormatEntry& format, const char* target,
                       const qd::harness::Generated& g) {
  const Bytes input = qd::fuzz::RecognisedInput(g);
  const qd::fuzz::RecognisedCase c = qd::fuzz::RecognisedCaseFromInput(input.data(), input.size());
  w.Write(target, Verdict(format.oracle_read({c.file.data(), c.file.size()}, "input.safetensors", c.configs)),
          input);
}

}  // namespace

void GeneratedFileSeeds(SeedWriter& w, const char* format, const char* target) {
  const qd::harness::FormatEntry& entry = *qd::harness::FindFormat(format);
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    qd::harness::Rng rng(seed);
    EmitGeneratedFile(w, entry, target, entry.generate_valid(rng));
  }
  for (const std::string& rule : entry.violable_rules()) {
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      qd::harness::Rng rng(seed);
      EmitGeneratedFile(w, entry, target, entry.generate_violation(rule, rng));
    }
  }
  if (entry.fixed_instances != nullptr) {
    for (const qd::harness::Generated& g : entry.fixed_instances()) EmitGeneratedFile(w, entry, target, g);
  }
}

// ---- awq_file_diff: the AWQ generator's instances, raw and through the tail
// (LLM_AWQ's cases among them) ----

void AwqFileSeeds(SeedWriter& w) {
  const qd::harness::FormatEntry& awq = *qd::harness::FindFormat("awq");
  auto emit = [&](const Bytes& input, const std::string& meant) {
    const qd::fuzz::AwqCase c = qd::fuzz::AwqCaseFromInput(input.data(), input.size());
    const std::string verdict = Verdict(awq.oracle_read({c.file.data(), c.file.size()}, "seed", c.configs));
    if (verdict != meant) std::printf("note: awq_file_diff seed meant %s, oracle says %s\n", meant.c_str(), verdict.c_str());
    w.Write("awq_file_diff", verdict, input);
  };
  // Valid files through the tail (three seeds: the versions and config
  // styles differ), then one instance of every rule.
  for (std::uint32_t seed = 1; seed <= 3; ++seed) {
    const auto tail = qd::fuzz::AwqTail(0, seed);
    emit(Bytes(tail.begin(), tail.end()), "valid");
  }
  const std::vector<std::string> rules = awq.violable_rules();
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const auto tail = qd::fuzz::AwqTail(static_cast<std::uint8_t>(i + 1), 700 + static_cast<std::uint32_t>(i));
    emit(Bytes(tail.begin(), tail.end()), rules[i]);
  }
  // Two raw instances: the generator's file and config as they are.
  for (std::uint64_t seed = 11; seed <= 12; ++seed) {
    qd::harness::Rng rng(seed);
    const qd::harness::Generated g = awq.generate_valid(rng);
    emit(qd::fuzz::AwqRawInput(g.side_files, g.bytes), "valid");
  }
  // LLM_AWQ (docs/awq.md section 4), raw: a valid file and one per rule
  // whose finding differs there, each the first generator seed from 100
  // whose description names the LLM_AWQ case (all the words listed).
  struct LlmCase {
    const char* rule;  // "" for a valid file
    std::vector<std::string> words;
  };
  const LlmCase llm_cases[] = {
      {"", {"llm-awq"}},
      {"AWQ-002", {"llm-awq"}},
      {"AWQ-003", {"scaled_zeros has"}},
      {"AWQ-006", {"scaled zero", "llm-awq"}},
      {"AWQ-101", {"scaled_zeros labelled gemv_fast"}},
      {"AWQ-101", {"labelled llm-awq"}},
      {"AWQ-101", {"scaled_zeros is missing"}},
      {"AWQ-104", {"LLM_AWQ"}},
      {"AWQ-105", {"scaled_zeros is BF16"}},
      {"AWQ-106", {"scaled zero", "llm-awq"}},
  };
  for (const LlmCase& c : llm_cases) {
    for (std::uint64_t seed = 100; seed < 400; ++seed) {
      qd::harness::Rng rng(seed);
      const qd::harness::Generated g =
          c.rule[0] == '\0' ? awq.generate_valid(rng) : awq.generate_violation(c.rule, rng);
      bool named = true;
      for (const std::string& word : c.words) named = named && g.description.find(word) != std::string::npos;
      if (!named) continue;
      emit(qd::fuzz::AwqRawInput(g.side_files, g.bytes), c.rule[0] == '\0' ? "valid" : c.rule);
      break;
    }
  }
}

// ---- fp8_file_diff: the seed unit's inputs, labelled by the oracle --------------

void Fp8FileSeeds(SeedWriter& w) {
  const qd::harness::FormatEntry& fp8 = *qd::harness::FindFormat("fp8");
  for (const auto& [meant, input] : qd::fuzz::Fp8FileSeedInputs()) {
    const qd::fuzz::Fp8Case c = qd::fuzz::Fp8CaseFromInput(input.data(), input.size());
    const std::string verdict = Verdict(fp8.oracle_read({c.file.data(), c.file.size()}, "seed", c.configs));
    if (meant != "edited" && verdict != meant) std::printf("note: fp8_file_diff seed meant %s, oracle says %s\n", meant.c_str(), verdict.c_str());
    w.Write("fp8_file_diff", verdict, input);
  }
}

// ---- fp8_roundtrip: [weights or codes][8-byte tail] (fuzz/fp8_roundtrip.cc) ----
// Per encoded subtype and scaling: weights from the seed (scales 2^-8..2^8),
// every code decoded first (the 256 codes as the body), binary32 edge
// weights (NaN, infinities, subnormals, the clamp) and the edge scales.
// Labels: <what>-<subtype index>.

void Fp8RoundtripSeeds(SeedWriter& w) {
  auto emit = [&](const std::string& label, int subtype, int scaling, bool decode_first, bool edge_scales,
                  int n, int k, int br, int bc, std::uint32_t seed, const Bytes& body) {
    Bytes input = body;
    input.push_back(static_cast<std::uint8_t>(subtype | (scaling << 2) | (decode_first ? 0x10 : 0) |
                                              (edge_scales ? 0x20 : 0)));
    input.push_back(static_cast<std::uint8_t>(n - 1));
    input.push_back(static_cast<std::uint8_t>(k - 1));
    input.push_back(static_cast<std::uint8_t>((br - 1) | ((bc - 1) << 3)));
    for (int i = 0; i < 4; ++i) input.push_back(static_cast<std::uint8_t>(seed >> (8 * i)));
    w.Write("fp8_roundtrip", label + "-" + std::to_string(subtype), input);
  };
  Bytes every_code(256);
  for (int c = 0; c < 256; ++c) every_code[static_cast<std::size_t>(c)] = static_cast<std::uint8_t>(c);
  Bytes edges;
  for (float v : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 0x1p-149f, -0x1p-130f, 448.0f, 464.0f, 57344.0f,
                  61440.0f, 1e30f, 0.0625f, 1.0625f, -3.5f, 0x1p-10f}) {
    PutF32(&edges, v);
  }
  std::uint32_t seed = 900;
  for (int subtype = 0; subtype < 4; ++subtype) {
    for (int scaling = 0; scaling < 3; ++scaling) {
      emit("seeded", subtype, scaling, false, false, 4 + scaling, 24, 2, 5, seed++, {});
    }
    emit("every-code", subtype, 1, true, false, 16, 16, 1, 1, seed++, every_code);
    emit("every-code-edge-scales", subtype, 2, true, true, 16, 16, 3, 4, seed++, every_code);
    emit("edge-weights", subtype, 0, false, false, 2, 8, 1, 1, seed++, edges);
    emit("edge-scales", subtype, 1, false, true, 6, 8, 1, 1, seed++, {});
  }
}

// ---- ggml_blocks_diff: [selector][blocks or binary32 inputs] -----------------------

// Per type: a zero block, a patterned block with scale 1.0, and blocks whose
// scale halves are a subnormal, +infinity and a signalling NaN (mxfp4: the
// E8M0 bytes 0, 127 and 0xFF); per type with an encoder also an encode seed
// (two blocks of a ramp with a tie and a sign change). Labels: decode-<type>-<what>, encode-<type>.
void GgmlBlocksSeeds(SeedWriter& w) {
  const auto types = qd::codec::GgmlTypes();
  for (std::size_t t = 0; t < types.size(); ++t) {
    const qd::codec::GgmlTypeInfo& info = types[t];
    const std::string name(info.name);
    const std::size_t bytes = static_cast<std::size_t>(info.bytes);
    // Where the first scale half lies (docs/ggml_blocks.md section 3).
    std::size_t scale_at = 0;
    if (name == "q2_K") scale_at = 80;
    if (name == "q3_K") scale_at = 108;
    if (name == "q6_K") scale_at = 208;
    const struct {
      const char* what;
      std::uint16_t half;
    } kScales[] = {{"one", 0x3C00}, {"subnormal", 0x0001}, {"inf", 0x7C00}, {"snan", 0x7C01}};
    Bytes zero(1 + bytes, 0);
    zero[0] = static_cast<std::uint8_t>(t);
    w.Write("ggml_blocks_diff", "decode-" + name + "-zero", zero);
    for (const auto& scale : kScales) {
      Bytes b(1 + bytes);
      b[0] = static_cast<std::uint8_t>(t);
      for (std::size_t k = 1; k < b.size(); ++k) b[k] = static_cast<std::uint8_t>(k * 37 + 11);
      if (info.type == qd::codec::GgmlType::kMxfp4) {
        b[1] = scale.half == 0x3C00 ? 127 : scale.half == 0x0001 ? 0 : 0xFF;
        if (scale.half == 0x7C01) continue;  // 0xFF once is enough
      } else {
        b[1 + scale_at] = static_cast<std::uint8_t>(scale.half & 0xFF);
        b[2 + scale_at] = static_cast<std::uint8_t>(scale.half >> 8);
      }
      w.Write("ggml_blocks_diff", "decode-" + name + "-" + scale.what, b);
    }
    if (info.type == qd::codec::GgmlType::kMxfp4) continue;  // no encoder
    Bytes e = {static_cast<std::uint8_t>(t | 0x80)};
    for (int j = 0; j < 2 * info.values; ++j) PutF32(&e, static_cast<float>(j % 64 - 21) * 0.25f);
    w.Write("ggml_blocks_diff", "encode-" + name, e);
  }
}


}  // namespace qd::fuzz::seeds
