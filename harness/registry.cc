#include "harness/registry.h"

#include <algorithm>

#include "codecs/awq.h"
#include "codecs/bnb.h"
#include "codecs/bnb_pt_layers.h"
#include "codecs/fp8.h"
#include "codecs/gguf.h"
#include "codecs/ggml_st.h"
#include "codecs/gptq.h"
#include "codecs/model_dir.h"
#include "codecs/pt.h"
#include "codecs/rbq.h"
#include "codecs/recognised.h"
#include "codecs/safetensors.h"
#include "generators/generators.h"
#include "oracles/awq.h"
#include "oracles/bnb.h"
#include "oracles/fp8.h"
#include "oracles/model_dir.h"
#include "oracles/bnb_pt_layers.h"
#include "oracles/gguf.h"
#include "oracles/ggml_st.h"
#include "oracles/gptq.h"
#include "oracles/pt.h"
#include "oracles/rbq.h"
#include "oracles/recognised.h"
#include "oracles/safetensors.h"

namespace qd::harness {
namespace {

qd::Outcome CodecSafetensors(qd::ByteView file, const std::string& name, const SideFiles&) {
  codec::ContainerResult r = codec::ReadContainer(file, name);
  qd::Outcome outcome;
  outcome.refused = r.refused;
  outcome.findings = std::move(r.findings);
  if (!r.refused) codec::AppendFloatTensors(r.container, &outcome.tensors);
  return outcome;
}

qd::Outcome StreamSafetensors(qd::ByteView file, const std::string& name, const SideFiles&,
                              qd::TensorSink& sink) {
  codec::ContainerResult r = codec::ReadContainer(file, name);
  if (!r.refused) codec::StreamFloatTensors(r.container, sink);
  return qd::Outcome{r.refused, std::move(r.findings), {}};
}

qd::Outcome StreamRbq(qd::ByteView file, const std::string& name, const SideFiles&,
                      qd::TensorSink& sink) {
  return codec::StreamRbqFile(file, name, sink);
}

qd::Outcome StreamBnb(qd::ByteView file, const std::string& name, const SideFiles&,
                      qd::TensorSink& sink) {
  return codec::StreamBnbFile(file, name, sink);
}

qd::Outcome CodecRbq(qd::ByteView file, const std::string& name, const SideFiles&) {
  return codec::DecodeRbqFile(file, name);
}

qd::Outcome CheckSafetensors(qd::ByteView file, const std::string& name, const SideFiles&) {
  codec::ContainerResult r = codec::ReadContainer(file, name);
  return qd::Outcome{r.refused, std::move(r.findings), {}};
}

qd::Outcome CheckRbq(qd::ByteView file, const std::string& name, const SideFiles&) {
  codec::RbqResult r = codec::ReadRbq(file, name);
  return qd::Outcome{r.refused, std::move(r.findings), {}};
}

qd::Outcome CodecBnb(qd::ByteView file, const std::string& name, const SideFiles&) {
  return codec::DecodeBnbFile(file, name);
}

qd::Outcome CheckBnb(qd::ByteView file, const std::string& name, const SideFiles&) {
  codec::BnbResult r = codec::ReadBnb(file, name);
  return qd::Outcome{r.refused, std::move(r.findings), {}};
}

// docs/bnb.md "FP4 code 8", for bnb layers in either container.
std::vector<VariantFlag> Fp4Code8Variants(const codec::BnbResult& r) {
  if (r.refused || !codec::BnbUsesFp4Code8(r)) return {};
  return {{"fp4-code8-negzero",
           "FP4 code 8 decodes to +0.0 in bitsandbytes' Python table (what quantdiff and this "
           "vector follow) and to -0.0 in its CUDA and C++ CPU decoders; a reader giving -0.0 "
           "there follows that upstream path (docs/bnb.md, FP4 code 8)."}};
}

std::vector<VariantFlag> BnbVariants(qd::ByteView file) {
  return Fp4Code8Variants(codec::ReadBnb(file, ""));
}

std::vector<VariantFlag> PtVariants(qd::ByteView file) {
  return Fp4Code8Variants(codec::ReadPtLayers(file, ""));
}

// The oracles of formats that need no side files, under the registry's
// signature.
qd::Outcome OracleSafetensors(qd::ByteView file, const std::string& name, const SideFiles&) {
  return oracle::ReadSafetensors(file, name);
}

qd::Outcome OracleStreamSafetensors(qd::ByteView file, const std::string& name, const SideFiles&,
                                    qd::TensorSink& sink) {
  return oracle::StreamSafetensors(file, name, sink);
}

qd::Outcome OracleRbq(qd::ByteView file, const std::string& name, const SideFiles&) {
  return oracle::ReadRbqFile(file, name);
}

qd::Outcome OracleStreamRbq(qd::ByteView file, const std::string& name, const SideFiles&,
                            qd::TensorSink& sink) {
  return oracle::StreamRbqFile(file, name, sink);
}

qd::Outcome OracleBnb(qd::ByteView file, const std::string& name, const SideFiles&) {
  return oracle::ReadBnbFile(file, name);
}

qd::Outcome OracleStreamBnb(qd::ByteView file, const std::string& name, const SideFiles&,
                            qd::TensorSink& sink) {
  return oracle::StreamBnbFile(file, name, sink);
}

qd::Outcome CodecGptq(qd::ByteView file, const std::string& name, const SideFiles& side_files) {
  return codec::DecodeGptqFile(file, name, side_files);
}

qd::Outcome StreamGptq(qd::ByteView file, const std::string& name, const SideFiles& side_files,
                       qd::TensorSink& sink) {
  return codec::StreamGptqFile(file, name, side_files, sink);
}

qd::Outcome CheckGptq(qd::ByteView file, const std::string& name, const SideFiles& side_files) {
  codec::GptqResult r = codec::ReadGptq(file, name, side_files);
  return qd::Outcome{r.refused, std::move(r.findings), {}};
}

qd::Outcome OracleGptq(qd::ByteView file, const std::string& name, const SideFiles& side_files) {
  return oracle::ReadGptqFile(file, name, side_files);
}

qd::Outcome OracleStreamGptq(qd::ByteView file, const std::string& name,
                             const SideFiles& side_files, qd::TensorSink& sink) {
  return oracle::StreamGptqFile(file, name, side_files, sink);
}

qd::Outcome CodecPt(qd::ByteView file, const std::string& name, const SideFiles& side_files) {
  return codec::DecodePtFile(file, name, side_files);
}

qd::Outcome StreamPt(qd::ByteView file, const std::string& name, const SideFiles& side_files,
                     qd::TensorSink& sink) {
  return codec::StreamPtFile(file, name, sink, side_files);
}

qd::Outcome CheckPt(qd::ByteView file, const std::string& name, const SideFiles& side_files) {
  return codec::CheckPtFile(file, name, side_files);
}

qd::Outcome OraclePt(qd::ByteView file, const std::string& name, const SideFiles& side_files) {
  return qd::CollectStream(
      [&](qd::TensorSink& sink) { return oracle::StreamPtFile(file, name, sink, side_files); });
}

qd::Outcome OracleStreamPt(qd::ByteView file, const std::string& name, const SideFiles& side_files,
                           qd::TensorSink& sink) {
  return oracle::StreamPtFile(file, name, sink, side_files);
}

qd::Outcome CheckRecognised(qd::ByteView file, const std::string& name,
                            const SideFiles& side_files) {
  codec::RecognisedResult r = codec::ReadRecognised(file, name, side_files);
  return qd::Outcome{r.refused, std::move(r.findings), {}};
}

qd::Outcome CodecAwq(qd::ByteView file, const std::string& name, const SideFiles& side_files) {
  return codec::DecodeAwqFile(file, name, side_files);
}

qd::Outcome StreamAwq(qd::ByteView file, const std::string& name, const SideFiles& side_files,
                      qd::TensorSink& sink) {
  return codec::StreamAwqFile(file, name, side_files, sink);
}

qd::Outcome CheckAwq(qd::ByteView file, const std::string& name, const SideFiles& side_files) {
  codec::AwqResult r = codec::ReadAwq(file, name, side_files);
  return qd::Outcome{r.refused, std::move(r.findings), {}};
}

qd::Outcome OracleAwq(qd::ByteView file, const std::string& name, const SideFiles& side_files) {
  return oracle::ReadAwqFile(file, name, side_files);
}

qd::Outcome OracleStreamAwq(qd::ByteView file, const std::string& name,
                            const SideFiles& side_files, qd::TensorSink& sink) {
  return oracle::StreamAwqFile(file, name, side_files, sink);
}

qd::Outcome CheckFp8(qd::ByteView file, const std::string& name, const SideFiles& side_files) {
  codec::Fp8Result r = codec::ReadFp8(file, name, side_files);
  return qd::Outcome{r.refused, std::move(r.findings), {}};
}

qd::Outcome CodecGguf(qd::ByteView file, const std::string& name, const SideFiles&) {
  return codec::DecodeGgufFile(file, name);
}

qd::Outcome StreamGguf(qd::ByteView file, const std::string& name, const SideFiles&,
                       qd::TensorSink& sink) {
  return codec::StreamGgufFile(file, name, sink);
}

qd::Outcome CheckGguf(qd::ByteView file, const std::string& name, const SideFiles&) {
  codec::GgufResult r = codec::ReadGguf(file, name);
  return qd::Outcome{r.refused, std::move(r.findings), {}};
}

qd::Outcome OracleGguf(qd::ByteView file, const std::string& name, const SideFiles&) {
  return oracle::ReadGgufFile(file, name);
}

qd::Outcome OracleStreamGguf(qd::ByteView file, const std::string& name, const SideFiles&,
                             qd::TensorSink& sink) {
  return oracle::StreamGgufFile(file, name, sink);
}

qd::Outcome CodecGgmlSt(qd::ByteView file, const std::string& name, const SideFiles& side_files) {
  return codec::DecodeGgmlStFile(file, name, side_files);
}

qd::Outcome StreamGgmlSt(qd::ByteView file, const std::string& name, const SideFiles& side_files,
                         qd::TensorSink& sink) {
  return codec::StreamGgmlStFile(file, name, side_files, sink);
}

qd::Outcome CheckGgmlSt(qd::ByteView file, const std::string& name, const SideFiles& side_files) {
  codec::GgmlStResult r = codec::ReadGgmlSt(file, name, side_files);
  return qd::Outcome{r.refused, std::move(r.findings), {}};
}

// The claims that look at bytes alone, and the bitsandbytes one, which asks
// the shared reading's table.
bool ClaimsGguf(const codec::ClaimInput& input) { return codec::ClaimsGguf(input.file()); }
bool ClaimsPt(const codec::ClaimInput& input) { return codec::ClaimsPt(input.file()); }
bool ClaimsBnb(const codec::ClaimInput& input) {
  const codec::TensorTable* table = input.Get();
  return table != nullptr && codec::HasBnbLayer(*table);
}
bool OracleClaimsGguf(const oracle::ClaimInput& input) { return oracle::IsGgufFile(input.file()); }
bool OracleClaimsPt(const oracle::ClaimInput& input) { return oracle::IsPtFile(input.file()); }

bool ClaimsAny(const codec::ClaimInput&, const SideFiles&) { return true; }
bool OracleClaimsAny(const oracle::ClaimInput&, const SideFiles&) { return true; }

// A detection that reads the file alone, under the registry's signature:
// every format's but the recognised one (README "Which format a file is").
template <typename Input, bool (*kClaims)(const Input&)>
bool FromFileAlone(const Input& input, const SideFiles&) {
  return kClaims(input);
}
template <bool (*kClaims)(const codec::ClaimInput&)>
constexpr auto kCodecAlone = &FromFileAlone<codec::ClaimInput, kClaims>;
template <bool (*kClaims)(const oracle::ClaimInput&)>
constexpr auto kOracleAlone = &FromFileAlone<oracle::ClaimInput, kClaims>;

}  // namespace

const std::vector<FormatEntry>& Formats() {
  static const std::vector<FormatEntry> formats = {
      // Its own container, claimed by its magic "GGUF" alone (docs/gguf.md
      // section 5): first, so no safetensors format looks at it.
      {.name = "gguf",
       .rule_prefixes = {"GGUF-"},
       .summary = "native .gguf files, versions 2 and 3 (issue 12, docs/gguf.md)",
       .codec_read = &CodecGguf,
       .codec_stream = &StreamGguf,
       .codec_check = &CheckGguf,
       .oracle_read = &OracleGguf,
       .oracle_stream = &OracleStreamGguf,
       .claims = kCodecAlone<&ClaimsGguf>,
       .oracle_claims = kOracleAlone<&OracleClaimsGguf>,
       .generate_valid = &gen::GgufValid,
       .violable_rules = &gen::GgufViolableRules,
       .generate_violation = &gen::GgufViolation,
       .file_extension = ".gguf"},
      {.name = "rbq",
       .rule_prefixes = {"RBQ-"},
       .summary = "rabbit-infer Q4B32 / Q8B32 block formats (spec 002)",
       .codec_read = &CodecRbq,
       .codec_stream = &StreamRbq,
       .codec_check = &CheckRbq,
       .oracle_read = &OracleRbq,
       .oracle_stream = &OracleStreamRbq,
       .claims = kCodecAlone<&codec::ClaimsRbq>,
       .oracle_claims = kOracleAlone<&oracle::IsRbqFile>,
       .generate_valid = &gen::RbqValid,
       .violable_rules = &gen::RbqViolableRules,
       .generate_violation = &gen::RbqViolation},
      {.name = "bnb",
       .rule_prefixes = {"BNB-"},
       .summary = "bitsandbytes 4-bit NF4/FP4, 8-bit blockwise, int8 row-scaled (spec 000)",
       .codec_read = &CodecBnb,
       .codec_stream = &StreamBnb,
       .codec_check = &CheckBnb,
       .oracle_read = &OracleBnb,
       .oracle_stream = &OracleStreamBnb,
       .claims = kCodecAlone<&ClaimsBnb>,
       .oracle_claims = kOracleAlone<&oracle::IsBnbFile>,
       .generate_valid = &gen::BnbValid,
       .violable_rules = &gen::BnbViolableRules,
       .generate_violation = &gen::BnbViolation,
       .variants = &BnbVariants},
      // Before AWQ and GPTQ: a ParoQuant layer also holds qweight/qzeros/scales,
      // and a BitBLAS layer GPTQ's names under a config labelled bitblas
      // (docs/recognised.md section 2, Detection).
      {.name = "recognised",
       .rule_prefixes = {"REC-"},
       .summary = "EXL3, VPTQ, QQQ, ParoQuant, BitBLAS: recognised and checked, not decoded (spec 004, docs/recognised.md)",
       .codec_read = &codec::DecodeRecognisedFile,
       .codec_stream = &codec::StreamRecognisedFile,
       .codec_check = &CheckRecognised,
       .oracle_read = &oracle::ReadRecognisedFile,
       .oracle_stream = &oracle::StreamRecognisedFile,
       .claims = &codec::ClaimsRecognised,
       .oracle_claims = &oracle::IsRecognisedFile,
       .generate_valid = &gen::RecognisedValid,
       .violable_rules = &gen::RecognisedViolableRules,
       .generate_violation = &gen::RecognisedViolation,
       .decode_refusal = &codec::RecognisedDecodeRefusal},
      // Before AWQ and GPTQ, which name their layers alike: a U8 qweight with
      // no qzeros / scales / g_idx is GPT-QModel's GGUF linear
      // (docs/ggml_safetensors.md section 3).
      {.name = "ggml_st",
       .rule_prefixes = {"GGST-"},
       .summary = "GGUF-family safetensors: ggml blocks in a U8 qweight, GPT-QModel's GGUF linear, and ggml's block vectors (spec 004, docs/ggml_safetensors.md)",
       .codec_read = &CodecGgmlSt,
       .codec_stream = &StreamGgmlSt,
       .codec_check = &CheckGgmlSt,
       .oracle_read = &oracle::ReadGgmlStFile,
       .oracle_stream = &oracle::StreamGgmlStFile,
       .claims = kCodecAlone<&codec::ClaimsGgmlSt>,
       .oracle_claims = kOracleAlone<&oracle::IsGgmlStFile>,
       .generate_valid = &gen::GgmlStValid,
       .violable_rules = &gen::GgmlStViolableRules,
       .generate_violation = &gen::GgmlStViolation,
       .hosted_prefixes = {"CFG-"},
       .fixed_instances = &gen::GgmlStFixedInstances},
      // Before gptq: both name layers P.qweight / P.qzeros / P.scales; an
      // AWQ layer has no g_idx and not GPTQ's shape pair (docs/awq.md 2).
      {.name = "awq",
       .rule_prefixes = {"AWQ-"},
       .summary = "AWQ GEMM / GEMV / GEMV_FAST with AutoAWQ or GPT-QModel configs (spec 004, docs/awq.md)",
       .codec_read = &CodecAwq,
       .codec_stream = &StreamAwq,
       .codec_check = &CheckAwq,
       .oracle_read = &OracleAwq,
       .oracle_stream = &OracleStreamAwq,
       .claims = kCodecAlone<&codec::ClaimsAwq>,
       .oracle_claims = kOracleAlone<&oracle::IsAwqFile>,
       .generate_valid = &gen::AwqValid,
       .violable_rules = &gen::AwqViolableRules,
       .generate_violation = &gen::AwqViolation,
       .hosted_prefixes = {"CFG-"}},
      {.name = "gptq",
       .rule_prefixes = {"GPTQ-", "CFG-"},
       .summary = "GPTQ v1 / v2 continuous pack and planar GPTQ_P with quantize configs (specs 001, 004)",
       .codec_read = &CodecGptq,
       .codec_stream = &StreamGptq,
       .codec_check = &CheckGptq,
       .oracle_read = &OracleGptq,
       .oracle_stream = &OracleStreamGptq,
       .claims = kCodecAlone<&codec::ClaimsGptq>,
       .oracle_claims = kOracleAlone<&oracle::IsGptqFile>,
       .generate_valid = &gen::GptqValid,
       .violable_rules = &gen::GptqViolableRules,
       .generate_violation = &gen::GptqViolation},
      // After gptq: an FP8 layer is P.weight + P.weight_scale_inv, no
      // qweight, so no earlier format claims it (docs/fp8.md section 2).
      {.name = "fp8",
       .rule_prefixes = {"FP8-"},
       .summary = "FP8 weights (E4M3 / E5M2, fnuz, E8M0) with F32 inverse scales per tensor, row or block (spec 004, docs/fp8.md)",
       .codec_read = &codec::DecodeFp8File,
       .codec_stream = &codec::StreamFp8File,
       .codec_check = &CheckFp8,
       .oracle_read = &oracle::ReadFp8File,
       .oracle_stream = &oracle::StreamFp8File,
       .claims = kCodecAlone<&codec::ClaimsFp8>,
       .oracle_claims = kOracleAlone<&oracle::IsFp8File>,
       .generate_valid = &gen::Fp8Valid,
       .violable_rules = &gen::Fp8ViolableRules,
       .generate_violation = &gen::Fp8Violation,
       .hosted_prefixes = {"CFG-"}},  // CFG-010 across its config sources (docs/fp8.md 3)
      // Its own container (a ZIP or a legacy pickle, never a safetensors
      // header): after the safetensors formats, whose claims need a header.
      {.name = "pt",
       .rule_prefixes = {"PT-"},
       .summary = "torch .pt/.bin (torch.save zip, allow-listed pickle subset), docs/pt.md",
       .codec_read = &CodecPt,
       .codec_stream = &StreamPt,
       .codec_check = &CheckPt,
       .oracle_read = &OraclePt,
       .oracle_stream = &OracleStreamPt,
       .claims = kCodecAlone<&ClaimsPt>,
       .oracle_claims = kOracleAlone<&OracleClaimsPt>,
       .generate_valid = &gen::PtValid,
       .violable_rules = &gen::PtViolableRules,
       .generate_violation = &gen::PtViolation,
       .variants = &PtVariants,
       .file_extension = ".pt",
       .hosted_prefixes = {"BNB-"}},
      {.name = "safetensors",
       .rule_prefixes = {"ST-"},
       .summary = "safetensors container",
       .codec_read = &CodecSafetensors,
       .codec_stream = &StreamSafetensors,
       .codec_check = &CheckSafetensors,
       .oracle_read = &OracleSafetensors,
       .oracle_stream = &OracleStreamSafetensors,
       .claims = &ClaimsAny,
       .oracle_claims = &OracleClaimsAny,
       .generate_valid = &gen::SafetensorsValid,
       .violable_rules = &gen::SafetensorsViolableRules,
       .generate_violation = &gen::SafetensorsViolation},
  };
  return formats;
}

namespace {
bool StartsWithAny(const std::vector<std::string_view>& prefixes, std::string_view rule_id) {
  return std::any_of(prefixes.begin(), prefixes.end(), [&](std::string_view prefix) {
    return rule_id.substr(0, prefix.size()) == prefix;
  });
}
}  // namespace

bool DirFormatEntry::OwnsRule(std::string_view rule_id) const {
  return StartsWithAny(rule_prefixes, rule_id);
}

namespace {
qd::Outcome CodecModelDir(const qd::ModelDirListing& listing) {
  return codec::DecodeModelDir(listing);
}
qd::Outcome OracleModelDir(const qd::ModelDirListing& listing) {
  return oracle::ReadModelDir(listing);
}
}  // namespace

const DirFormatEntry& ModelDirFormat() {
  static const DirFormatEntry entry = {
      .name = "model_dir",
      .rule_prefixes = {"IDX-"},
      .summary = "model directories: weight set, sharded index, merged tensor table (docs/model_dir.md)",
      .codec_read = &CodecModelDir,
      .oracle_read = &OracleModelDir,
      .generate_valid = &gen::ModelDirValid,
      .violable_rules = &gen::ModelDirViolableRules,
      .generate_violation = &gen::ModelDirViolation,
  };
  return entry;
}

bool FormatEntry::OwnsRule(std::string_view rule_id) const {
  return StartsWithAny(rule_prefixes, rule_id);
}

bool FormatEntry::ReachesRule(std::string_view rule_id) const {
  return StartsWithAny(rule_prefixes, rule_id) || StartsWithAny(hosted_prefixes, rule_id);
}

const FormatEntry* FindFormat(std::string_view name) {
  for (const FormatEntry& f : Formats()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

namespace {
// Formats() in order, every claim asked of one INPUT; the container format
// when none claims the file.
template <typename Input>
const FormatEntry& FirstClaiming(bool (*FormatEntry::*claims)(const Input&, const SideFiles&),
                                 qd::ByteView file, const SideFiles& side_files) {
  const Input input(file);
  for (const FormatEntry& f : Formats()) {
    if ((f.*claims)(input, side_files)) return f;
  }
  return Formats().back();
}
}  // namespace

const FormatEntry& DetectFormat(qd::ByteView file, const SideFiles& side_files) {
  return FirstClaiming(&FormatEntry::claims, file, side_files);
}

const FormatEntry& OracleDetectFormat(qd::ByteView file, const SideFiles& side_files) {
  return FirstClaiming(&FormatEntry::oracle_claims, file, side_files);
}

}  // namespace qd::harness
