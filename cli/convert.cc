// quantdiff convert: repack a GPTQ file into another GPTQ format (v1 <-> v2,
// continuous <-> planar), checked by the oracle before anything is kept; or
// a torch .pt/.bin file to safetensors (cli/convert_pt.cc).
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/convert.h"
#include "cli/convert_dir.h"
#include "cli/convert_pt.h"
#include "cli/model_dir_input.h"

#include "cli/common.h"
#include "cli/decoded_output.h"
#include "codecs/gptq.h"
#include "codecs/mapped_file.h"
#include "codecs/safetensors.h"
#include "harness/differ.h"
#include "reports/escape.h"
#include "reports/writers.h"

namespace qd::cli {

extern const std::string_view kConvertHelp =
    "usage: quantdiff convert FILE --to FORMAT --out OUT.safetensors [--config CONFIG.json]\n"
    "       quantdiff convert IN.pt|IN.bin --to safetensors --out OUT.safetensors\n"
    "       quantdiff convert DIR --to safetensors --out OUTDIR\n"
    "\n"
    "--to safetensors: the safe way out of pickle (docs/pt.md section 13). IN, a\n"
    "torch.save file, is read by the .pt reader, which executes nothing; a file\n"
    "it refuses (PT- and BNB- rules) is refused. Every tensor of its state dict\n"
    "is written verbatim: same name, dtype, shape and bytes, in C order (views\n"
    "and big-endian files materialised). Every other entry becomes a\n"
    "__metadata__ string: a str as its text, an int in decimal, a float as its\n"
    "shortest round-trip decimal (2.0, 1e-05, inf, nan), a bool as true/false,\n"
    "a tuple, list or torch.Size of these as a JSON array ([40, 30]). An entry\n"
    "of any other kind (None, a tensor inside a list, ...) is ST-006, a name\n"
    "a safetensors header cannot hold is ST-004/005/006: refused, nothing\n"
    "written. The OrderedDict's _metadata attribute is not an entry (dropped).\n"
    "OUT is checked as `quantdiff check OUT` will read it before it is kept;\n"
    "GPTQ tensor names with no quantize config beside OUT are checked as the\n"
    "container (a note says so: check OUT then needs the config).\n"
    "\n"
    "A DIR is a torch model directory (docs/model_dir.md section 7):\n"
    "pytorch_model.bin, or pytorch_model.bin.index.json and its shards. DIR is\n"
    "read as `quantdiff check DIR` reads it, and a refusal writes nothing. Each\n"
    "shard becomes a safetensors shard as above, model.safetensors for one file,\n"
    "else model-0000k-of-0000n.safetensors in shard order with\n"
    "model.safetensors.index.json (weight_map, and metadata.total_size counting\n"
    "the tensors' bytes, Hugging Face's convention). The configs the directory\n"
    "rules read are copied (config.json, quantize_config.json, quant_config.json;\n"
    "pytorch_model.quantize_config.json as model.quantize_config.json); nothing\n"
    "else is (tokenizer and generation files: copy them yourself). OUTDIR must\n"
    "not exist: it is built in a new temporary directory beside it, checked as\n"
    "`quantdiff check OUTDIR` will read it (no note here: the configs are in\n"
    "it), and renamed into place only then; any refusal or failure leaves\n"
    "nothing behind.\n"
    "\n"
    "Otherwise repacks every layer of FILE, a GPTQ or an AWQ file, into FORMAT\n"
    "(docs/gptq.md section 9 within GPTQ, docs/awq.md section 11 across):\n"
    "  gptq      GPTQ v1 continuous pack, zero points stored minus one\n"
    "  gptq_v2   GPTQ continuous pack, true zero points\n"
    "  gptq_p    GPTQ planar bit planes, true zero points\n"
    "  awq_gemm  AWQ GEMM (4-bit; from GPTQ only with g_idx = k / group_size)\n"
    "  awq_gemv  AWQ GEMV (4-bit; padded group slots)\n"
    "and writes OUT plus OUT's config, STEM.quantize_config.json beside it (the\n"
    "input's winning config with its method and format keys set to FORMAT), where\n"
    "check, diff and decode find it. Every other tensor and the metadata are\n"
    "copied unchanged (a gptq_checkpoint_format metadata entry is set to a GPTQ\n"
    "FORMAT, dropped for AWQ). AWQ GEMV_FAST is not converted (AWQ-203).\n"
    "\n"
    "A zero point the target cannot hold is reported with its qzeros row and\n"
    "element, never wrapped: across GPTQ and AWQ as rule AWQ-201 (an act-order\n"
    "g_idx is AWQ-202, a width or shape AWQ-203). Within GPTQ: a v1 zero\n"
    "field of 2^bits-1 (zero 2^bits, warning GPTQ-107) has no v2 or planar form\n"
    "(overflow), a true zero 0 has no v1 form (underflow); 5, 6 and 7 bits exist\n"
    "only planar. Before OUT is kept the reference oracle reads it and must\n"
    "decode every weight to the same bits as FILE, and `quantdiff check OUT`\n"
    "must accept it as it will find it: with every config beside OUT (a folder's\n"
    "quantize_config.json that disagrees with the new one is CFG-010, so such a\n"
    "folder is refused, not left with a file that fails). Otherwise nothing is\n"
    "kept. OUT and its config are written to new temporary files and renamed\n"
    "into place; they may not be an input or an existing non-regular file.\n"
    "\n"
    "  --to FORMAT    gptq, gptq_v2, gptq_p, awq_gemm, awq_gemv or safetensors\n"
    "                 (required)\n"
    "  --out FILE     the safetensors file to write (required); for a DIR, the\n"
    "                 new directory to create\n"
    "  --config FILE  FILE's quantize config; without it the config is looked up\n"
    "                 beside FILE as for decode\n"
    "\n"
    "exit: 0 written, 1 FILE refused, an entry or name OUT cannot hold, a zero point or width the target cannot\n"
    "      hold, an output the oracle reads differently or check would refuse\n"
    "      (nothing written), 2 usage error, unreadable FILE, or OUT unwritable\n"
    "      or not allowed (an existing OUTDIR)\n";

using nlohmann::json;

// OUT without ".safetensors", + ".quantize_config.json": the first name
// config discovery tries beside OUT.
std::string ConfigPathFor(const std::string& out) {
  constexpr std::string_view kExtension = ".safetensors";
  std::string stem = out;
  if (stem.size() >= kExtension.size() &&
      stem.compare(stem.size() - kExtension.size(), kExtension.size(), kExtension) == 0) {
    stem.resize(stem.size() - kExtension.size());
  }
  return stem + ".quantize_config.json";
}

// The winning config object with every format key naming FORMAT and every
// method key naming METHOD (a conversion across families: docs/awq.md
// section 11). The codec accepted the source, so it parses and (for
// config.json) holds a quantization_config object.
std::string ConvertedConfig(const qd::SideFile& winner, const char* method, const char* format) {
  json config = json::parse(winner.bytes.begin(), winner.bytes.end(), nullptr, false);
  if (std::filesystem::path(winner.name).filename() == "config.json") {
    config = config["quantization_config"];
  }
  auto name_present = [&](std::initializer_list<const char*> keys, const char* value) {
    bool named = false;
    for (const char* key : keys) {
      if (config.contains(key) && !config[key].is_null()) {
        config[key] = value;
        named = true;
      }
    }
    return named;
  };
  name_present({"method", "quant_method"}, method);
  // The words are I32 in every format a conversion writes (CFG-008).
  name_present({"pack_dtype"}, "int32");
  if (!name_present({"format", "checkpoint_format", "version"}, format)) {
    config["format"] = format;
    config["checkpoint_format"] = format;
  }
  return config.dump(2) + "\n";
}

const qd::SideFile* WinningSource(const qd::harness::SideFiles& side_files, const std::string& source) {
  for (const qd::SideFile& s : side_files) {
    if (s.name == source) return &s;
  }
  return nullptr;
}

std::vector<std::uint8_t> RewrittenFile(const qd::codec::Container& container,
                                        std::vector<TensorEdit> edits, const char* checkpoint_format) {
  std::vector<qd::codec::TensorWithBytes> tensors;
  for (std::size_t i = 0; i < container.tensors.size(); ++i) {
    const qd::codec::TensorEntry& t = container.tensors[i];
    TensorEdit& edit = edits[i];
    if (!edit.drop) {
      qd::codec::TensorWithBytes w;
      w.spec = {std::string(t.name), std::string(qd::codec::InfoOf(t.dtype).name), t.shape, t.end - t.begin};
      if (edit.shape) w.spec.shape.assign(edit.shape->begin(), edit.shape->end());
      if (edit.bytes) {
        w.spec.byte_size = edit.bytes->size();
        w.bytes = std::move(*edit.bytes);
      } else {
        const std::uint8_t* data = container.Data(t);
        w.bytes.assign(data, data + (t.end - t.begin));
      }
      tensors.push_back(std::move(w));
    }
    for (qd::codec::TensorWithBytes& added : edit.after) tensors.push_back(std::move(added));
  }
  qd::codec::MetadataList metadata;
  for (const auto& [key, value] : container.metadata) {
    if (key != "gptq_checkpoint_format") {
      metadata.emplace_back(key, value);
    } else if (checkpoint_format != nullptr) {
      metadata.emplace_back(key, checkpoint_format);
    }
  }
  return qd::codec::SerializeSafetensors(tensors, container.has_metadata ? &metadata : nullptr);
}

int KeepIfFaithful(const ConvertSource& source, const char* target_family,
                   std::vector<std::uint8_t> converted, const std::string& config_text,
                   const std::string& out, const SideFilesBesideOut& beside_out,
                   GptqConversion* result, std::string* error) {
  const std::string config_path = ConfigPathFor(out);
  // OUT is read with the configs `check OUT` will find beside it once the
  // new config is in place, not with the new config alone: a folder's
  // quantize_config.json that disagrees makes the output CFG-010 (issue 9
  // section 2), and that is refused here, not left behind.
  qd::harness::SideFiles output_side_files;
  if (!beside_out({{config_path, std::vector<std::uint8_t>(config_text.begin(), config_text.end())}},
                  &output_side_files, error)) {
    return kExitUsage;
  }
  const qd::ByteView converted_view{converted.data(), converted.size()};
  const int verdict = VerifyAsCheckWould(converted_view, out, output_side_files, error);
  if (verdict != kExitOk) {
    if (verdict == kExitFound) result->refusal = ConvertRefusal::kCheckRefuses;
    return verdict;
  }

  // The oracle reads both files; every weight must decode to the same bits.
  const qd::Outcome before =
      qd::harness::FindFormat(source.family)->oracle_read(source.bytes, source.path, source.side_files);
  const qd::Outcome after =
      qd::harness::FindFormat(target_family)->oracle_read(converted_view, out, output_side_files);
  std::string mismatch;
  if (before.refused || after.refused) {
    mismatch = before.refused ? "the oracle refuses the input" : "the oracle refuses the output";
  } else if (auto d = qd::harness::Compare(qd::Outcome{false, {}, after.tensors},
                                           qd::Outcome{false, {}, before.tensors}, "convert")) {
    mismatch = "the output decodes differently: " + d->signature + ": " + d->detail;
  }
  if (!mismatch.empty()) {
    std::fprintf(stderr, "quantdiff convert: %s; nothing written\n",
                 qd::reports::ForTerminal(mismatch).c_str());
    result->refusal = ConvertRefusal::kOracleDiffers;
    return kExitFound;
  }
  result->file = std::move(converted);
  result->config_path = config_path;
  result->config_text = config_text;
  return kExitOk;
}

int ConvertGptq(qd::ByteView bytes, const std::string& path, const qd::harness::SideFiles& side_files,
                qd::codec::GptqFormat target, const std::string& out,
                const SideFilesBesideOut& beside_out, GptqConversion* result, std::string* error) {
  const qd::codec::GptqResult read = qd::codec::ReadGptq(bytes, path, side_files);
  PrintFindings(path, read.findings);
  if (read.refused) {
    std::fprintf(stderr, "quantdiff convert: %s refused by the gptq codec; nothing written\n",
                 qd::reports::ForTerminal(path).c_str());
    result->refusal = ConvertRefusal::kInputRefused;
    return kExitFound;
  }
  if (read.layers.empty()) {
    std::fprintf(stderr, "quantdiff convert: %s holds no GPTQ layer; nothing written\n",
                 qd::reports::ForTerminal(path).c_str());
    result->refusal = ConvertRefusal::kInputRefused;
    return kExitFound;
  }

  // A file's table: the container it was read from (ReadGptq reads one file).
  const qd::codec::Container& container = *read.table.container();
  // Every layer's new words, by tensor index (shapes kept); the rest is copied.
  std::vector<TensorEdit> edits(container.tensors.size());
  for (const qd::codec::GptqLayer& layer : read.layers) {
    qd::codec::GptqPacked packed;
    qd::codec::GptqPackError pack_error;
    if (!qd::codec::GptqConvert(qd::codec::ViewOf(read, layer), target, &packed, &pack_error)) {
      // A zero point the target cannot hold names its qzeros entry; a width
      // it cannot hold names the layer.
      const std::string where =
          pack_error.row >= 0 ? layer.prefix + "qzeros row " + std::to_string(pack_error.row) +
                                    ", element " + std::to_string(pack_error.column)
                              : "layer " + layer.prefix;
      std::fprintf(stderr, "quantdiff convert: %s: %s (%s -> %s): %s; nothing written\n",
                   qd::reports::ForTerminal(where).c_str(), pack_error.what.c_str(),
                   qd::codec::GptqFormatName(read.config.format), qd::codec::GptqFormatName(target),
                   qd::reports::ForTerminal(pack_error.message).c_str());
      result->refusal = ConvertRefusal::kTargetCannotHold;
      return kExitFound;
    }
    edits[layer.qweight].bytes = qd::codec::I32WordBytes(packed.qweight);
    edits[layer.qzeros].bytes = qd::codec::I32WordBytes(packed.qzeros);
  }
  const qd::SideFile* winner = WinningSource(side_files, read.config.source);
  if (winner == nullptr) {
    *error = "the winning config source went missing";
    return kExitUsage;
  }
  const int verdict = KeepIfFaithful(
      {bytes, path, side_files, "gptq"}, "gptq",
      RewrittenFile(container, std::move(edits), qd::codec::GptqFormatName(target)),
      ConvertedConfig(*winner, "gptq", qd::codec::GptqFormatName(target)), out, beside_out, result,
      error);
  if (verdict != kExitOk) return verdict;
  result->from = qd::codec::GptqFormatName(read.config.format);
  result->layers = read.layers.size();
  return kExitOk;
}

int RunConvert(const std::vector<std::string>& argv) {
  Args args;
  std::string error;
  if (!ParseArgs(argv, {{"to", true}, {"out", true}, kConfigFlag}, &args, &error)) {
    return UsageError("convert", error);
  }
  if (args.positional.size() != 1) return UsageError("convert", "give exactly one FILE");
  const std::optional<std::string> out = args.Get("out");
  if (!out || out->empty()) return UsageError("convert", "--out OUT.safetensors is required");
  const std::optional<std::string> to = args.Get("to");
  const std::string& path = args.positional[0];
  if (to == "safetensors") {
    if (args.Get("config")) return UsageError("convert", "--config is for the GPTQ targets");
    if (IsDirectory(path)) return RunConvertDir(path, *out);
    return RunConvertPt(path, *out);
  }
  ConvertTarget target;
  if (!to || !ParseConvertTarget(*to, &target)) {
    return UsageError("convert",
                      "--to must be gptq, gptq_v2, gptq_p, awq_gemm, awq_gemv or safetensors");
  }

  if (!CheckOutputTarget(*out, {path}, &error) ||
      !CheckOutputTarget(ConfigPathFor(*out), {path}, &error)) {
    return IoError("convert", error);
  }
  InputFile file;
  if (!OpenInput(path, &file, &error)) return IoError("convert", "cannot read " + error);
  qd::harness::SideFiles side_files;
  if (!FindSideFiles(path, args.Get("config"), &side_files, &error)) return IoError("convert", error);
  std::vector<std::string> inputs = {path};
  for (const qd::SideFile& side : side_files) inputs.push_back(side.name);

  GptqConversion converted;
  const int verdict = ConvertQuantized(
      file.View(), path, side_files, target, *out,
      [&](const qd::harness::SideFiles& pending, qd::harness::SideFiles* found, std::string* e) {
        return SideFilesAfterWriting(*out, pending, found, e);
      },
      &converted, &error);
  if (verdict == kExitUsage) return IoError("convert", error);
  if (verdict != kExitOk) return verdict;

  // Both files are written whole before either is renamed into place; a
  // failure removes only the temporary files (never an existing OUT).
  OutputFile out_file;
  OutputFile config_file;
  if (!out_file.Open(*out, inputs, &error) || !config_file.Open(converted.config_path, inputs, &error)) {
    return IoError("convert", error);
  }
  out_file.Write(converted.file.data(), converted.file.size());
  config_file.Write(converted.config_text);
  if (!config_file.Commit(&error) || !out_file.Commit(&error)) return IoError("convert", error);
  std::fprintf(stderr, "quantdiff convert: %s [%s] -> %s [%s] with %s: %zu layers, weights unchanged\n",
               qd::reports::ForTerminal(path).c_str(),
               converted.from.c_str(), qd::reports::ForTerminal(*out).c_str(), to->c_str(),
               qd::reports::ForTerminal(converted.config_path).c_str(), converted.layers);
  return kExitOk;
}

}  // namespace qd::cli
