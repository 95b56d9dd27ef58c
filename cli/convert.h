// convert.h: the core of `quantdiff convert`, apart from its flags and
// files, so the property tests hold it to "what quantdiff writes, it
// accepts" (issue 9 section 2) on every generated GPTQ file.
//
//   qd::cli::GptqConversion c;
//   int verdict = qd::cli::ConvertGptq(bytes, path, side_files, target, out,
//                                      beside_out, &c, &error);
#ifndef QUANTDIFF_CLI_CONVERT_H_
#define QUANTDIFF_CLI_CONVERT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codecs/awq.h"
#include "codecs/gptq.h"
#include "harness/registry.h"
#include "quantdiff/plain_data.h"

namespace qd::cli {

// Why ConvertGptq wrote nothing (exit 1).
enum class ConvertRefusal {
  kNone,
  kInputRefused,      // the gptq codec refuses the input, or it has no layer
  kTargetCannotHold,  // a zero point or width the target format cannot hold
  kCheckRefuses,      // `check OUT` would refuse the output with its configs
  kOracleDiffers,     // the oracle refuses the output or decodes it otherwise
};

struct GptqConversion {
  ConvertRefusal refusal = ConvertRefusal::kNone;
  std::vector<std::uint8_t> file;  // OUT's bytes
  std::string config_path;         // OUT-STEM.quantize_config.json
  std::string config_text;         // the config written there
  std::string from;                // the input's GPTQ format name
  std::size_t layers = 0;
};

// The side files `check OUT` will find once PENDING are written beside OUT
// (the CLI asks the disk: SideFilesAfterWriting; a test gives PENDING alone).
using SideFilesBesideOut = std::function<bool(const qd::harness::SideFiles& pending,
                                              qd::harness::SideFiles* found, std::string* error)>;

// Repacks every GPTQ layer of BYTES (docs/gptq.md section 9) for OUT and
// verifies the result as `check OUT` and the oracle will read it. 0 with
// *result; 1 with the reason printed on standard error (input refused, a
// zero point or width the target cannot hold, an output check refuses or
// the oracle decodes differently); 2 with *error.
int ConvertGptq(qd::ByteView bytes, const std::string& path, const qd::harness::SideFiles& side_files,
                qd::codec::GptqFormat target, const std::string& out,
                const SideFilesBesideOut& beside_out, GptqConversion* result, std::string* error);

// ---- Across GPTQ and AWQ (cli/convert_awq.cc, docs/awq.md section 11) ------

// A --to name: "gptq", "gptq_v2", "gptq_p", "awq_gemm", "awq_gemv".
struct ConvertTarget {
  bool awq = false;
  qd::codec::GptqFormat gptq = qd::codec::GptqFormat::kV1;
  qd::codec::AwqFormat awq_format = qd::codec::AwqFormat::kGemm;
};
bool ParseConvertTarget(const std::string& name, ConvertTarget* out);
const char* ConvertTargetName(const ConvertTarget& target);

// Repacks every layer of BYTES, a GPTQ or an AWQ file (docs/awq.md section
// 2 decides which), for TARGET: GptqConvert within GPTQ, else through
// QuantFields (docs/awq.md section 11). Verdicts as ConvertGptq; a zero
// point, group map or geometry the target cannot hold is printed with its
// layer, row and element and its rule (AWQ-201..203).
int ConvertQuantized(qd::ByteView bytes, const std::string& path,
                     const qd::harness::SideFiles& side_files, const ConvertTarget& target,
                     const std::string& out, const SideFilesBesideOut& beside_out,
                     GptqConversion* result, std::string* error);

// ---- The pieces every quantized conversion shares (cli/convert.cc) --------

// OUT without ".safetensors", + ".quantize_config.json": the first name
// config discovery tries beside OUT.
std::string ConfigPathFor(const std::string& out);

// The source of a conversion and the registry family that reads it.
struct ConvertSource {
  qd::ByteView bytes;
  const std::string& path;
  const qd::harness::SideFiles& side_files;
  const char* family;  // "gptq" or "awq"
};

// The side file named SOURCE (a reader's winning config), or null.
const qd::SideFile* WinningSource(const qd::harness::SideFiles& side_files, const std::string& source);

// WINNER's config object with its method keys naming METHOD, its format keys
// naming FORMAT (format and checkpoint_format added when none is present)
// and pack_dtype int32, as JSON text.
std::string ConvertedConfig(const qd::SideFile& winner, const char* method, const char* format);

// One input tensor in the output: dropped, or with new bytes and/or shape
// (dtype kept), and followed by new tensors.
struct TensorEdit {
  bool drop = false;
  std::optional<std::vector<std::uint8_t>> bytes;
  std::optional<std::vector<std::int64_t>> shape;
  std::vector<qd::codec::TensorWithBytes> after;
};
// CONTAINER with EDITS (one per tensor) applied, its metadata kept except
// gptq_checkpoint_format: set to CHECKPOINT_FORMAT, dropped when that is null.
std::vector<std::uint8_t> RewrittenFile(const qd::codec::Container& container,
                                        std::vector<TensorEdit> edits, const char* checkpoint_format);

// CONVERTED and CONFIG_TEXT into *result when `check OUT` accepts them with
// the configs it will find beside OUT and TARGET_FAMILY's oracle decodes OUT
// to the same bits as SOURCE's oracle decodes SOURCE; else 1 (printed) or 2.
int KeepIfFaithful(const ConvertSource& source, const char* target_family,
                   std::vector<std::uint8_t> converted, const std::string& config_text,
                   const std::string& out, const SideFilesBesideOut& beside_out,
                   GptqConversion* result, std::string* error);

}  // namespace qd::cli

#endif  // QUANTDIFF_CLI_CONVERT_H_
