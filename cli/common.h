// common.h: what every quantdiff verb shares: exit codes, flag parsing,
// reading a file through its mapping, and writing output atomically.
//
// A verb is a function from its arguments (argv after the verb's name) to an
// exit code, plus its help text; main.cc holds the table of verbs.
//
//   qd::cli::Args args;
//   if (!qd::cli::ParseArgs(argv, {{"out", true}}, &args, &error))
//     return qd::cli::UsageError("decode", error);
#ifndef QUANTDIFF_CLI_COMMON_H_
#define QUANTDIFF_CLI_COMMON_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cli/fault_guard.h"
#include "cli/output_file.h"
#include "codecs/mapped_file.h"
#include "harness/registry.h"
#include "quantdiff/plain_data.h"
#include "reports/writers.h"

namespace qd::cli {

// 0: the files conform, the readers agree. 1: violations, divergences or
// expectation failures were found. 2: the command could not do its job
// (usage error, unreadable input, unwritable output).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFound = 1;
inline constexpr int kExitUsage = 2;

struct Verb {
  std::string_view name;
  std::string_view summary;  // one line for `quantdiff --help`
  std::string_view help;     // the whole `quantdiff help VERB` text; {formats} is
                             // printed as the registered format names
  int (*run)(const std::vector<std::string>& args);
};

struct FlagSpec {
  std::string_view name;  // without the leading "--"
  bool takes_value;
};

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> values;  // the last of repeated flags wins
  std::map<std::string, std::vector<std::string>> repeated;  // every value, in order
  std::set<std::string> switches;

  bool Has(const std::string& flag) const { return values.count(flag) || switches.count(flag); }
  std::optional<std::string> Get(const std::string& flag) const;
  // Every value of a flag that may be given more than once (campaign --module).
  std::vector<std::string> GetAll(const std::string& flag) const;
};

// "--flag value", "--flag=value" and "--switch"; "--" ends the flags. False
// with *error set for an unknown flag, a missing value, or a value given to
// a switch. --help is not handled here (main.cc answers it for every verb).
bool ParseArgs(const std::vector<std::string>& argv, const std::vector<FlagSpec>& flags,
               Args* out, std::string* error);

// Prints "quantdiff VERB: message" and a pointer to the verb's help on
// stderr; returns kExitUsage.
int UsageError(std::string_view verb, const std::string& message);
// Prints "quantdiff VERB: message" on stderr; returns kExitUsage.
int IoError(std::string_view verb, const std::string& message);

// An input file read through its mapping, guarded while it lives: if
// another process truncates it, the process ends with exit code 2 and a
// message naming it, never a SIGBUS death (cli/fault_guard.h).
class InputFile {
 public:
  qd::ByteView View() const { return file_.View(); }
  // The input's resident pages back to the kernel (MappedFile::ReleasePages).
  void ReleasePages() const { file_.ReleasePages(); }

 private:
  friend bool OpenInput(const std::string& path, InputFile* file, std::string* error);
  qd::codec::MappedFile file_;
  std::unique_ptr<GuardedMapping> guard_;
};

// Opens a regular file through its mapping. Anything else (a directory, a
// FIFO that would block the open, a device) is refused before it is opened.
bool OpenInput(const std::string& path, InputFile* file, std::string* error);

// Decimal (or 0x hexadecimal) unsigned 64-bit integer, nothing else.
bool ParseUint(std::string_view text, std::uint64_t* out);
// A finite, non-negative decimal number of seconds.
bool ParseSeconds(std::string_view text, double* out);

// --format NAME: the registry entry, or nullptr with *error listing the names.
const qd::harness::FormatEntry* FormatByName(std::string_view name, std::string* error);
// The formats of a comma-separated list ("gguf,ggml_st"), each once, in the
// order named; an empty list with *error at a name the registry does not hold.
std::vector<const qd::harness::FormatEntry*> ParseFormatList(std::string_view names, std::string* error);
// "rbq, safetensors".
std::string FormatNames();

// The flags check and diff share: --report, --out, --format.
struct ReportOptions {
  qd::reports::OutputFormat report = qd::reports::OutputFormat::kText;
  std::string out;                                     // "" = stdout
  const qd::harness::FormatEntry* forced = nullptr;  // --format
};
inline const std::vector<FlagSpec> kReportFlags = {
    {"report", true}, {"out", true}, {"format", true}, {"config", true}};
bool ParseReportOptions(const Args& args, ReportOptions* options, std::string* error);

// To standard output when path is empty or "-", else through an OutputFile
// (cli/output_file.h: never the same file as one of INPUTS, never over
// anything but a regular file).
bool WriteOutput(const std::string& path, std::string_view text,
                 const std::vector<std::string>& inputs, std::string* error);

// CRC-32 (zlib) of bytes as 8 lowercase hex digits.
std::string Crc32Hex(const std::uint8_t* data, std::size_t size);
// SHA-256 (Nettle) of bytes as 64 lowercase hex digits.
std::string Sha256Hex(const std::uint8_t* data, std::size_t size);
// A 64-bit mix (splitmix64 finaliser) for deriving per-instance seeds.
std::uint64_t Mix(std::uint64_t x);

// Runs a reader and turns an escaping exception into *error (a reader must
// not throw; if one does, that is a finding, not a crash of the tool).
// std::bad_alloc sets *out_of_memory when given: running out of memory is
// the machine's limit, an I/O-style error (exit 2), not a finding.
using Reader = qd::Outcome (*)(qd::ByteView, const std::string&, const qd::harness::SideFiles&);
std::optional<qd::Outcome> SafeRead(Reader reader, qd::ByteView bytes, const std::string& name,
                                    const qd::harness::SideFiles& side_files,
                                    std::string* error,
                                    bool* out_of_memory = nullptr);

// The config sources for PATH, in priority order (docs/gptq.md section 1):
// the file given with --config alone, named as given; otherwise whichever of
// DIR/STEM.quantize_config.json, DIR/quantize_config.json,
// DIR/quant_config.json and DIR/config.json exist as regular files, named by
// that path (STEM: PATH's file name without ".safetensors"). Formats without
// configs ignore them. False with *error when a source cannot be read or is
// larger than kMaxSideFileBytes (exit 2, the message names the file).
// A quantize config is a few hundred bytes and a model's config.json a few
// KB (large multimodal ones stay under 100 KB), while both readers hold the
// parsed JSON in memory at 8 to 16 times the text size (the codec's
// nlohmann DOM, the oracle's node list): 1 MiB keeps that within the
// 64 MiB allowance of the memory bound (README, issue 9: a 60 MB config cost
// `check` 1.4 GB) without a streaming JSON reader on either side.
inline constexpr std::uint64_t kMaxSideFileBytes = 1ull << 20;
inline const FlagSpec kConfigFlag = {"config", true};
// The discovery order of config sources beside PATH (no --config): the
// four paths above, whether they exist or not.
std::vector<std::string> SideFileCandidates(const std::string& path);
bool FindSideFiles(const std::string& path, const std::optional<std::string>& config,
                   qd::harness::SideFiles* out, std::string* error);

// One line per finding on standard error, each under the file it names (a
// config source for CFG-* findings, else path).
void PrintFindings(const std::string& path, const std::vector<qd::Finding>& findings);

// Verbs.
int RunCheck(const std::vector<std::string>& args);
int RunDecode(const std::vector<std::string>& args);
int RunDiff(const std::vector<std::string>& args);
int RunCampaign(const std::vector<std::string>& args);
int RunExportVectors(const std::vector<std::string>& args);
int RunConvert(const std::vector<std::string>& args);
int RunRules(const std::vector<std::string>& args);
int RunTestImpl(const std::vector<std::string>& args);
int RunReportMerge(const std::vector<std::string>& args);
extern const std::string_view kCheckHelp;
extern const std::string_view kDecodeHelp;
extern const std::string_view kDiffHelp;
extern const std::string_view kCampaignHelp;
extern const std::string_view kExportVectorsHelp;
extern const std::string_view kConvertHelp;
extern const std::string_view kRulesHelp;
extern const std::string_view kTestImplHelp;
extern const std::string_view kReportMergeHelp;

}  // namespace qd::cli

#endif  // QUANTDIFF_CLI_COMMON_H_
