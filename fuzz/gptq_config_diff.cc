// gptq_config_diff: the config half of docs/gptq.md (sections 1 and 3,
// C1..C11) on a fixed valid layer file.
//
// Input: [u8 h0][u8 h1][u16 length of source 1][source 1][source 2]
//   h0 bits 0..2  name of source 1, bits 3..5 name of source 2 (both from
//                 kGptqSourceNames: quantize_config.json, quant_config.json,
//                 config.json (read nested), <stem>.quantize_config.json,
//                 dir/quantize_config.json, model/config.json, ...)
//         bit 6   a second source (the bytes after source 1)
//         bit 7   no source at all (CFG-003)
//   h1 bits 0..1  the fixed file: v1 4-bit g32 K64 N32 (sorted g_idx);
//                 v2 3-bit g-1 K96 N64 (act-order); planar 5-bit g48 K64 N32
//                 (two layers); v1 8-bit g128 K128 N32 with bias
// Both readers (the registry's gptq codec_read and oracle_read) must agree
// (qd::harness::Compare), and codec_check must report codec_read's findings.
//
// Signature on divergence: DIFF:gptq_config:<kind>:<rule-or-part>.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/common/fuzz_support.h"
#include "fuzz/common/gptq_file_input.h"
#include "harness/differ.h"
#include "harness/registry.h"


extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const qd::harness::FormatEntry* const format = [] {
    const qd::harness::FormatEntry* f = qd::harness::FindFormat("gptq");
    if (f == nullptr) qd::fuzz::Diverge("DIFF:gptq_config:setup:no-format", "");
    return f;
  }();
  const std::uint8_t h0 = size > 0 ? data[0] : 0;
  const std::uint8_t h1 = size > 1 ? data[1] : 0;
  std::size_t at = std::min<std::size_t>(size, 2);
  std::size_t len1 = 0;
  if (size >= 4) {
    len1 = data[2] | (data[3] << 8);
    at = 4;
  }
  len1 = std::min(len1, size - at);
  const auto& names = qd::fuzz::kGptqSourceNames;
  std::vector<qd::SideFile> configs;
  if ((h0 & 0x80) == 0) {
    configs.push_back({std::string(names[(h0 & 7) % names.size()]),
                       std::vector<std::uint8_t>(data + at, data + at + len1)});
    if (h0 & 0x40) {
      configs.push_back({std::string(names[((h0 >> 3) & 7) % names.size()]),
                         std::vector<std::uint8_t>(data + at + len1, data + size)});
    }
  }
  const std::vector<std::uint8_t>& bytes = qd::fuzz::GptqConfigDiffFile(h1 & 3);
  const qd::ByteView file{bytes.data(), bytes.size()};
  const std::string name = "dir/model.safetensors";
  const qd::Outcome codec = format->codec_read(file, name, configs);
  const qd::Outcome oracle = format->oracle_read(file, name, configs);
  if (std::optional<qd::harness::Divergence> d = qd::harness::Compare(codec, oracle, "gptq_config")) {
    qd::fuzz::Diverge(d->signature, d->detail);
  }
  const qd::Outcome check = format->codec_check(file, name, configs);
  if (check.refused != codec.refused || check.findings.size() != codec.findings.size()) {
    qd::fuzz::Diverge("DIFF:gptq_config:check:" + std::string(codec.refused ? "refused" : "accepted"),
                      "codec_check " + std::to_string(check.findings.size()) +
                          " findings, codec_read " + std::to_string(codec.findings.size()));
  }
  for (std::size_t i = 0; i < check.findings.size(); ++i) {
    if (check.findings[i].rule != codec.findings[i].rule ||
        check.findings[i].field != codec.findings[i].field ||
        check.findings[i].file != codec.findings[i].file) {
      qd::fuzz::Diverge("DIFF:gptq_config:check:" + codec.findings[i].rule,
                        "finding " + std::to_string(i) + ": codec_check " +
                            qd::harness::Describe(check.findings[i]) + " | codec_read " +
                            qd::harness::Describe(codec.findings[i]));
    }
  }
  return 0;
}
