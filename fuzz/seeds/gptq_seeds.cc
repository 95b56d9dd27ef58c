// gptq_seeds.cc: seeds of gptq_file_diff, gptq_config_diff and gptq_roundtrip.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/common/gptq_file_input.h"
#include "fuzz/seeds/seed_writer.h"
#include "generators/generators.h"
#include "harness/registry.h"

namespace qd::fuzz::seeds {

// ---- gptq_file_diff: tail-format and raw inputs ------------------------------------

qd::fuzz::GptqFileTail GptqTail(int format, int bits, int k32, int n32, int group_choice,
                                std::uint32_t seed) {
  qd::fuzz::GptqFileTail t;
  t.format = format;
  t.bits = bits;
  t.k32 = k32;
  t.n32 = n32;
  t.group_choice = group_choice;
  t.seed = seed;
  return t;
}

void GptqFileSeeds(SeedWriter& w) {
  const qd::harness::FormatEntry& gptq = *qd::harness::FindFormat("gptq");
  auto emit = [&](const Bytes& input, const char* meant) {
    const qd::fuzz::GptqCase c = qd::fuzz::GptqCaseFromInput(input.data(), input.size());
    const std::string verdict =
        Verdict(gptq.oracle_read({c.file.data(), c.file.size()}, "input-gptq.safetensors", c.configs));
    if (verdict != meant) std::printf("note: gptq_file_diff seed meant %s, oracle says %s\n", meant, verdict.c_str());
    w.Write("gptq_file_diff", verdict, input);
  };
  using qd::fuzz::GptqAdd;
  using qd::fuzz::GptqOp;
  using qd::fuzz::GptqOpWriter;
  using qd::fuzz::GptqRole;
  // Valid files across the parameter space.
  {
    auto t = GptqTail(0, 4, 2, 1, 1, 700);
    emit(GptqOpWriter().Finish(t), "valid");
    t = GptqTail(1, 3, 3, 2, 0, 701);  // 3-bit, one group, act-order, BF16, bias
    t.g_idx_mode = 1, t.scales_dtype = 1, t.bias = true, t.aliases = true;
    emit(GptqOpWriter().Finish(t), "valid");
    t = GptqTail(2, 5, 2, 1, 5, 702);  // planar 5-bit, g48 (partial group), two layers, dense
    t.second_layer = true, t.dense = true, t.sources = 2, t.order = 3;
    emit(GptqOpWriter().Finish(t), "valid");
    t = GptqTail(2, 7, 4, 2, 7, 703);  // planar 7-bit, g7, F32 scales, config.json alone
    t.scales_dtype = 2, t.sources = 1, t.g_idx_mode = 2, t.aliases = true;
    emit(GptqOpWriter().Finish(t), "valid");
    t = GptqTail(1, 8, 1, 4, 3, 704);  // v2 8-bit, custom group 200 (> K), zeros all 0
    t.custom_group = 200, t.zero_mode = 1, t.sources = 3;
    emit(GptqOpWriter().Finish(t), "valid");
    t = GptqTail(0, 2, 8, 1, 4, 705);  // v1 2-bit g24, bare names
    t.bare = true, t.order = 1;
    emit(GptqOpWriter().Finish(t), "valid");
    t = GptqTail(2, 3, 2, 1, 1, 706);  // planar 3-bit (differs from continuous)
    emit(GptqOpWriter().Finish(t), "valid");
  }
  // Layer rules, in docs/gptq.md's check order.
  emit(GptqOpWriter().DropTensor(GptqRole::kGidx).Finish(GptqTail(0, 4, 2, 1, 1, 710)), "GPTQ-101");
  emit(GptqOpWriter().AddTensor(GptqAdd::kLoneMember).Finish(GptqTail(1, 4, 2, 1, 1, 711)), "GPTQ-101");
  emit(GptqOpWriter().AddTensor(GptqAdd::kDenseWeight).Finish(GptqTail(0, 3, 1, 1, 0, 712)), "GPTQ-102");
  emit(GptqOpWriter().AddTensor(GptqAdd::kSibling).Finish(GptqTail(2, 6, 2, 1, 1, 713)), "GPTQ-103");
  emit(GptqOpWriter().Op(GptqOp::kTensorDtype, 0, qd::fuzz::GptqDtypeIndex("F32")).Finish(GptqTail(0, 4, 2, 1, 1, 714)),
       "GPTQ-104");
  emit(GptqOpWriter().Op(GptqOp::kReshape, 2, 0).Finish(GptqTail(1, 8, 2, 1, 1, 715)), "GPTQ-104");
  emit(GptqOpWriter().Op(GptqOp::kResizeDim, 0, 0, 1).Finish(GptqTail(0, 4, 2, 1, 1, 716)), "GPTQ-002");
  emit(GptqOpWriter().Op(GptqOp::kResizeDim, 1, 0, 1).Finish(GptqTail(1, 2, 2, 1, 1, 717)), "GPTQ-003");
  emit(GptqOpWriter().Op(GptqOp::kResizeDim, 2, 1, 0xff).Finish(GptqTail(2, 4, 2, 1, 1, 718)), "GPTQ-105");
  emit(GptqOpWriter().SetGidx(0, 3, 1).Finish(GptqTail(0, 4, 4, 1, 1, 719)), "GPTQ-004");
  emit(GptqOpWriter().SetSpecial(GptqRole::kScales, 0, 5, 2).Finish(GptqTail(1, 4, 2, 1, 1, 720)), "GPTQ-106");
  emit(GptqOpWriter().SetWord(GptqRole::kQzeros, 0, 0, 1).Finish(GptqTail(0, 3, 2, 1, 1, 721)), "GPTQ-107");
  // Config rules.
  emit(GptqOpWriter().CfgSplice(0, "{", 0).Finish(GptqTail(0, 4, 2, 1, 1, 730)), "CFG-001");
  emit(GptqOpWriter().CfgSet(0, "bits", "4.0").Finish(GptqTail(0, 4, 2, 1, 1, 731)), "CFG-002");
  emit(GptqOpWriter().Op(GptqOp::kCfgSources, 0).Finish(GptqTail(0, 4, 2, 1, 1, 732)), "CFG-003");
  emit(GptqOpWriter().CfgSet(0, "checkpoint_format", "\"marlin\"").Finish(GptqTail(0, 4, 2, 1, 1, 733)), "GPTQ-005");
  emit(GptqOpWriter().CfgSet(0, "method", "\"awq\"").Finish(GptqTail(1, 4, 2, 1, 1, 734)), "CFG-004");
  emit(GptqOpWriter().CfgSet(0, "quant_method", "\"awq\"").Finish(GptqTail(0, 4, 2, 1, 1, 735)), "CFG-005");
  emit(GptqOpWriter().CfgDrop(0, "bits").Finish(GptqTail(0, 4, 2, 1, 1, 736)), "CFG-006");
  emit(GptqOpWriter().CfgSet(0, "group_size", "0").Finish(GptqTail(0, 4, 2, 1, 1, 737)), "CFG-007");
  emit(GptqOpWriter().CfgSet(0, "bits", "5").Finish(GptqTail(0, 4, 2, 1, 1, 738)), "GPTQ-001");
  emit(GptqOpWriter().CfgSet(0, "pack_dtype", "\"int16\"").Finish(GptqTail(0, 4, 2, 1, 1, 739)), "CFG-008");
  emit(GptqOpWriter().CfgSet(0, "dynamic", "{\"-:lm_head\":{}}").Finish(GptqTail(0, 4, 2, 1, 1, 740)), "CFG-009");
  {
    auto t = GptqTail(0, 4, 2, 1, 1, 741);
    t.sources = 3;
    emit(GptqOpWriter().CfgSet(1, "bits", "8").Finish(t), "CFG-010");
  }
  emit(GptqOpWriter().CfgSet(0, "is_marlin_format", "false").Finish(GptqTail(0, 4, 2, 1, 1, 742)), "CFG-101");
  emit(GptqOpWriter().CfgSet(0, "zero_point", "true").Finish(GptqTail(0, 4, 2, 1, 1, 743)), "CFG-102");
  // Container rules in front of the GPTQ ones.
  emit(GptqOpWriter().Op(GptqOp::kHeaderSplice, qd::fuzz::GptqTokenIndex("\xff"), 20, 0, 0)
           .Finish(GptqTail(0, 4, 2, 1, 1, 750)),
       "ST-004");
  // Whole instances from the registry generator, through the raw mode.
  for (std::uint64_t s = 760; s < 764; ++s) {
    qd::harness::Rng rng(s);
    const qd::harness::Generated g = gptq.generate_valid(rng);
    emit(qd::fuzz::GptqRawInput(g.side_files, g.bytes), "valid");
  }
  for (const char* rule : {"CFG-010", "GPTQ-107", "GPTQ-004"}) {
    qd::harness::Rng rng(770);
    const qd::harness::Generated g = gptq.generate_violation(rule, rng);
    emit(qd::fuzz::GptqRawInput(g.side_files, g.bytes), rule);
  }
}

// ---- gptq_config_diff: [h0][h1][u16 length][source 1][source 2] ----------------------

void GptqConfigSeeds(SeedWriter& w) {
  const qd::harness::FormatEntry& gptq = *qd::harness::FindFormat("gptq");
  auto make = [](int name1, int name2, bool two, bool none, int file, const std::string& a,
                 const std::string& b) {
    Bytes input;
    input.push_back(static_cast<std::uint8_t>(name1 | (name2 << 3) | (two ? 0x40 : 0) | (none ? 0x80 : 0)));
    input.push_back(static_cast<std::uint8_t>(file));
    input.push_back(static_cast<std::uint8_t>(a.size() & 0xff));
    input.push_back(static_cast<std::uint8_t>(a.size() >> 8));
    input.insert(input.end(), a.begin(), a.end());
    input.insert(input.end(), b.begin(), b.end());
    return input;
  };
  // The label: what the oracle says of the target's fixed file with these sources.
  auto emit = [&](const Bytes& input) {
    const std::uint8_t h0 = input[0];
    const std::size_t len1 = input[2] | (input[3] << 8);
    const auto& names = qd::fuzz::kGptqSourceNames;
    std::vector<qd::SideFile> configs;
    if ((h0 & 0x80) == 0) {
      configs.push_back({std::string(names[(h0 & 7) % names.size()]), Bytes(input.begin() + 4, input.begin() + 4 + len1)});
      if (h0 & 0x40) {
        configs.push_back({std::string(names[((h0 >> 3) & 7) % names.size()]), Bytes(input.begin() + 4 + len1, input.end())});
      }
    }
    const Bytes& file = qd::fuzz::GptqConfigDiffFile(input[1] & 3);
    w.Write("gptq_config_diff", Verdict(gptq.oracle_read({file.data(), file.size()}, "dir/model.safetensors", configs)), input);
  };
  const std::string c0 = qd::gen::GptqConfigText(0, 4, 32);
  const std::string c1 = qd::gen::GptqConfigText(1, 3, -1);
  const std::string c2 = qd::gen::GptqConfigText(2, 5, 48);
  const std::string c3 = qd::gen::GptqConfigText(0, 8, 128);
  emit(make(0, 0, false, false, 0, c0, ""));
  emit(make(1, 0, false, false, 1, c1, ""));
  emit(make(3, 0, false, false, 2, c2, ""));
  emit(make(4, 0, false, false, 3, c3, ""));
  emit(make(2, 0, false, false, 0, "{\"quantization_config\":" + c0 + "}", ""));
  emit(make(0, 2, true, false, 1, c1, "{\"model_type\":\"llama\",\"quantization_config\":" + c1 + "}"));
  emit(make(0, 5, true, false, 0, c0, "{\"quantization_config\":{\"bits\":4,\"group_size\":128}}"));  // CFG-010
  emit(make(0, 0, false, false, 1, "{\"w_bit\":3,\"q_group_size\":-1,\"version\":\"GPTQ_V2\",\"zero_point\":false}", ""));
  emit(make(0, 0, false, false, 2, "{\"wbits\":5,\"group_size\":48,\"format\":\"gptq_p\",\"pack_dtype\":\"int32\",\"dynamic\":{}}", ""));
  emit(make(0, 0, false, false, 0, "{\"bits\":4,\"group_size\":32,\"is_marlin_format\":false}", ""));  // CFG-101
  emit(make(0, 0, false, false, 0, "{\"bits\":4,\"group_size\":32,\"checkpoint_format\":\"marlin\"}", ""));
  emit(make(0, 0, false, false, 0, "\xef\xbb\xbf" + c0, ""));
  emit(make(0, 0, false, false, 0, "{\"bits\":4,\"bits\":4,\"group_size\":32}", ""));
  emit(make(0, 0, false, false, 0, "{\"bits\":4.0,\"group_size\":32}", ""));
  emit(make(0, 0, false, false, 0, "{\"bits\":4,\"w_bit\":8,\"group_size\":32}", ""));
  emit(make(0, 0, false, false, 3, "{\"bits\":8,\"group_size\":128,\"sym\":true,\"zero_point\":true}", ""));
  emit(make(2, 0, false, false, 0, "{\"quantization_config\":null}", ""));  // CFG-003
  emit(make(0, 0, false, true, 0, "", ""));                                 // CFG-003
  emit(make(0, 0, false, false, 0, "{\"bits\":4,\"group_size\":0}", ""));
  emit(make(0, 0, false, false, 1, "{\"bits\":3,\"group_size\":-1,\"format\":\"gptq_v2\",\"dynamic\":{\"x\":{}}}", ""));
}

// ---- gptq_roundtrip: [codes, zeros][8-byte tail] ------------------------------------

void GptqRoundtripSeeds(SeedWriter& w) {
  auto emit = [&](int format, int bits_sel, bool bad_bits, bool unmasked, int k32, int n32, int gsel,
                  int custom, int zero_style, int dtype, int g_idx_mode, bool k_odd, std::uint32_t seed,
                  std::size_t body_size) {
    qd::harness::Rng rng(seed);
    Bytes input(body_size);
    for (auto& b : input) b = static_cast<std::uint8_t>(rng());
    input.push_back(static_cast<std::uint8_t>(format | (bits_sel << 2) | (bad_bits ? 0x40 : 0) | (unmasked ? 0x80 : 0)));
    input.push_back(static_cast<std::uint8_t>((k32 - 1) | ((n32 - 1) << 3) | (gsel << 5)));
    input.push_back(static_cast<std::uint8_t>(custom));
    input.push_back(static_cast<std::uint8_t>(zero_style | (dtype << 2) | (g_idx_mode << 4) | (k_odd ? 0x40 : 0)));
    for (int i = 0; i < 4; ++i) input.push_back(static_cast<std::uint8_t>(seed >> (8 * i)));
    // Label: the oracle packer's verdict on the same codes and zeros.
    const int bits = bad_bits ? bits_sel : format == 2 ? 2 + bits_sel % 7 : std::array<int, 4>{2, 3, 4, 8}[bits_sel % 4];
    const bool allowed = format == 2 ? bits >= 2 && bits <= 8 : (bits == 2 || bits == 3 || bits == 4 || bits == 8);
    const bool refused = !allowed || k_odd || (unmasked && body_size > 0);
    w.Write("gptq_roundtrip", refused ? "refused" : "valid", input);
  };
  std::uint32_t seed = 800;
  for (int format = 0; format < 3; ++format) {
    const int widths = format == 2 ? 7 : 4;
    for (int sel = 0; sel < widths; ++sel) {
      emit(format, sel, false, false, 1 + sel % 4, 1 + sel % 2, sel % 8, 40, sel % 4, sel % 3, sel % 3, false,
           seed++, 2048);
    }
  }
  emit(0, 1, false, false, 2, 1, 1, 0, 2, 0, 0, false, seed++, 0);    // 3-bit v1, all zeros 2^b
  emit(1, 3, false, false, 2, 2, 0, 0, 1, 1, 1, false, seed++, 0);    // v2 8-bit, all zeros 0
  emit(2, 4, false, false, 3, 1, 3, 19, 3, 2, 2, false, seed++, 512); // planar 6-bit, g20
  emit(0, 5, true, false, 1, 1, 0, 0, 0, 0, 0, false, seed++, 64);    // bits 5 as gptq: refused
  emit(2, 9, true, false, 1, 1, 0, 0, 0, 0, 0, false, seed++, 64);    // bits 9 as gptq_p: refused
  emit(1, 2, false, false, 1, 1, 0, 0, 0, 0, 0, true, seed++, 64);    // K 48: refused
  emit(0, 2, false, true, 1, 1, 0, 0, 0, 0, 0, false, seed++, 1024);  // unmasked codes: refused
}


}  // namespace qd::fuzz::seeds
