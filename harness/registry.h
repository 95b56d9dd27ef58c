// registry.h: the one list of formats that every front end enumerates.
//
// The CLI, the fuzz targets, the property tests, the campaign and the reports
// all find formats here, so adding a format is one file per concern
// (codecs/, oracles/, generators/) plus one entry in registry.cc.
//
//   for (const qd::harness::FormatEntry& f : qd::harness::Formats()) {
//     qd::Outcome fast = f.codec_read(bytes, name);
//     qd::Outcome truth = f.oracle_read(bytes, name);
//   }
#ifndef QUANTDIFF_HARNESS_REGISTRY_H_
#define QUANTDIFF_HARNESS_REGISTRY_H_

#include <string>
#include <string_view>
#include <vector>

#include "quantdiff/tensor_sink.h"
#include "codecs/claim_input.h"
#include "generators/generated.h"
#include "oracles/claim_input.h"
#include "quantdiff/plain_data.h"

namespace qd::harness {

// The generators' instance and random source (generators/generated.h), by
// the names every front end uses.
using Rng = gen::Rng;
using Generated = gen::Generated;
using SideFiles = std::vector<qd::SideFile>;

// A documented upstream variant that applies to a file: another output a
// reader may give without being wrong (exported as a flag in the vectors).
struct VariantFlag {
  std::string flag;  // e.g. "fp4-code8-negzero"
  std::string note;
};

struct FormatEntry {
  std::string_view name;         // "safetensors", "rbq"
  // The rule-ID prefixes this format owns: {"ST-"}, {"GPTQ-", "CFG-"}.
  std::vector<std::string_view> rule_prefixes;
  std::string_view summary;
  // Both readers take the whole file and the side files that come with it
  // (docs/gptq.md, config discovery; formats that need none ignore them) and
  // return findings + decoded tensors.
  qd::Outcome (*codec_read)(qd::ByteView file, const std::string& file_name,
                            const SideFiles& side_files);
  // codec_read's tensors handed to a sink one at a time (announced first):
  // what `decode` runs, so it holds one decoded tensor, not the file.
  qd::Outcome (*codec_stream)(qd::ByteView file, const std::string& file_name,
                              const SideFiles& side_files, qd::TensorSink& sink);
  // The codec's rules alone, decoding nothing: what `check` runs, so a file
  // larger than memory is checked through its mapping.
  qd::Outcome (*codec_check)(qd::ByteView file, const std::string& file_name,
                             const SideFiles& side_files);
  qd::Outcome (*oracle_read)(qd::ByteView file, const std::string& file_name,
                             const SideFiles& side_files);
  // oracle_read's tensors handed over chunk by chunk (announced first): what
  // `diff` compares with codec_stream as the values come (stream_differ.h).
  qd::Outcome (*oracle_stream)(qd::ByteView file, const std::string& file_name,
                               const SideFiles& side_files, qd::TensorSink& sink);
  // True when this format's rules apply to the file (codec-side detection).
  // One ClaimInput is asked of every format in turn, so the container is
  // read once per detection (codecs/claim_input.h). The side files are the
  // config sources the readers get: only the recognised format reads them (a
  // BitBLAS checkpoint carries GPTQ's names and is told apart by its
  // config's label alone, docs/recognised.md 2).
  bool (*claims)(const codec::ClaimInput& input, const SideFiles& side_files);
  // The same question answered by the oracle alone, from the contract's
  // Detection rules (README "Which format a file is"); DetectFormat and
  // OracleDetectFormat must name the same format (CompareDetection).
  bool (*oracle_claims)(const oracle::ClaimInput& input, const SideFiles& side_files);
  Generated (*generate_valid)(Rng& rng);
  // Rules the generator can violate on purpose, each reachable below.
  std::vector<std::string> (*violable_rules)();
  Generated (*generate_violation)(std::string_view rule, Rng& rng);
  // Variants that apply to an accepted file; null when the format has none.
  std::vector<VariantFlag> (*variants)(qd::ByteView file) = nullptr;
  // How the format's files are named when quantdiff writes them (vectors,
  // saved campaign instances).
  std::string_view file_extension = ".safetensors";
  // Prefixes of rules another format owns whose readers also run inside this
  // format's ({"BNB-"} for pt: the bitsandbytes readers on a .pt tensor
  // table, docs/pt.md 6.4), so its generator may list them in violable_rules().
  // The catalogue's family stays the owner.
  std::vector<std::string_view> hosted_prefixes = {};
  // Set for a format quantdiff recognises and checks but does not decode
  // (docs/recognised.md): what `decode` reports instead of writing, the
  // check's findings and, for an accepted file, the refusal REC-001.
  qd::Outcome (*decode_refusal)(qd::ByteView file, const std::string& file_name,
                                const SideFiles& side_files) = nullptr;
  // Instances `export-vectors` and the fuzz seeds hold besides the drawn
  // ones, each in the group of its expected_rule: cases a few draws would
  // miss. Null when the format has none.
  std::vector<Generated> (*fixed_instances)() = nullptr;

  // True when rule_id starts with one of rule_prefixes.
  bool OwnsRule(std::string_view rule_id) const;
  // True when rule_id starts with one of rule_prefixes or hosted_prefixes:
  // a rule this format's files can break.
  bool ReachesRule(std::string_view rule_id) const;
};

// A model directory (docs/model_dir.md): one input made of several files,
// read by each side's directory reader over the same listing. It owns the
// IDX- rules; the formats of the tensors inside stay the file formats'.
struct DirFormatEntry {
  std::string_view name;  // "model_dir": the rules' family
  std::vector<std::string_view> rule_prefixes;
  std::string_view summary;
  qd::Outcome (*codec_read)(const qd::ModelDirListing& listing);
  qd::Outcome (*oracle_read)(const qd::ModelDirListing& listing);
  gen::GeneratedDir (*generate_valid)(Rng& rng);
  std::vector<std::string> (*violable_rules)();
  gen::GeneratedDir (*generate_violation)(std::string_view rule, Rng& rng);

  bool OwnsRule(std::string_view rule_id) const;
};
const DirFormatEntry& ModelDirFormat();

// Most specific first; "safetensors" (the container alone) is last.
const std::vector<FormatEntry>& Formats();
const FormatEntry* FindFormat(std::string_view name);
// The first format that claims the file with its config sources SIDE_FILES
// (the ones its readers get); the container format otherwise. What decides
// which readers run (`check`, `decode`, `diff`).
const FormatEntry& DetectFormat(qd::ByteView file, const SideFiles& side_files);
// The same walk over oracle_claims: the oracle's own detection, which `diff`,
// the campaign, the fuzz targets and the properties compare with
// DetectFormat's (qd::harness::CompareDetection).
const FormatEntry& OracleDetectFormat(qd::ByteView file, const SideFiles& side_files);

}  // namespace qd::harness

#endif  // QUANTDIFF_HARNESS_REGISTRY_H_
