// convert_dir.h: `quantdiff convert DIR --to safetensors --out OUTDIR`, a
// torch model directory (pytorch_model.bin, or pytorch_model.bin.index.json
// and its shards) as a new safetensors model directory (issue 10 item 4;
// docs/model_dir.md section 7): every shard converted as `convert IN.bin`
// converts one file (docs/pt.md 13), the index rewritten, the configs copied.
//
//   return qd::cli::RunConvertDir("models/llama-bin", "models/llama-st");
#ifndef QUANTDIFF_CLI_CONVERT_DIR_H_
#define QUANTDIFF_CLI_CONVERT_DIR_H_

#include <cstddef>
#include <string>

namespace qd::cli {

// The name of output shard RANK (0-based) of COUNT: "model.safetensors" for
// one, else Hugging Face's "model-00001-of-00003.safetensors".
std::string SafetensorsShardName(std::size_t rank, std::size_t count);

// The name config NAME of a torch weight set gets beside the safetensors
// set: "<stem>.quantize_config.json" follows the new stem ("model"), every
// other config keeps its name (docs/model_dir.md section 2).
std::string ConvertedConfigName(const std::string& name);

// The verb for a directory: 0 OUTDIR created, 1 DIR refused or an output
// `check OUTDIR` would refuse (the findings printed, nothing left), 2 usage
// or I/O error (OUTDIR exists, DIR unreadable, not a torch weight set).
int RunConvertDir(const std::string& dir, const std::string& out);

}  // namespace qd::cli

#endif  // QUANTDIFF_CLI_CONVERT_DIR_H_
