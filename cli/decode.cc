// quantdiff decode: a file decoded by the codec, written as F32 safetensors.
#include <bit>
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
    "usage: quantdiff decode FILE --out OUT.safetensors [--format NAME]\n"
    "\n"
    "Decodes FILE with the production codec of its format and writes every\n"
    "decoded tensor as F32, under its name and with its logical shape (a Q4B32 or\n"
    "Q8B32 matrix becomes [rows, columns]), to a plain safetensors file. Tensors\n"
    "the format does not decode to floating point (integer dtypes) are left out.\n"
    "The output is written to OUT.tmp and renamed, so it appears whole or not at\n"
    "all. Warnings are printed to standard error.\n"
    "\n"
    "  --out FILE     the safetensors file to write (required)\n"
    "  --format NAME  read FILE as NAME (rbq, safetensors) instead of detecting\n"
    "\n"
    "exit: 0 written, 1 FILE refused (its findings on standard error, nothing\n"
    "      written), 2 usage error, unreadable FILE or unwritable --out\n";

namespace {

// Streams the header and then each tensor's values, little endian.
bool WriteDecoded(const std::string& path, const std::vector<qd::DecodedTensor>& tensors,
                  std::string* error) {
  std::vector<qd::codec::TensorToWrite> specs;
  specs.reserve(tensors.size());
  for (const qd::DecodedTensor& t : tensors) {
    specs.push_back({t.name, "F32", t.shape, static_cast<std::uint64_t>(t.values.size()) * 4});
  }
  const std::string header = qd::codec::BuildHeader(specs, nullptr);
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    *error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  int err = 0;
  const auto put = [&](const void* data, std::size_t size) {
    if (err == 0 && std::fwrite(data, 1, size, f) != size) err = errno ? errno : EIO;
  };
  put(header.data(), header.size());
  std::vector<std::uint8_t> chunk;
  for (const qd::DecodedTensor& t : tensors) {
    if constexpr (std::endian::native == std::endian::little) {
      put(t.values.data(), t.values.size() * sizeof(float));
    } else {
      chunk.resize(t.values.size() * 4);
      for (std::size_t i = 0; i < t.values.size(); ++i) {
        const std::uint32_t bits = std::bit_cast<std::uint32_t>(t.values[i]);
        for (int b = 0; b < 4; ++b) chunk[4 * i + b] = static_cast<std::uint8_t>(bits >> (8 * b));
      }
      put(chunk.data(), chunk.size());
    }
  }
  if (std::fclose(f) != 0 && err == 0) err = errno ? errno : EIO;
  if (err == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    *error = "cannot write " + path + ": " + std::strerror(err);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace

int RunDecode(const std::vector<std::string>& argv) {
  Args args;
  std::string error;
  if (!ParseArgs(argv, {{"out", true}, {"format", true}}, &args, &error)) {
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
  const qd::ByteView bytes = file.View();
  const qd::harness::FormatEntry& format = forced ? *forced : qd::harness::DetectFormat(bytes);
  std::optional<qd::Outcome> outcome = SafeRead(format.codec_read, bytes, path, &error);
  if (!outcome) {
    return IoError("decode", path + ": " + std::string(format.name) + " codec failed: " + error);
  }
  for (const qd::Finding& f : outcome->findings) {
    std::fprintf(stderr, "%s: %s\n", qd::reports::ForTerminal(path).c_str(),
                 qd::reports::FindingLine(f).c_str());
  }
  if (outcome->refused) {
    std::fprintf(stderr, "quantdiff decode: %s refused by the %.*s codec; nothing written\n",
                 qd::reports::ForTerminal(path).c_str(),
                 static_cast<int>(format.name.size()), format.name.data());
    return kExitFound;
  }
  if (!WriteDecoded(*out, outcome->tensors, &error)) return IoError("decode", error);
  std::uint64_t values = 0;
  for (const qd::DecodedTensor& t : outcome->tensors) values += t.values.size();
  std::fprintf(stderr, "quantdiff decode: %s [%.*s] -> %s: %zu tensors, %llu values as F32\n",
               qd::reports::ForTerminal(path).c_str(), static_cast<int>(format.name.size()),
               format.name.data(), qd::reports::ForTerminal(*out).c_str(),
               outcome->tensors.size(), static_cast<unsigned long long>(values));
  return kExitOk;
}

}  // namespace qd::cli
