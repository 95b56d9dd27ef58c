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
#include <string>
#include <vector>

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

}  // namespace qd::cli

#endif  // QUANTDIFF_CLI_CONVERT_H_
