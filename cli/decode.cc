// quantdiff decode: a file decoded by the codec, written as F32 safetensors.
#include <bit>
#include <exception>
#include <utility>
#include <vector>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "codecs/mapped_file.h"
#include "codecs/safetensors.h"
#include "cli/common.h"
#include "reports/escape.h"
#include "reports/writers.h"

namespace qd::cli {

extern const std::string_view kDecodeHelp =
    "usage: quantdiff decode FILE --out OUT.safetensors [--format NAME] [--config CONFIG.json]\n"
    "\n"
    "Decodes FILE with the production codec of its format and writes every\n"
    "decoded tensor as F32, under its name and with its logical shape (a Q4B32 or\n"
    "Q8B32 matrix becomes [rows, columns], a GPTQ layer P.qweight/qzeros/scales/\n"
    "g_idx becomes P.weight [out_features, in_features]), to a plain safetensors\n"
    "file. Tensors\n"
    "the format does not decode to floating point (integer dtypes) are left out.\n"
    "The output is written to OUT.tmp and renamed, so it appears whole or not at\n"
    "all. Warnings are printed to standard error.\n"
    "\n"
    "  --out FILE     the safetensors file to write (required)\n"
    "  --format NAME  read FILE as NAME (rbq, bnb, gptq, pt, safetensors) instead of detecting\n"
    "  --config FILE  FILE's quantize config (GPTQ); without it the config is looked\n"
    "                 up beside FILE: STEM.quantize_config.json, quantize_config.json,\n"
    "                 quant_config.json, then config.json's quantization_config\n"
    "\n"
    "exit: 0 written, 1 FILE refused (its findings on standard error, nothing\n"
    "      written), 2 usage error, unreadable FILE or unwritable --out\n";

namespace {

// Writes the announced tensors as an F32 safetensors file to PATH.tmp: the
// header when the codec announces the tensors, then each tensor's values as
// it arrives, so one decoded tensor is in memory at a time. Finish() renames
// the file into place; a writer never finished removes it.
class FileWriterSink : public qd::codec::DecodeSink {
 public:
  explicit FileWriterSink(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {}
  ~FileWriterSink() override {
    if (file_ != nullptr) std::fclose(file_);
    if (!finished_) std::remove(tmp_.c_str());
  }

  bool Plan(const std::vector<qd::codec::TensorInfo>& tensors) override {
    std::vector<qd::codec::TensorToWrite> specs;
    specs.reserve(tensors.size());
    for (const qd::codec::TensorInfo& t : tensors) {
      std::uint64_t count = 1;
      for (std::uint64_t d : t.shape) count *= d;  // the codec checked it fits
      specs.push_back({t.name, "F32", t.shape, count * 4});
    }
    const std::string header = qd::codec::BuildHeader(specs, nullptr);
    file_ = std::fopen(tmp_.c_str(), "wb");
    if (file_ == nullptr) {
      err_ = errno ? errno : EIO;
      return false;
    }
    return Put(header.data(), header.size());
  }

  bool Take(qd::DecodedTensor&& t) override {
    ++tensors_;
    values_ += t.values.size();
    if constexpr (std::endian::native == std::endian::little) {
      return Put(t.values.data(), t.values.size() * sizeof(float));
    } else {
      std::vector<std::uint8_t> chunk(t.values.size() * 4);
      for (std::size_t i = 0; i < t.values.size(); ++i) {
        const std::uint32_t bits = std::bit_cast<std::uint32_t>(t.values[i]);
        for (int b = 0; b < 4; ++b) chunk[4 * i + b] = static_cast<std::uint8_t>(bits >> (8 * b));
      }
      return Put(chunk.data(), chunk.size());
    }
  }

  // Closes and renames; false with *error when any write failed.
  bool Finish(std::string* error) {
    if (file_ != nullptr) {
      if (std::fclose(file_) != 0 && err_ == 0) err_ = errno ? errno : EIO;
      file_ = nullptr;
    }
    if (err_ == 0 && std::rename(tmp_.c_str(), path_.c_str()) != 0) err_ = errno;
    if (err_ != 0) {
      *error = "cannot write " + path_ + ": " + std::strerror(err_);
      return false;
    }
    finished_ = true;
    return true;
  }

  std::uint64_t tensors() const { return tensors_; }
  std::uint64_t values() const { return values_; }

 private:
  bool Put(const void* data, std::size_t size) {
    if (err_ == 0 && size != 0 && std::fwrite(data, 1, size, file_) != size) {
      err_ = errno ? errno : EIO;
    }
    return err_ == 0;
  }

  std::string path_;
  std::string tmp_;
  std::FILE* file_ = nullptr;
  int err_ = 0;
  bool finished_ = false;
  std::uint64_t tensors_ = 0;
  std::uint64_t values_ = 0;
};

}  // namespace

int RunDecode(const std::vector<std::string>& argv) {
  Args args;
  std::string error;
  if (!ParseArgs(argv, {{"out", true}, {"format", true}, kConfigFlag}, &args, &error)) {
    return UsageError("decode", error);
  }
  if (args.positional.size() != 1) return UsageError("decode", "give exactly one FILE");
  const std::optional<std::string> out = args.Get("out");
  if (!out || out->empty()) return UsageError("decode", "--out OUT.safetensors is required");
  const qd::harness::FormatEntry* forced = nullptr;
  if (auto name = args.Get("format")) {
    forced = FormatByName(*name, &error);
    if (forced == nullptr) return UsageError("decode", error);
  }

  const std::string& path = args.positional[0];
  qd::codec::MappedFile file;
  if (!OpenInput(path, &file, &error)) return IoError("decode", "cannot read " + error);
  qd::harness::SideFiles side_files;
  if (!FindSideFiles(path, args.Get("config"), &side_files, &error)) return IoError("decode", error);
  const qd::ByteView bytes = file.View();
  const qd::harness::FormatEntry& format = forced ? *forced : qd::harness::DetectFormat(bytes);
  FileWriterSink writer(*out);
  std::optional<qd::Outcome> outcome;
  try {
    outcome = format.codec_stream(bytes, path, side_files, writer);
  } catch (const std::exception& e) {  // allocation failure on a huge tensor
    error = e.what();
  }
  if (!outcome) {
    return IoError("decode", path + ": " + std::string(format.name) + " codec failed: " + error);
  }
  PrintFindings(path, outcome->findings);
  if (outcome->refused) {
    std::fprintf(stderr, "quantdiff decode: %s refused by the %.*s codec; nothing written\n",
                 qd::reports::ForTerminal(path).c_str(),
                 static_cast<int>(format.name.size()), format.name.data());
    return kExitFound;
  }
  if (!writer.Finish(&error)) return IoError("decode", error);
  std::fprintf(stderr, "quantdiff decode: %s [%.*s] -> %s: %llu tensors, %llu values as F32\n",
               qd::reports::ForTerminal(path).c_str(), static_cast<int>(format.name.size()),
               format.name.data(), qd::reports::ForTerminal(*out).c_str(),
               static_cast<unsigned long long>(writer.tensors()),
               static_cast<unsigned long long>(writer.values()));
  return kExitOk;
}

}  // namespace qd::cli
