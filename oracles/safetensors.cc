// safetensors.cc: the oracle's strict safetensors container reader.
//
// Sections, in the order the catalogue (oracles/rules.json) checks them:
//   1. length prefix ............ ST-001, ST-002, ST-003
//   2. header text .............. ST-004 (strict UTF-8, then JSON: json.cc), ST-101, ST-102
//   3. duplicate keys ........... ST-005
//   4. __metadata__ ............. ST-006
//   5. tensor entries ........... ST-007, ST-008, ST-009, ST-010 (name order)
//   6. data layout .............. ST-011, ST-012, ST-013 ((begin, end, name) order)
//   7. decoding ................. F32, F16, BF16, F64 to binary32
#include "oracles/safetensors.h"
#include "oracles/bytes.h"
#include "oracles/finding.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>
#include <optional>
#include <string_view>
#include <tuple>

#include "oracles/json.h"
#include "quantdiff/tensor_sink.h"

namespace qd::oracle {
namespace {

constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint64_t kMaxHeaderSize = 100000000;  // ST-002
constexpr std::int64_t kHeaderOffset = 8;            // byte_offset of header findings
// ST-007 decision (rules.json): a shape has at most 64 items. Only that many
// items of any header array are kept as JSON nodes, so a header of [0,0,...]
// costs the parse a few bytes per item at most, not 16 (issue 9).
constexpr std::uint32_t kMaxRank = 64;

// ---------------------------------------------------------------------------
// a * b, false when the product does not fit in 64 bits.
bool MultiplyU64(std::uint64_t a, std::uint64_t b, std::uint64_t* product) {
  if (a != 0 && b > kU64Max / a) return false;
  *product = a * b;
  return true;
}

// data_start + relative as a Finding byte offset (saturated at INT64_MAX).
std::int64_t AbsoluteOffset(std::uint64_t data_start, std::uint64_t relative) {
  const std::uint64_t limit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (relative > limit - data_start) return std::numeric_limits<std::int64_t>::max();
  return static_cast<std::int64_t>(data_start + relative);
}

// ---------------------------------------------------------------------------
// Findings.

class Reporter {
 public:
  Reporter(qd::Outcome* outcome, const std::string& file) : outcome_(outcome), file_(file) {}

  // Appends an error (the last finding) and marks the outcome refused.
  // Returns false so that a check can end with `return report.Error(...)`.
  bool Error(const char* rule, const std::string& tensor, const char* field,
             std::int64_t byte_offset, const std::string& message) {
    Add(rule, qd::Severity::kError, tensor, field, byte_offset, message);
    outcome_->refused = true;
    return false;
  }

  void Warning(const char* rule, const std::string& tensor, const char* field,
               std::int64_t byte_offset, const std::string& message) {
    Add(rule, qd::Severity::kWarning, tensor, field, byte_offset, message);
  }

 private:
  void Add(const char* rule, qd::Severity severity, const std::string& tensor,
           const char* field, std::int64_t byte_offset, const std::string& message) {
    outcome_->findings.push_back(
        NewFinding(rule, severity, file_, tensor, field, byte_offset, message));
  }

  qd::Outcome* outcome_;
  const std::string& file_;
};

// ---------------------------------------------------------------------------
// Section 1: the length prefix (ST-001, ST-002, ST-003).

bool CheckLengthPrefix(qd::ByteView file, Reporter& report, std::uint64_t* header_size) {
  // ST-001: the file is shorter than the 8-byte header length.
  if (file.size < 8) {
    return report.Error("ST-001", "", "header", 0,
                        "file is " + std::to_string(file.size) +
                            " bytes, shorter than the 8-byte header length");
  }
  const std::uint64_t n = LoadU64(file.data);
  // ST-002: the header length N is larger than 100,000,000.
  if (n > kMaxHeaderSize) {
    return report.Error("ST-002", "", "header", 0,
                        "header length " + std::to_string(n) + " is larger than 100000000");
  }
  // ST-003: 8 + N is past the end of the file (compared without overflow).
  if (n > static_cast<std::uint64_t>(file.size) - 8) {
    return report.Error("ST-003", "", "header", 0,
                        "header length " + std::to_string(n) + " runs past the end of the " +
                            std::to_string(file.size) + "-byte file");
  }
  *header_size = n;
  return true;
}

// ---------------------------------------------------------------------------
// Sections 2 to 5 read the header in one pass: the JSON parser hands each
// top-level member over as soon as it is parsed and then drops its nodes
// (json.h), so what is kept of an entry is its ContainerTensor and the
// first problem each later rule would report, not its JSON (issue 9,
// section 3). The rules are still applied in catalogue order afterwards.

// The first problem an entry has for one rule, found while its nodes exist.
struct EntryProblem {
  const char* field;
  std::string message;
};

// The entry first in name order that has a problem for one rule, and the
// problem. ST-007 and ST-009 visit the entries in name order and report the
// first with a problem, so one is kept per rule (issue 9, section 3: a list
// of every entry's problem cost a message an entry). Two entries of one
// name are ST-005's, which comes first.
using FirstProblem = std::optional<std::pair<std::uint32_t, EntryProblem>>;

// Everything the one pass over the header collects.
struct HeaderFacts {
  bool has_metadata = false;
  int metadata_members = 0;  // how many top-level keys are __metadata__ (ST-005)
  std::optional<EntryProblem> metadata_problem;  // ST-006
  std::vector<std::pair<std::string, std::string>> metadata;
  // Header order. Deques: the count is known only at the end, and a
  // vector growing by reallocation peaks at three times its entries (issue
  // 9, section 3: a header of 1M tiny entries); Container::tensors takes
  // this one over.
  std::deque<ContainerTensor> tensors;
  // Once an entry has an ST-007 problem the file is refused at ST-005,
  // ST-006 or ST-007, which read the entries' names only: the records are
  // then given up for their names, and later entries keep a name alone
  // (issue 9, section 3: a header of members like "k1":0 held a record
  // and a problem an entry, 14 times its text).
  bool names_only = false;
  std::deque<std::string> names;  // header order, once names_only
  FirstProblem entry_problem;     // ST-007
  FirstProblem offsets_problem;   // ST-009

  std::size_t EntryCount() const { return names_only ? names.size() : tensors.size(); }
  const std::string& NameOf(std::uint32_t entry) const {
    return names_only ? names[entry] : tensors[entry].name;
  }
};

// Keeps PROBLEM of ENTRY in *FIRST when ENTRY comes first in name order.
void KeepFirstByName(const HeaderFacts& header, std::uint32_t entry, std::optional<EntryProblem> problem,
                     FirstProblem* first) {
  if (!problem) return;
  if (*first && !(header.NameOf(entry) < header.NameOf((*first)->first))) return;
  *first = std::make_pair(entry, std::move(*problem));
}

// Bits per element of a known dtype, 0 for the block dtypes, -1 when unknown.
int DtypeBits(std::string_view dtype) {
  for (const SafetensorsDtype& known : kSafetensorsDtypes) {
    if (dtype == known.name) return known.bits;
  }
  return -1;
}

bool IsBlockDtype(std::string_view dtype) { return dtype == "Q4B32" || dtype == "Q8B32"; }

// A non-negative integer: a JSON number token of digits only whose value
// fits in 64 bits.
bool ReadNonNegativeInteger(const JsonDocument& document, std::uint32_t node, std::uint64_t* value) {
  return JsonToUint64(document, node, value);
}

// Section 4 (ST-006): __metadata__ is an object whose values are all
// strings (null is not). Returns the problem, if any.
std::optional<EntryProblem> ReadMetadata(const JsonDocument& document, std::uint32_t metadata,
                                         HeaderFacts* facts) {
  facts->metadata.clear();
  facts->metadata.reserve(document.nodes[metadata].child_count);  // no regrowth
  if (document.nodes[metadata].kind != JsonKind::kObject) {
    return EntryProblem{"__metadata__", "__metadata__ is not an object"};
  }
  facts->has_metadata = true;
  for (std::uint32_t child = document.nodes[metadata].first_child; child != kNoNode;
       child = document.nodes[child].next_sibling) {
    if (document.nodes[child].kind != JsonKind::kString) {
      return EntryProblem{"__metadata__", "__metadata__ value \"" + std::string(document.Key(child)) +
                                              "\" is not a string"};
    }
    facts->metadata.emplace_back(std::string(document.Key(child)), std::string(document.Text(child)));
  }
  return std::nullopt;
}

// Section 5, ST-007: the entry is an object with dtype, shape and
// data_offsets, a known dtype string and a shape array of non-negative
// integers. Fills tensor->dtype and tensor->shape as it goes.
std::optional<EntryProblem> ReadEntryFields(const JsonDocument& document, std::uint32_t entry,
                                            ContainerTensor* tensor) {
  if (document.nodes[entry].kind != JsonKind::kObject) {
    return EntryProblem{"", "the tensor entry is not an object"};
  }
  const std::uint32_t dtype = document.FindMember(entry, "dtype");
  const std::uint32_t shape = document.FindMember(entry, "shape");
  const std::uint32_t offsets = document.FindMember(entry, "data_offsets");
  if (dtype == kNoNode) return EntryProblem{"dtype", "the tensor entry lacks dtype"};
  if (shape == kNoNode) return EntryProblem{"shape", "the tensor entry lacks shape"};
  if (offsets == kNoNode) return EntryProblem{"data_offsets", "the tensor entry lacks data_offsets"};
  if (document.nodes[dtype].kind != JsonKind::kString) {
    return EntryProblem{"dtype", "dtype is not a string"};
  }
  const int bits = DtypeBits(document.Text(dtype));
  if (bits < 0) {
    return EntryProblem{"dtype", "dtype \"" + std::string(document.Text(dtype)) + "\" is not known"};
  }
  tensor->dtype = DtypeName(document.Text(dtype));  // known: DtypeBits >= 0
  if (document.nodes[shape].kind != JsonKind::kArray) {
    return EntryProblem{"shape", "shape is not an array"};
  }
  // ST-007 decision: rank at most 64 (the items past it were not kept).
  if (document.nodes[shape].child_count > kMaxRank) {
    return EntryProblem{"shape", "shape has " + std::to_string(document.nodes[shape].child_count) +
                                     " items, more than 64"};
  }
  std::vector<std::uint64_t> dimensions;
  dimensions.reserve(document.nodes[shape].child_count);
  for (std::uint32_t item = document.nodes[shape].first_child; item != kNoNode;
       item = document.nodes[item].next_sibling) {
    std::uint64_t dimension = 0;
    if (!ReadNonNegativeInteger(document, item, &dimension)) {
      return EntryProblem{"shape", "a shape item is not a non-negative 64-bit integer"};
    }
    dimensions.push_back(dimension);
  }
  tensor->shape = dimensions;
  return std::nullopt;
}

// Section 5, ST-009: data_offsets is an array of exactly two non-negative
// integers with begin <= end. Fills tensor->begin and tensor->end.
std::optional<EntryProblem> ReadDataOffsets(const JsonDocument& document, std::uint32_t entry,
                                            ContainerTensor* tensor) {
  const std::uint32_t offsets = document.FindMember(entry, "data_offsets");
  if (document.nodes[offsets].kind != JsonKind::kArray || document.nodes[offsets].child_count != 2) {
    return EntryProblem{"data_offsets", "data_offsets is not an array of two integers"};
  }
  const std::uint32_t first = document.nodes[offsets].first_child;
  const std::uint32_t second = document.nodes[first].next_sibling;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  if (!ReadNonNegativeInteger(document, first, &begin) ||
      !ReadNonNegativeInteger(document, second, &end)) {
    return EntryProblem{"data_offsets", "a data_offsets item is not a non-negative 64-bit integer"};
  }
  if (begin > end) {
    return EntryProblem{"data_offsets", "data_offsets begin " + std::to_string(begin) +
                                            " is after end " + std::to_string(end)};
  }
  tensor->begin = begin;
  tensor->end = end;
  return std::nullopt;
}

// One top-level member, as the parser hands it over.
void ReadMember(const JsonDocument& document, std::uint32_t member, HeaderFacts* header) {
  if (document.Key(member) == "__metadata__") {
    ++header->metadata_members;
    header->metadata_problem = ReadMetadata(document, member, header);
    return;
  }
  const auto entry = static_cast<std::uint32_t>(header->EntryCount());
  ContainerTensor tensor;
  std::optional<EntryProblem> problem = ReadEntryFields(document, member, &tensor);
  if (problem && !header->names_only) {
    // The first ST-007 problem: from here on only names are read.
    header->names_only = true;
    while (!header->tensors.empty()) {  // each block freed as it empties
      header->names.push_back(std::move(header->tensors.front().name));
      header->tensors.pop_front();
    }
  }
  if (header->names_only) {
    header->names.emplace_back(document.Key(member));
    KeepFirstByName(*header, entry, std::move(problem), &header->entry_problem);
    return;
  }
  tensor.name = std::string(document.Key(member));
  // data_offsets matter only once ST-007 has passed for every entry.
  std::optional<EntryProblem> offsets_problem = ReadDataOffsets(document, member, &tensor);
  header->tensors.push_back(std::move(tensor));
  KeepFirstByName(*header, entry, std::move(offsets_problem), &header->offsets_problem);
}

// ST-004: the header is strict UTF-8 JSON whose top level is an object.
bool CheckHeaderJson(const std::uint8_t* header, std::uint64_t size, Reporter& report,
                     JsonDocument* document, HeaderFacts* facts) {
  std::size_t bad = 0;
  if (!IsStrictUtf8(header, size, &bad)) {
    return report.Error("ST-004", "", "header", kHeaderOffset,
                        "header byte " + std::to_string(bad) + " is not strict UTF-8");
  }
  JsonError error;
  const JsonMemberVisitor visit = [&](const JsonDocument& d, std::uint32_t member) {
    ReadMember(d, member, facts);
  };
  if (!ParseJsonObjectText(header, size, document, &error, kMaxRank, nullptr, &visit)) {
    return report.Error("ST-004", "", "header", kHeaderOffset,
                        "header is not JSON at byte " + std::to_string(error.position) + ": " +
                            error.what);
  }
  return true;
}

// ST-101 and ST-102: warnings reported right after ST-004 passes.
void CheckHeaderPadding(const std::uint8_t* header, std::uint64_t size, Reporter& report) {
  // ST-101: the header starts with JSON whitespace before the object.
  const std::uint8_t first = header[0];  // size >= 2: ST-004 passed
  if (first == 0x20 || first == 0x09 || first == 0x0A || first == 0x0D) {
    report.Warning("ST-101", "", "header", kHeaderOffset,
                   "the header starts with JSON whitespace before the top-level object");
  }
  // ST-102: N is not a multiple of 8.
  if (size % 8 != 0) {
    report.Warning("ST-102", "", "header", kHeaderOffset,
                   "header length " + std::to_string(size) + " is not a multiple of 8");
  }
}

// ---------------------------------------------------------------------------
// Section 3: duplicate keys (ST-005), in every object of the document.

// The top-level object's keys are not kept by the parser (json.h,
// visit_member): its duplicates are found here from the entries' names,
// sorted (BY_NAME), and the count of __metadata__ members. That object comes
// first in document order, so a duplicate of it is the one reported, its
// smallest duplicated key; otherwise the parser's first object with one.
bool CheckDuplicateKeys(const JsonDocument& document, const HeaderFacts& header,
                        const std::vector<std::uint32_t>& by_name, Reporter& report) {
  std::optional<std::string> top;
  for (std::size_t k = 1; k < by_name.size() && !top; ++k) {
    const std::string& name = header.NameOf(by_name[k]);
    if (name == header.NameOf(by_name[k - 1])) top = name;
  }
  const std::string metadata_key = "__metadata__";
  if (header.metadata_members > 1 && (!top || metadata_key < *top)) top = metadata_key;
  std::string key;
  // ST-005: a key appears twice in one object, compared after unescaping.
  if (top || FindDuplicateKey(document, &key)) {
    if (top) key = *top;
    return report.Error("ST-005", "", "header", kHeaderOffset,
                        "the key \"" + key + "\" appears twice in one object");
  }
  return true;
}

// ---------------------------------------------------------------------------
// Section 4: __metadata__ (ST-006), read by ReadMetadata.

bool CheckMetadata(const HeaderFacts& header, Reporter& report) {
  if (!header.metadata_problem) return true;
  const EntryProblem& problem = *header.metadata_problem;
  return report.Error("ST-006", "", problem.field, kHeaderOffset, problem.message);
}

// ---------------------------------------------------------------------------
// Section 5: the tensor entries (ST-007..ST-010), visited in name order
// (by_name holds header-order indices: into header.tensors, or header.names
// once names_only).

// RULE for the entry first in name order with a problem, if there is one.
bool ReportFirstProblem(const HeaderFacts& header, const char* rule, const FirstProblem& first,
                        Reporter& report) {
  if (!first) return true;
  const EntryProblem& p = first->second;
  return report.Error(rule, header.NameOf(first->first), p.field, kHeaderOffset, p.message);
}

// ST-007, found by ReadEntryFields. Afterwards the entries' records are
// all there (names_only is set only with a problem).
bool CheckTensorEntries(const HeaderFacts& header, Reporter& report) {
  return ReportFirstProblem(header, "ST-007", header.entry_problem, report);
}

// ST-008: the element count, and for non-block dtypes the size in bits,
// fit in 64 bits. The product is taken left to right over the shape.
bool CheckTensorSizes(HeaderFacts* header, const std::vector<std::uint32_t>& by_name, Reporter& report) {
  for (const std::uint32_t i : by_name) {
    ContainerTensor& tensor = header->tensors[i];
    const int element_bits = DtypeBits(tensor.dtype);  // known: ST-007 passed
    std::uint64_t count = 1;
    for (const std::uint64_t dimension : tensor.shape) {
      // ST-008: the element count overflows.
      if (!MultiplyU64(count, dimension, &count)) {
        return report.Error("ST-008", tensor.name, "shape", kHeaderOffset,
                            "the element count overflows 64 bits");
      }
    }
    tensor.element_count = count;
    std::uint64_t bits = 0;
    // ST-008: the size in bits overflows (not for block dtypes).
    if (!IsBlockDtype(tensor.dtype) && !MultiplyU64(count, static_cast<std::uint64_t>(element_bits), &bits)) {
      return report.Error("ST-008", tensor.name, "shape", kHeaderOffset,
                          "the size in bits overflows 64 bits");
    }
  }
  return true;
}

// ST-009, found by ReadDataOffsets.
bool CheckDataOffsets(const HeaderFacts& header, Reporter& report) {
  return ReportFirstProblem(header, "ST-009", header.offsets_problem, report);
}

// ST-010 (non-block dtypes): end - begin is element count * bits / 8, and
// the bits fill whole bytes.
bool CheckByteLengths(const HeaderFacts& header, const std::vector<std::uint32_t>& by_name,
                      Reporter& report) {
  for (const std::uint32_t i : by_name) {
    const ContainerTensor& tensor = header.tensors[i];
    if (IsBlockDtype(tensor.dtype)) continue;  // checked by RBQ-004
    const std::uint64_t bits = tensor.element_count * static_cast<std::uint64_t>(DtypeBits(tensor.dtype));
    // ST-010: whole bytes, and end - begin = bits / 8.
    if (bits % 8 != 0) {
      return report.Error("ST-010", tensor.name, "data_offsets", kHeaderOffset,
                          "the tensor's " + std::to_string(bits) + " bits do not fill whole bytes");
    }
    if (tensor.end - tensor.begin != bits / 8) {
      return report.Error("ST-010", tensor.name, "data_offsets", kHeaderOffset,
                          "data_offsets cover " + std::to_string(tensor.end - tensor.begin) +
                              " bytes, the shape and dtype need " + std::to_string(bits / 8));
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// Section 6: the data layout (ST-011, ST-012, ST-013), tensors sorted by
// (begin, end, name).

// Rearranges *TENSORS so that position k holds what was at ORDER[k]. Where
// each entry ends up is tracked (at, where), and every swap puts one entry
// in its final place.
void PutInOrder(std::deque<ContainerTensor>* tensors, const std::vector<std::uint32_t>& order) {
  // at[k]: the original index of the entry now at position k; where[i]: the
  // position the entry of original index i is now at.
  std::vector<std::uint32_t> at(order.size());
  std::vector<std::uint32_t> where(order.size());
  for (std::uint32_t k = 0; k < at.size(); ++k) at[k] = where[k] = k;
  for (std::uint32_t k = 0; k < order.size(); ++k) {
    const std::uint32_t from = where[order[k]];  // the entry wanted at k is here now
    if (from == k) continue;
    std::swap((*tensors)[k], (*tensors)[from]);
    where[at[k]] = from;
    at[from] = at[k];
    at[k] = order[k];
    where[order[k]] = k;
  }
}

// ST-011: the tensors cover the data contiguously from offset 0.
bool CheckDataLayout(Reporter& report, const std::deque<ContainerTensor>& tensors,
                     std::uint64_t* last_end) {
  std::uint64_t expected = 0;
  for (const ContainerTensor& tensor : tensors) {
    // ST-011: the tensor begins where the one before it ends.
    if (tensor.begin != expected) {
      return report.Error("ST-011", tensor.name, "data_offsets", kHeaderOffset,
                          tensor.begin > expected
                              ? "a hole before the tensor: it begins at " + std::to_string(tensor.begin) +
                                    ", the data before it ends at " + std::to_string(expected)
                              : "the tensor overlaps the one before it: it begins at " +
                                    std::to_string(tensor.begin) + ", the data before it ends at " +
                                    std::to_string(expected));
    }
    expected = tensor.end;
  }
  *last_end = expected;
  return true;
}

// ST-012 / ST-013: the data section is exactly as long as the last end.
bool CheckDataLength(qd::ByteView file, Reporter& report, const std::deque<ContainerTensor>& tensors,
                     std::uint64_t header_size, std::uint64_t last_end) {
  const std::uint64_t data_start = 8 + header_size;
  const std::uint64_t data_length = static_cast<std::uint64_t>(file.size) - data_start;
  if (last_end < data_length) {
    // ST-012: trailing bytes after the last tensor.
    return report.Error("ST-012", "", "data", AbsoluteOffset(data_start, last_end),
                        "the data section is " + std::to_string(data_length) +
                            " bytes, the tensors end at " + std::to_string(last_end));
  }
  if (last_end > data_length) {
    // ST-013: the last tensor runs past the end of the file.
    const ContainerTensor& last = tensors.back();  // last_end > 0, so there is one
    return report.Error("ST-013", last.name, "data", AbsoluteOffset(data_start, last.begin),
                        "the tensors end at " + std::to_string(last_end) +
                            ", the data section is only " + std::to_string(data_length) + " bytes");
  }
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------
// The container stage, every rule in catalogue order.

bool CheckContainer(qd::ByteView file, const std::string& file_name, qd::Outcome* outcome,
                    Container* container) {
  Reporter report(outcome, file_name);
  std::uint64_t header_size = 0;
  if (!CheckLengthPrefix(file, report, &header_size)) return false;  // ST-001..ST-003
  const std::uint8_t* header = file.data + 8;

  JsonDocument document;
  HeaderFacts facts;
  if (!CheckHeaderJson(header, header_size, report, &document, &facts)) return false;  // ST-004
  CheckHeaderPadding(header, header_size, report);                    // ST-101, ST-102

  // Every top-level key but __metadata__ is a tensor; they are visited in
  // name byte order, for ST-005 too.
  std::vector<std::uint32_t> by_name(facts.EntryCount());
  for (std::uint32_t i = 0; i < by_name.size(); ++i) by_name[i] = i;
  // A merge sort: std::sort's introsort fell back to heapsort on names
  // like t0..t999999 and took eight times as long (issue 9, section 3).
  std::stable_sort(by_name.begin(), by_name.end(), [&](std::uint32_t a, std::uint32_t b) {
    return facts.NameOf(a) < facts.NameOf(b);
  });
  if (!CheckDuplicateKeys(document, facts, by_name, report)) return false;  // ST-005
  document = JsonDocument{};
  if (!CheckMetadata(facts, report)) return false;                    // ST-006
  container->has_metadata = facts.has_metadata;
  container->metadata = std::move(facts.metadata);

  if (!CheckTensorEntries(facts, report)) return false;           // ST-007
  if (!CheckTensorSizes(&facts, by_name, report)) return false;   // ST-008
  if (!CheckDataOffsets(facts, report)) return false;             // ST-009
  if (!CheckByteLengths(facts, by_name, report)) return false;    // ST-010

  std::deque<ContainerTensor> tensors = std::move(facts.tensors);
  facts = HeaderFacts{};
  // Data order, (begin, end, name): the name order made stable-sorted by
  // the offsets, then carried out on the entries by swaps, so no second
  // copy of the entries is made.
  std::vector<std::uint32_t> data_order = std::move(by_name);
  std::stable_sort(data_order.begin(), data_order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return std::tie(tensors[a].begin, tensors[a].end) < std::tie(tensors[b].begin, tensors[b].end);
  });
  PutInOrder(&tensors, data_order);
  std::uint64_t last_end = 0;
  if (!CheckDataLayout(report, tensors, &last_end)) return false;                      // ST-011
  if (!CheckDataLength(file, report, tensors, header_size, last_end)) return false;  // ST-012, ST-013

  container->header_size = header_size;
  container->data_start = 8 + header_size;
  container->tensors = std::move(tensors);
  return true;
}

// ---------------------------------------------------------------------------
// Section 7: decoding the floating point dtypes.

float HalfToFloat(std::uint16_t half) {
  const std::uint32_t sign = (half >> 15) & 0x1;
  const std::uint32_t exponent = (half >> 10) & 0x1F;
  std::uint32_t mantissa = half & 0x3FF;
  std::uint32_t bits = 0;
  if (exponent == 0x1F) {
    // Infinity or NaN: exponent all ones, the payload moves to the top.
    bits = (sign << 31) | 0x7F800000u | (mantissa << 13);
  } else if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign << 31;  // +-0
    } else {
      // Subnormal: mantissa * 2^-24. Shift until the leading one reaches
      // bit 10, lowering the exponent by one per shift.
      int unbiased = -14;
      while ((mantissa & 0x400) == 0) {
        mantissa <<= 1;
        unbiased -= 1;
      }
      mantissa &= 0x3FF;
      bits = (sign << 31) | (static_cast<std::uint32_t>(unbiased + 127) << 23) | (mantissa << 13);
    }
  } else {
    // Normal: rebias the exponent from 15 to 127.
    bits = (sign << 31) | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  }
  float value = 0.0f;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

bool IsFloatDtype(const std::string& dtype) {
  return dtype == "F32" || dtype == "F16" || dtype == "BF16" || dtype == "F64";
}

bool StreamFloatElements(const std::string& dtype, const std::uint8_t* data, std::uint64_t count,
                         std::size_t index, qd::TensorSink& sink) {
  // Each element decodes on its own: rows of one value.
  return StreamRows(sink, index, count, 1, [&](std::uint64_t first, std::uint64_t n, float* out) {
    for (std::uint64_t i = 0; i < n; ++i) out[i] = FloatElement(dtype, data, first + i);
  });
}

bool StreamFloatTensor(qd::ByteView file, const Container& container, const ContainerTensor& tensor,
                       std::size_t index, qd::TensorSink& sink) {
  // ST-010 and ST-013 passed: element_count * size bytes lie inside the file.
  const std::uint8_t* data = file.data + container.data_start + tensor.begin;
  return StreamFloatElements(tensor.dtype, data, tensor.element_count, index, sink);
}

namespace {

// The plan of the floating tensors: the container's own entries, announced
// without copying their names and shapes (issue 9, section 3).
class FloatTensorPlan : public qd::TensorPlan {
 public:
  explicit FloatTensorPlan(const std::vector<const ContainerTensor*>& floats) : floats_(floats) {}
  std::size_t size() const override { return floats_.size(); }
  std::string_view name(std::size_t i) const override { return floats_[i]->name; }
  std::span<const std::uint64_t> shape(std::size_t i) const override { return floats_[i]->shape; }

 private:
  const std::vector<const ContainerTensor*>& floats_;
};

}  // namespace

void StreamFloatTensors(qd::ByteView file, const Container& container, qd::TensorSink& sink) {
  std::vector<const ContainerTensor*> floats;
  floats.reserve(static_cast<std::size_t>(std::count_if(
      container.tensors.begin(), container.tensors.end(),
      [](const ContainerTensor& tensor) { return IsFloatDtype(tensor.dtype); })));  // no regrowth
  for (const ContainerTensor& tensor : container.tensors) {
    if (IsFloatDtype(tensor.dtype)) floats.push_back(&tensor);
  }
  if (!sink.Plan(FloatTensorPlan(floats))) return;
  for (std::size_t i = 0; i < floats.size(); ++i) {
    if (!StreamFloatTensor(file, container, *floats[i], i, sink)) return;
  }
}

float FloatElement(const std::string& dtype, const std::uint8_t* data, std::uint64_t i) {
  if (dtype == "F32") return FloatFromBits(LoadU32(data + 4 * i));
  if (dtype == "F16") return HalfToFloat(LoadU16(data + 2 * i));
  if (dtype == "BF16") return FloatFromBits(static_cast<std::uint32_t>(LoadU16(data + 2 * i)) << 16);
  // F64, rounded to nearest even by the conversion.
  const std::uint64_t bits = LoadU64(data + 8 * i);
  double wide = 0.0;
  std::memcpy(&wide, &bits, sizeof wide);
  return static_cast<float>(wide);
}

qd::Outcome StreamSafetensors(qd::ByteView file, const std::string& file_name, qd::TensorSink& sink) {
  qd::Outcome outcome;
  Container container;
  if (CheckContainer(file, file_name, &outcome, &container)) StreamFloatTensors(file, container, sink);
  return outcome;
}

qd::Outcome ReadSafetensors(qd::ByteView file, const std::string& file_name) {
  return CollectStream([&](qd::TensorSink& sink) { return StreamSafetensors(file, file_name, sink); });
}

}  // namespace qd::oracle
