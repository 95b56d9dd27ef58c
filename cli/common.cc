#include "cli/common.h"

#include "harness/stream_differ.h"
#include "reports/escape.h"

#include <nettle/sha2.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>

namespace qd::cli {

std::optional<std::string> Args::Get(const std::string& flag) const {
  auto it = values.find(flag);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> Args::GetAll(const std::string& flag) const {
  auto it = repeated.find(flag);
  return it == repeated.end() ? std::vector<std::string>{} : it->second;
}

bool ParseArgs(const std::vector<std::string>& argv, const std::vector<FlagSpec>& flags,
               Args* out, std::string* error) {
  bool flags_done = false;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (flags_done || arg.size() < 2 || arg[0] != '-') {
      out->positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    if (arg.compare(0, 2, "--") != 0) {
      *error = "unknown flag " + arg;
      return false;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (const std::size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& f : flags) {
      if (f.name == name) spec = &f;
    }
    if (spec == nullptr) {
      *error = "unknown flag --" + name;
      return false;
    }
    if (!spec->takes_value) {
      if (value) {
        *error = "--" + name + " takes no value";
        return false;
      }
      out->switches.insert(name);
      continue;
    }
    if (!value) {
      if (i + 1 >= argv.size()) {
        *error = "--" + name + " needs a value";
        return false;
      }
      value = argv[++i];
    }
    out->values[name] = *value;
    out->repeated[name].push_back(*value);
  }
  return true;
}

int UsageError(std::string_view verb, const std::string& message) {
  const std::string v(verb);
  if (v.empty()) {
    std::fprintf(stderr, "quantdiff: %s\nRun 'quantdiff --help' for usage.\n", message.c_str());
  } else {
    std::fprintf(stderr, "quantdiff %s: %s\nRun 'quantdiff %s --help' for usage.\n", v.c_str(),
                 message.c_str(), v.c_str());
  }
  return kExitUsage;
}

int IoError(std::string_view verb, const std::string& message) {
  std::fprintf(stderr, "quantdiff %.*s: %s\n", static_cast<int>(verb.size()), verb.data(),
               message.c_str());
  return kExitUsage;
}

bool OpenInput(const std::string& path, InputFile* file, std::string* error) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    *error = path + ": " + std::strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = path + (S_ISDIR(st.st_mode) ? ": is a directory" : ": not a regular file");
    return false;
  }
  if (!file->file_.Open(path, error)) return false;
  const qd::ByteView view = file->file_.View();
  file->guard_ = std::make_unique<GuardedMapping>(view.data, view.size, path);
  return true;
}

bool ParseUint(std::string_view text, std::uint64_t* out) {
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  }
  if (text.empty() || text.size() > 20) return false;
  std::uint64_t value = 0;
  for (const char c : text) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (base == 16 && c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (base == 16 && c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return false;
    }
    if (value > (UINT64_MAX - static_cast<std::uint64_t>(digit)) / static_cast<std::uint64_t>(base)) {
      return false;
    }
    value = value * static_cast<std::uint64_t>(base) + static_cast<std::uint64_t>(digit);
  }
  *out = value;
  return true;
}

bool ParseSeconds(std::string_view text, double* out) {
  if (text.empty() || text.size() > 32) return false;
  for (const char c : text) {
    if (!((c >= '0' && c <= '9') || c == '.')) return false;
  }
  const std::string s(text);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  // At most about 31 years, so the deadline fits a steady_clock duration.
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v) || v < 0 || v > 1e9) {
    return false;
  }
  *out = v;
  return true;
}

std::string FormatNames() {
  std::string names;
  for (const qd::harness::FormatEntry& f : qd::harness::Formats()) {
    if (!names.empty()) names += ", ";
    names += f.name;
  }
  return names;
}

const qd::harness::FormatEntry* FormatByName(std::string_view name, std::string* error) {
  const qd::harness::FormatEntry* f = qd::harness::FindFormat(name);
  if (f == nullptr) *error = "unknown format '" + std::string(name) + "' (known: " + FormatNames() + ")";
  return f;
}

std::vector<const qd::harness::FormatEntry*> ParseFormatList(std::string_view names, std::string* error) {
  std::vector<const qd::harness::FormatEntry*> formats;
  std::size_t begin = 0;
  while (begin <= names.size()) {
    const std::size_t comma = std::min(names.find(',', begin), names.size());
    const qd::harness::FormatEntry* f = FormatByName(names.substr(begin, comma - begin), error);
    if (f == nullptr) return {};
    if (std::find(formats.begin(), formats.end(), f) == formats.end()) formats.push_back(f);
    begin = comma + 1;
  }
  return formats;
}

bool ParseReportOptions(const Args& args, ReportOptions* options, std::string* error) {
  if (auto r = args.Get("report")) {
    auto format = qd::reports::ParseOutputFormat(*r);
    if (!format) {
      *error = "unknown --report '" + *r + "' (known: " + std::string(qd::reports::OutputFormatNames()) + ")";
      return false;
    }
    options->report = *format;
  }
  if (auto out = args.Get("out")) {
    if (out->empty()) {
      *error = "--out needs a file name";
      return false;
    }
    options->out = *out;
  }
  if (auto name = args.Get("format")) {
    options->forced = FormatByName(*name, error);
    if (options->forced == nullptr) return false;
  }
  return true;
}

bool WriteOutput(const std::string& path, std::string_view text,
                 const std::vector<std::string>& inputs, std::string* error) {
  return WriteFileAtomic(path.empty() ? std::string(kStandardOutput) : path, text, inputs, error);
}

std::string Sha256Hex(const std::uint8_t* data, std::size_t size) {
  sha256_ctx ctx;
  sha256_init(&ctx);
  sha256_update(&ctx, size, data);
  std::uint8_t digest[SHA256_DIGEST_SIZE];
  sha256_digest(&ctx, SHA256_DIGEST_SIZE, digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (const std::uint8_t b : digest) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}

std::string Crc32Hex(const std::uint8_t* data, std::size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (size > 0) {  // zlib takes uInt lengths
    const uInt chunk = size > (1u << 30) ? (1u << 30) : static_cast<uInt>(size);
    crc = crc32(crc, data, chunk);
    data += chunk;
    size -= chunk;
  }
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08lx", static_cast<unsigned long>(crc & 0xffffffffUL));
  return buf;
}

std::uint64_t Mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::optional<qd::Outcome> SafeRead(Reader reader, qd::ByteView bytes, const std::string& name,
                                    const qd::harness::SideFiles& side_files,
                                    std::string* error, bool* out_of_memory) {
  return qd::harness::GuardedRead([&] { return reader(bytes, name, side_files); }, error,
                                  out_of_memory);
}

namespace {

// Reads a side file whole; absent (or not a regular file) is *exists false.
bool ReadSideFile(const std::string& path, bool* exists, std::vector<std::uint8_t>* bytes,
                  std::string* error) {
  struct stat st {};
  *exists = ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  if (!*exists) return true;
  if (static_cast<std::uint64_t>(st.st_size) > kMaxSideFileBytes) {
    *error = path + ": " + std::to_string(st.st_size) + " bytes is too large for a config file (at most " +
             std::to_string(kMaxSideFileBytes) + ")";
    return false;
  }
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    *error = path + ": " + std::strerror(errno);
    return false;
  }
  bytes->resize(static_cast<std::size_t>(st.st_size));
  const std::size_t got = bytes->empty() ? 0 : std::fread(bytes->data(), 1, bytes->size(), f);
  const bool ok = got == bytes->size() && std::fgetc(f) == EOF && !std::ferror(f);
  std::fclose(f);
  if (!ok) *error = path + ": changed or failed while being read";
  return ok;
}

}  // namespace

std::vector<std::string> SideFileCandidates(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string stem = path.substr(dir.size());
  constexpr std::string_view kExtension = ".safetensors";
  if (stem.size() >= kExtension.size() &&
      stem.compare(stem.size() - kExtension.size(), kExtension.size(), kExtension) == 0) {
    stem.resize(stem.size() - kExtension.size());
  }
  return {dir + stem + ".quantize_config.json", dir + "quantize_config.json", dir + "quant_config.json",
          dir + "config.json"};
}

bool FindSideFiles(const std::string& path, const std::optional<std::string>& config,
                   qd::harness::SideFiles* out, std::string* error) {
  out->clear();
  const std::vector<std::string> candidates =
      config ? std::vector<std::string>{*config} : SideFileCandidates(path);
  for (const std::string& candidate : candidates) {
    qd::SideFile side{candidate, {}};
    bool exists = false;
    if (!ReadSideFile(candidate, &exists, &side.bytes, error)) return false;
    if (!exists) {
      if (config) {
        *error = "--config " + candidate + ": not a readable regular file";
        return false;
      }
      continue;
    }
    out->push_back(std::move(side));
  }
  return true;
}

void PrintFindings(const std::string& path, const std::vector<qd::Finding>& findings) {
  for (const qd::Finding& f : findings) {
    std::fprintf(stderr, "%s: %s\n", qd::reports::ForTerminal(f.file.empty() ? path : f.file).c_str(),
                 qd::reports::FindingLine(f).c_str());
  }
}

}  // namespace qd::cli
