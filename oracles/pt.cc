// pt.cc: the oracle's torch.save reader, written from docs/pt.md.
//
// Sections:
//   1. little helpers (loads, CRC-32, findings)
//   2. the ZIP container: end records (2.2), central directory (2.3),
//      local headers and descriptors (2.4), overlap, CRC
//   3. records (2.5) and the legacy format (2.6)
//   4. the value model (4.2) and the allow-list (4.3)
//   5. the opcode walk (4.1, 4.4, 4.5, 4.6, 5.1)
//   6. flattening and the value walk (6.1, 6.2)
//   7. materialisation (5.2, 5.3), the structured value graph (6.2) and the
//      decoded output (6.3)
//   8. ReadPtTables: steps 1..7 and the tables; step 8 (the readers of the
//      formats a tensor table holds) is oracles/bnb_pt_layers.cc
//
// Section 6 counts every item of a flattened dict, then every node of the
// value walk, in one node count (so a file cannot name 2^64 entries through
// shared dicts), and section 3 bounds the table entries' names plus the
// materialised tensor bytes by file size + 2^26 bytes (PT-012, "container"),
// so a broadcast view (stride 0) cannot demand unbounded memory.
#include "oracles/pt.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string_view>
#include <utility>

#include "oracles/bytes.h"
#include "oracles/finding.h"
#include "oracles/json.h"
#include "oracles/safetensors.h"

namespace qd::oracle {
namespace {

using u128 = unsigned __int128;

// Section 4.4 limits.
constexpr std::uint64_t kMaxMarks = 256;
constexpr std::uint64_t kMaxStack = 1048576;
constexpr std::uint64_t kMaxMemo = 1048576;
constexpr std::uint64_t kMaxString = 1048576;
constexpr std::uint64_t kMaxLong = 8;
constexpr std::uint64_t kMaxItems = 1048576;
constexpr std::uint64_t kMaxRank = 64;
constexpr std::uint64_t kMaxDepth = 64;
constexpr std::uint64_t kMaxNodes = 1048576;
constexpr std::uint64_t kMaxValuesMade = 2097152;
// The oracle-side output guard (see the top of the file).
constexpr std::uint64_t kOutputSlack = std::uint64_t{1} << 26;
constexpr std::size_t kRenderCap = 4096;

// ---------------------------------------------------------------------------
// Section 1: helpers (little-endian loads: oracles/bytes.h).

// Where the first error goes. The reader functions return false after
// calling Refuse.
struct Report {
  const std::string& file_name;
  qd::Outcome* outcome;

  bool Refuse(const char* rule, const char* field, std::uint64_t offset,
              const std::string& message, const std::string& tensor = std::string()) {
    outcome->findings.push_back(NewFinding(rule, qd::Severity::kError, file_name, tensor, field,
                                           static_cast<std::int64_t>(offset), message));
    outcome->refused = true;
    return false;
  }
  void Warn(const char* rule, const char* field, std::uint64_t offset, const std::string& message) {
    outcome->findings.push_back(NewFinding(rule, qd::Severity::kWarning, file_name, std::string(),
                                           field, static_cast<std::int64_t>(offset), message));
  }
};

}  // namespace

std::uint32_t PtCrc32(const std::uint8_t* bytes, std::uint64_t size) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (std::uint64_t i = 0; i < size; ++i) {
    crc ^= bytes[i];
    for (int bit = 0; bit < 8; ++bit) {
      if ((crc & 1u) != 0) {
        crc = (crc >> 1) ^ 0xEDB88320u;
      } else {
        crc = crc >> 1;
      }
    }
  }
  return crc ^ 0xFFFFFFFFu;
}

namespace {

// ---------------------------------------------------------------------------
// Section 2: the ZIP container.

struct Entry {
  std::uint64_t central = 0;  // offset of the central directory entry
  std::uint16_t flags = 0;
  std::uint32_t crc = 0;
  std::uint64_t size = 0;   // compressed == uncompressed
  std::uint64_t local = 0;  // local header offset h
  std::string name;
  std::uint64_t data_start = 0;  // ds
  std::uint64_t data_end = 0;    // de
  std::uint64_t entry_end = 0;   // de, or after the descriptor
};

struct Archive {
  std::uint64_t cd_off = 0;
  std::uint64_t dir_end = 0;
  std::uint64_t count = 0;
  std::string prefix;  // P
  std::vector<Entry> entries;
};

struct ExtraRecord {
  std::uint16_t id = 0;
  std::uint64_t data = 0;  // absolute offset of the record's data
  std::uint16_t size = 0;
};

// A sequence of (u16 id, u16 length, data) that exactly fills the field,
// no id twice.
bool ParseExtra(const std::uint8_t* file, std::uint64_t begin, std::uint64_t length,
                std::vector<ExtraRecord>* records) {
  records->clear();
  std::set<std::uint16_t> seen;
  std::uint64_t p = begin;
  const std::uint64_t end = begin + length;
  while (p < end) {
    if (end - p < 4) return false;
    ExtraRecord record;
    record.id = LoadU16(file + p);
    record.size = LoadU16(file + p + 2);
    if (end - p - 4 < record.size) return false;
    if (!seen.insert(record.id).second) return false;
    record.data = p + 4;
    records->push_back(record);
    p += 4 + static_cast<std::uint64_t>(record.size);
  }
  return true;
}

const ExtraRecord* FindExtra(const std::vector<ExtraRecord>& records, std::uint16_t id) {
  for (const ExtraRecord& record : records) {
    if (record.id == id) return &record;
  }
  return nullptr;
}

bool StartsWith(const std::uint8_t* data, std::uint64_t size, const std::uint8_t* prefix,
                std::uint64_t prefix_size) {
  if (size < prefix_size) return false;
  return std::memcmp(data, prefix, prefix_size) == 0;
}

// 2.6: the legacy pickle stream's first 14 bytes, or a tar header.
bool IsLegacy(qd::ByteView file) {
  static const std::uint8_t kLegacy[14] = {0x80, 0x02, 0x8A, 0x0A, 0x6C, 0xFC, 0x9C,
                                           0x46, 0xF9, 0x20, 0x6A, 0xA8, 0x50, 0x19};
  if (StartsWith(file.data, file.size, kLegacy, 14)) return true;
  static const std::uint8_t kUstar[5] = {'u', 's', 't', 'a', 'r'};
  return file.size >= 257 + 5 && std::memcmp(file.data + 257, kUstar, 5) == 0;
}

// 2.1: every archive torch writes opens with a local header.
constexpr std::uint8_t kLocalSig[4] = {0x50, 0x4B, 0x03, 0x04};

// 2.2: PT-001 / PT-002.
bool ReadEndRecords(qd::ByteView file, Report& report, Archive* archive) {
  const std::uint8_t* f = file.data;
  const std::uint64_t n = file.size;
  if (!StartsWith(f, n, kLocalSig, 4)) {
    if (IsLegacy(file)) {
      return report.Refuse("PT-001", "format", 0,
                           "pre-zip torch serialization (legacy pickle stream or tar)");
    }
    return report.Refuse("PT-002", "eocd", 0, "the file does not start with a local header");
  }
  if (n < 22) return report.Refuse("PT-002", "eocd", 0, "the file is shorter than 22 bytes");
  const std::uint64_t e = n - 22;
  if (LoadU32(f + e) != 0x06054b50u) {
    return report.Refuse("PT-002", "eocd", e, "no end of central directory record at n - 22");
  }
  if (LoadU16(f + e + 20) != 0) return report.Refuse("PT-002", "eocd", e, "archive comment present");
  if (LoadU16(f + e + 4) != 0 || LoadU16(f + e + 6) != 0) {
    return report.Refuse("PT-002", "eocd", e, "multi-disk archive");
  }
  const std::uint64_t entries_here = LoadU16(f + e + 8);
  std::uint64_t count = LoadU16(f + e + 10);
  std::uint64_t cd_size = LoadU32(f + e + 12);
  std::uint64_t cd_off = LoadU32(f + e + 16);
  if (entries_here != count) {
    return report.Refuse("PT-002", "eocd", e, "entries on this disk differ from total entries");
  }
  std::uint64_t dir_end = e;
  if (e >= 20 && LoadU32(f + e - 20) == 0x07064b50u) {
    const std::uint64_t L = e - 20;
    if (LoadU32(f + L + 4) != 0 || LoadU32(f + L + 16) != 1) {
      return report.Refuse("PT-002", "eocd", e, "zip64 locator names another disk");
    }
    const std::uint64_t z = LoadU64(f + L + 8);
    if (z > L || L - z != 56) {
      return report.Refuse("PT-002", "eocd", e, "zip64 end record not right before the locator");
    }
    if (LoadU32(f + z) != 0x06064b50u || LoadU64(f + z + 4) != 44 || LoadU32(f + z + 16) != 0 ||
        LoadU32(f + z + 20) != 0 || LoadU64(f + z + 24) != LoadU64(f + z + 32)) {
      return report.Refuse("PT-002", "eocd", e, "malformed zip64 end record");
    }
    const std::uint64_t z_here = LoadU64(f + z + 24);
    const std::uint64_t z_count = LoadU64(f + z + 32);
    const std::uint64_t z_size = LoadU64(f + z + 40);
    const std::uint64_t z_off = LoadU64(f + z + 48);
    if ((entries_here != 0xFFFF && entries_here != z_here) || (count != 0xFFFF && count != z_count) ||
        (cd_size != 0xFFFFFFFFu && cd_size != z_size) || (cd_off != 0xFFFFFFFFu && cd_off != z_off)) {
      return report.Refuse("PT-002", "eocd", e, "classic end record disagrees with zip64 record");
    }
    count = z_count;
    cd_size = z_size;
    cd_off = z_off;
    dir_end = z;
  } else {
    if (count == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_off == 0xFFFFFFFFu) {
      return report.Refuse("PT-002", "eocd", e, "saturated end record without zip64 records");
    }
  }
  if (cd_off > dir_end || dir_end - cd_off != cd_size) {
    return report.Refuse("PT-002", "eocd", e, "central directory does not end at the end records");
  }
  if (count < 1) return report.Refuse("PT-002", "eocd", e, "no entries");
  if (static_cast<u128>(count) * 46 > cd_size) {
    return report.Refuse("PT-002", "eocd", e, "more entries than the directory can hold");
  }
  archive->cd_off = cd_off;
  archive->dir_end = dir_end;
  archive->count = count;
  return true;
}

// 2.3 PT-004: the entry name rules; sets archive->prefix for the first.
bool NameIsSafe(const std::string& name, std::string* prefix, bool first) {
  std::size_t bad = 0;
  if (!IsStrictUtf8(reinterpret_cast<const std::uint8_t*>(name.data()), name.size(), &bad)) {
    return false;
  }
  for (const char c : name) {
    const unsigned char b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7F || b == '\\') return false;
  }
  if (!name.empty() && name[0] == '/') return false;
  std::vector<std::string> segments;
  std::string segment;
  for (const char c : name) {
    if (c == '/') {
      segments.push_back(segment);
      segment.clear();
    } else {
      segment.push_back(c);
    }
  }
  segments.push_back(segment);
  if (first) *prefix = segments[0];
  if (segments.size() < 2) return false;
  for (const std::string& s : segments) {
    if (s.empty() || s == "." || s == "..") return false;
  }
  return segments[0] == *prefix;
}

// 2.3: PT-003, PT-004, PT-005 per entry.
bool ReadCentralDirectory(qd::ByteView file, Report& report, Archive* archive) {
  const std::uint8_t* f = file.data;
  std::uint64_t c = archive->cd_off;
  const std::uint64_t end = archive->dir_end;
  std::set<std::string> names;
  std::vector<ExtraRecord> extra;
  for (std::uint64_t i = 0; i < archive->count; ++i) {
    const char* kCd = "central_directory";
    if (end - c < 46) return report.Refuse("PT-003", kCd, c, "central entry truncated");
    if (LoadU32(f + c) != 0x02014b50u) return report.Refuse("PT-003", kCd, c, "bad central signature");
    const std::uint16_t flags = LoadU16(f + c + 8);
    const std::uint16_t method = LoadU16(f + c + 10);
    const std::uint32_t crc = LoadU32(f + c + 16);
    std::uint64_t csize = LoadU32(f + c + 20);
    std::uint64_t usize = LoadU32(f + c + 24);
    const std::uint64_t name_len = LoadU16(f + c + 28);
    const std::uint64_t extra_len = LoadU16(f + c + 30);
    const std::uint64_t comment_len = LoadU16(f + c + 32);
    std::uint64_t disk = LoadU16(f + c + 34);
    std::uint64_t local = LoadU32(f + c + 42);
    const std::uint64_t total = 46 + name_len + extra_len + comment_len;
    if (end - c < total) return report.Refuse("PT-003", kCd, c, "central entry overruns the directory");
    if ((flags & ~0x0808u) != 0) return report.Refuse("PT-003", kCd, c, "flags other than bits 3 and 11");
    if (method != 0) return report.Refuse("PT-003", kCd, c, "method is not stored");
    if (!ParseExtra(f, c + 46 + name_len, extra_len, &extra)) {
      return report.Refuse("PT-003", kCd, c, "malformed extra field");
    }
    const bool sat_u = usize == 0xFFFFFFFFu;
    const bool sat_c = csize == 0xFFFFFFFFu;
    const bool sat_h = local == 0xFFFFFFFFu;
    const bool sat_d = disk == 0xFFFF;
    if (sat_u || sat_c || sat_h || sat_d) {
      const ExtraRecord* z = FindExtra(extra, 0x0001);
      const std::uint64_t need = 8 * ((sat_u ? 1 : 0) + (sat_c ? 1 : 0) + (sat_h ? 1 : 0)) + (sat_d ? 4 : 0);
      if (z == nullptr || z->size < need) {
        return report.Refuse("PT-003", kCd, c, "missing zip64 extra value");
      }
      std::uint64_t p = z->data;
      if (sat_u) { usize = LoadU64(f + p); p += 8; }
      if (sat_c) { csize = LoadU64(f + p); p += 8; }
      if (sat_h) { local = LoadU64(f + p); p += 8; }
      if (sat_d) { disk = LoadU32(f + p); }
    }
    if (disk != 0) return report.Refuse("PT-003", kCd, c, "disk start is not 0");
    if (csize != usize) return report.Refuse("PT-003", kCd, c, "compressed and uncompressed sizes differ");

    Entry entry;
    entry.central = c;
    entry.flags = flags;
    entry.crc = crc;
    entry.size = usize;
    entry.local = local;
    entry.name.assign(reinterpret_cast<const char*>(f + c + 46), name_len);
    if (!NameIsSafe(entry.name, &archive->prefix, i == 0)) {
      return report.Refuse("PT-004", "name", c, "entry name escapes or leaves the archive");
    }
    if (!names.insert(entry.name).second) {
      return report.Refuse("PT-005", "name", c, "two entries have the same name");
    }
    archive->entries.push_back(std::move(entry));
    c += total;
  }
  if (c != end) {
    return report.Refuse("PT-003", "central_directory", c, "central directory has bytes after the last entry");
  }
  return true;
}

// 2.4: PT-006 for one entry; fills data_start, data_end, entry_end.
bool ReadLocalHeader(qd::ByteView file, Report& report, std::uint64_t cd_off, Entry* entry) {
  const std::uint8_t* f = file.data;
  const std::uint64_t h = entry->local;
  const std::uint64_t c = entry->central;
  const char* kLh = "local_header";
  if (h > cd_off || cd_off - h < 30) return report.Refuse("PT-006", kLh, c, "local header outside the entries area");
  if (LoadU32(f + h) != 0x04034b50u) return report.Refuse("PT-006", kLh, c, "bad local header signature");
  const std::uint64_t name_len = LoadU16(f + h + 26);
  const std::uint64_t extra_len = LoadU16(f + h + 28);
  if (cd_off - h - 30 < name_len + extra_len) {
    return report.Refuse("PT-006", kLh, c, "local name or extra outside the entries area");
  }
  if (name_len != entry->name.size() || std::memcmp(f + h + 30, entry->name.data(), name_len) != 0) {
    return report.Refuse("PT-006", kLh, c, "local name differs from the central name");
  }
  if (LoadU16(f + h + 6) != entry->flags) return report.Refuse("PT-006", kLh, c, "local flags differ");
  if (LoadU16(f + h + 8) != 0) return report.Refuse("PT-006", kLh, c, "local method is not stored");
  std::vector<ExtraRecord> extra;
  if (!ParseExtra(f, h + 30 + name_len, extra_len, &extra)) {
    return report.Refuse("PT-006", kLh, c, "malformed local extra field");
  }
  const ExtraRecord* fb = FindExtra(extra, 0x4246);
  if (fb != nullptr) {
    for (std::uint64_t i = 0; i < fb->size; ++i) {
      if (f[fb->data + i] != 0x5A) return report.Refuse("PT-006", kLh, c, "FB padding holds a byte other than Z");
    }
  }
  const std::uint64_t ds = h + 30 + name_len + extra_len;
  if (entry->size > cd_off - ds) return report.Refuse("PT-006", kLh, c, "entry data outside the entries area");
  const std::uint64_t de = ds + entry->size;
  const std::uint32_t lcrc = LoadU32(f + h + 14);
  const std::uint64_t lcsize = LoadU32(f + h + 18);
  const std::uint64_t lusize = LoadU32(f + h + 22);
  const ExtraRecord* zip64 = FindExtra(extra, 0x0001);
  std::uint64_t entry_end = de;
  if ((entry->flags & 0x0008) == 0) {
    if (lcrc != entry->crc) return report.Refuse("PT-006", kLh, c, "local CRC differs");
    bool sizes_ok = lcsize == entry->size && lusize == entry->size;
    if (!sizes_ok && lcsize == 0xFFFFFFFFu && lusize == 0xFFFFFFFFu && zip64 != nullptr &&
        zip64->size >= 16) {
      sizes_ok = LoadU64(f + zip64->data) == entry->size && LoadU64(f + zip64->data + 8) == entry->size;
    }
    if (!sizes_ok) return report.Refuse("PT-006", kLh, c, "local sizes differ");
  } else {
    const bool zeros = lcrc == 0 && lcsize == 0 && lusize == 0;
    const bool copies = lcrc == entry->crc && (lcsize == entry->size || lcsize == 0xFFFFFFFFu) &&
                        (lusize == entry->size || lusize == 0xFFFFFFFFu);
    if (!zeros && !copies) return report.Refuse("PT-006", kLh, c, "local CRC or sizes differ");
    const std::uint64_t length = zip64 != nullptr ? 24 : 16;
    if (cd_off - de < length) return report.Refuse("PT-006", kLh, c, "data descriptor outside the entries area");
    bool ok = LoadU32(f + de) == 0x08074b50u && LoadU32(f + de + 4) == entry->crc;
    if (length == 24) {
      ok = ok && LoadU64(f + de + 8) == entry->size && LoadU64(f + de + 16) == entry->size;
    } else {
      ok = ok && LoadU32(f + de + 8) == entry->size && LoadU32(f + de + 12) == entry->size;
    }
    if (!ok) return report.Refuse("PT-006", kLh, c, "data descriptor disagrees with the central directory");
    entry_end = de + length;
  }
  entry->data_start = ds;
  entry->data_end = de;
  entry->entry_end = entry_end;
  return true;
}

// Entry indices sorted by (local header offset, central position).
std::vector<std::size_t> LocalOrder(const Archive& archive) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < archive.entries.size(); ++i) order.push_back(i);
  std::sort(order.begin(), order.end(), [&archive](std::size_t a, std::size_t b) {
    if (archive.entries[a].local != archive.entries[b].local) {
      return archive.entries[a].local < archive.entries[b].local;
    }
    return a < b;
  });
  return order;
}

// 2.4: PT-006 per entry, PT-007, PT-008 per entry.
bool ReadEntries(qd::ByteView file, Report& report, Archive* archive) {
  for (Entry& entry : archive->entries) {
    if (!ReadLocalHeader(file, report, archive->cd_off, &entry)) return false;
  }
  const std::vector<std::size_t> order = LocalOrder(*archive);
  for (std::size_t k = 1; k < order.size(); ++k) {
    const Entry& previous = archive->entries[order[k - 1]];
    const Entry& entry = archive->entries[order[k]];
    if (entry.local < previous.entry_end) {
      return report.Refuse("PT-007", "local_header", entry.central, "two entries overlap");
    }
  }
  for (const Entry& entry : archive->entries) {
    if (PtCrc32(file.data + entry.data_start, entry.size) != entry.crc) {
      return report.Refuse("PT-008", "crc32", entry.data_start, "CRC-32 differs from the central directory");
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// Section 3: records (2.5).

struct Record {
  std::uint64_t local = 0;
  std::uint64_t data_start = 0;
  std::uint64_t size = 0;
};

struct Records {
  std::map<std::string, Record> by_name;  // record name (without "P/")
  std::vector<std::string> local_order;   // record names in local header order
  bool big_endian = false;
  std::uint64_t pkl_start = 0;
  std::uint64_t pkl_size = 0;
};

bool IsKnownRecord(const std::string& name) {
  if (name == "data.pkl" || name == "version" || name == ".data/version" || name == "byteorder" ||
      name == ".data/serialization_id" || name == ".format_version" || name == ".storage_alignment") {
    return true;
  }
  return name.size() > 5 && name.compare(0, 5, "data/") == 0 && name.find('/', 5) == std::string::npos;
}

bool ReadRecords(qd::ByteView file, Report& report, const Archive& archive, Records* records) {
  const std::size_t skip = archive.prefix.size() + 1;
  for (const Entry& entry : archive.entries) {
    Record record;
    record.local = entry.local;
    record.data_start = entry.data_start;
    record.size = entry.size;
    records->by_name[entry.name.substr(skip)] = record;
  }
  for (const std::size_t i : LocalOrder(archive)) records->local_order.push_back(archive.entries[i].name.substr(skip));

  const auto pkl = records->by_name.find("data.pkl");
  if (pkl == records->by_name.end()) {
    return report.Refuse("PT-009", "data.pkl", archive.cd_off, "no data.pkl record");
  }
  auto version = records->by_name.find(".data/version");
  if (version == records->by_name.end()) version = records->by_name.find("version");
  if (version == records->by_name.end()) {
    return report.Refuse("PT-009", "version", archive.cd_off, "no version record");
  }
  const Record& v = version->second;
  std::string text(reinterpret_cast<const char*>(file.data + v.data_start), v.size);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  bool digits = !text.empty() && text.size() <= 20;
  for (const char ch : text) digits = digits && ch >= '0' && ch <= '9';
  if (!digits) return report.Refuse("PT-009", "version", v.data_start, "version is not a decimal number");

  const auto order = records->by_name.find("byteorder");
  if (order != records->by_name.end()) {
    const std::string value(reinterpret_cast<const char*>(file.data + order->second.data_start),
                            order->second.size);
    if (value != "little" && value != "big") {
      return report.Refuse("PT-010", "byteorder", order->second.data_start,
                           "byteorder is neither little nor big");
    }
    records->big_endian = value == "big";
  }

  std::size_t first = 0;
  while (first + 1 < text.size() && text[first] == '0') ++first;
  if (text.substr(first) != "3") report.Warn("PT-104", "version", v.data_start, "version is not 3");
  for (const std::string& name : records->local_order) {
    if (!IsKnownRecord(name)) {
      report.Warn("PT-101", "record", records->by_name[name].local, "unknown record ignored: " + name);
    }
  }
  records->pkl_start = pkl->second.data_start;
  records->pkl_size = pkl->second.size;
  return true;
}

// ---------------------------------------------------------------------------
// Section 4: the value model and the allow-list.

struct DtypeInfo {
  const char* storage_class;
  const char* torch_name;
  const char* code;
  std::uint64_t item_size;
};

constexpr DtypeInfo kDtypes[10] = {
    {"DoubleStorage", "float64", "F64", 8}, {"FloatStorage", "float32", "F32", 4},
    {"HalfStorage", "float16", "F16", 2},   {"BFloat16Storage", "bfloat16", "BF16", 2},
    {"LongStorage", "int64", "I64", 8},     {"IntStorage", "int32", "I32", 4},
    {"ShortStorage", "int16", "I16", 2},    {"CharStorage", "int8", "I8", 1},
    {"ByteStorage", "uint8", "U8", 1},      {"BoolStorage", "bool", "BOOL", 1}};

// Token ids: callables 0..3, storage classes 10 + dtype index, dtypes 20 + dtype index.
constexpr int kOrderedDict = 0;
constexpr int kRebuildTensorV2 = 1;
constexpr int kRebuildParameter = 2;
constexpr int kTorchSize = 3;
constexpr int kStorageBase = 10;
constexpr int kDtypeBase = 20;

bool IsCallableToken(int token) { return token >= 0 && token <= 3; }

// -1 when (module, name) is not allow-listed (4.3).
int LookupGlobal(std::string_view module, std::string_view name) {
  if (module == "collections" && name == "OrderedDict") return kOrderedDict;
  if (module == "torch._utils" && name == "_rebuild_tensor_v2") return kRebuildTensorV2;
  if (module == "torch._utils" && name == "_rebuild_parameter") return kRebuildParameter;
  if (module == "torch") {
    if (name == "Size") return kTorchSize;
    for (int i = 0; i < 10; ++i) {
      if (name == kDtypes[i].storage_class) return kStorageBase + i;
      if (name == kDtypes[i].torch_name) return kDtypeBase + i;
    }
  }
  return -1;
}

std::string TokenText(int token) {
  if (token == kOrderedDict) return "collections.OrderedDict";
  if (token == kRebuildTensorV2) return "torch._utils._rebuild_tensor_v2";
  if (token == kRebuildParameter) return "torch._utils._rebuild_parameter";
  if (token == kTorchSize) return "torch.Size";
  if (token >= kDtypeBase) return kDtypes[token - kDtypeBase].torch_name;
  return std::string("torch.") + kDtypes[token - kStorageBase].storage_class;
}

enum class Kind : std::uint8_t {
  kNone, kBool, kInt, kFloat, kStr, kTuple, kList, kDict, kSize, kToken, kStorage, kTensor
};

// One value. kBool/kInt: a; kFloat: b (bits); kStr: a = absolute offset,
// b = length; kTuple/kList: a = index into seqs; kDict: index into dicts;
// kSize: index into sizes; kToken: a = token id; kStorage: index into
// storages; kTensor: index into tensors.
struct Node {
  Kind kind = Kind::kNone;
  std::int64_t a = 0;
  std::uint64_t b = 0;
};

struct KeyRef {
  bool is_str = false;
  std::int64_t integer = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

struct KeyLess {
  const std::uint8_t* file = nullptr;
  bool operator()(const KeyRef& x, const KeyRef& y) const {
    if (x.is_str != y.is_str) return x.is_str < y.is_str;
    if (!x.is_str) return x.integer < y.integer;
    const std::string_view sx(reinterpret_cast<const char*>(file + x.offset), x.length);
    const std::string_view sy(reinterpret_cast<const char*>(file + y.offset), y.length);
    return sx < sy;
  }
};

struct Dict {
  explicit Dict(const std::uint8_t* file) : keys(KeyLess{file}) {}
  bool ordered = false;
  bool built = false;
  std::int64_t attrs = -1;  // node of the BUILD state
  std::vector<std::pair<std::uint32_t, std::uint32_t>> items;  // (key node, value node)
  std::set<KeyRef, KeyLess> keys;
};

struct Storage {
  int dtype = 0;
  std::string key;
  std::int64_t numel = 0;
  std::uint64_t data_start = 0;
};

struct Tensor {
  std::uint32_t storage = 0;  // index into storages
  std::int64_t offset = 0;
  std::vector<std::int64_t> size;
  std::vector<std::int64_t> stride;
  std::uint64_t numel = 1;
};

struct Model {
  explicit Model(const std::uint8_t* f) : file(f) {}
  const std::uint8_t* file;
  std::vector<Node> nodes;
  std::vector<std::vector<std::uint32_t>> seqs;
  std::vector<Dict> dicts;
  std::vector<std::vector<std::int64_t>> sizes;
  std::vector<Storage> storages;
  std::vector<Tensor> tensors;

  std::uint32_t Add(Kind kind, std::int64_t a, std::uint64_t b) {
    Node node;
    node.kind = kind;
    node.a = a;
    node.b = b;
    nodes.push_back(node);
    return static_cast<std::uint32_t>(nodes.size() - 1);
  }
  std::uint32_t AddSeq(Kind kind, std::vector<std::uint32_t> items) {
    seqs.push_back(std::move(items));
    return Add(kind, static_cast<std::int64_t>(seqs.size() - 1), 0);
  }
  std::uint32_t AddDict(bool ordered) {
    dicts.emplace_back(file);
    dicts.back().ordered = ordered;
    return Add(Kind::kDict, static_cast<std::int64_t>(dicts.size() - 1), 0);
  }
  std::string_view Str(std::uint32_t node) const {
    return std::string_view(reinterpret_cast<const char*>(file + nodes[node].a), nodes[node].b);
  }
  bool IsEmptyDict(std::uint32_t node) const {
    if (nodes[node].kind != Kind::kDict) return false;
    const Dict& d = dicts[nodes[node].a];
    return d.items.empty() && d.attrs < 0;
  }
  // A tuple or Size of ints, copied out.
  bool IntSequence(std::uint32_t node, std::vector<std::int64_t>* values) const {
    values->clear();
    if (nodes[node].kind == Kind::kSize) {
      *values = sizes[nodes[node].a];
      return true;
    }
    if (nodes[node].kind != Kind::kTuple) return false;
    for (const std::uint32_t item : seqs[nodes[node].a]) {
      if (nodes[item].kind != Kind::kInt) return false;
      values->push_back(nodes[item].a);
    }
    return true;
  }
};

// ---------------------------------------------------------------------------
// Section 5: the opcode walk.

class Walker {
 public:
  Walker(qd::ByteView file, Report& report, const Records& records, Model* model)
      : f_(file.data), report_(report), records_(records), model_(model),
        ds_(records.pkl_start), size_(records.pkl_size) {}

  // The root node on success.
  bool Run(std::uint32_t* root);

  std::set<std::string> named;  // storage keys named by a persistent ID

 private:
  bool Fail(const char* rule, const char* field, const std::string& message) {
    return report_.Refuse(rule, field, ds_ + op_, message);
  }
  bool Malformed(const std::string& message) { return Fail("PT-013", "opcode", message); }
  bool Need(std::uint64_t n) {
    if (size_ - pos_ < n) return Malformed("truncated operand");
    return true;
  }
  // docs/pt.md 4.4: every push makes a new value except BINGET's (Get),
  // counted after the stack limit.
  bool Push(std::uint32_t node, bool new_value = true) {
    if (saved_ + stack_.size() + 1 > kMaxStack) return Fail("PT-012", "stack", "too many stack items");
    if (new_value && !ValueMade()) return false;
    stack_.push_back(node);
    return true;
  }
  bool ValueMade() {
    ++values_made_;
    if (values_made_ > kMaxValuesMade) return Fail("PT-012", "container", "more than 2^21 values created");
    return true;
  }
  std::uint32_t Pop() {
    const std::uint32_t node = stack_.back();
    stack_.pop_back();
    return node;
  }
  bool PopMark(std::vector<std::uint32_t>* items) {
    if (marks_.empty()) return Malformed("no open mark");
    *items = std::move(stack_);
    stack_ = std::move(marks_.back());
    marks_.pop_back();
    saved_ -= stack_.size();
    return true;
  }
  bool Memo(std::uint64_t index) {
    if (stack_.empty()) return Malformed("memo put on an empty stack");
    if (memo_.find(index) == memo_.end() && memo_.size() >= kMaxMemo) {
      return Fail("PT-012", "memo", "too many memo entries");
    }
    memo_[index] = stack_.back();
    return true;
  }
  bool Get(std::uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) return Malformed("memo index not set");
    return Push(it->second, /*new_value=*/false);
  }
  bool String(std::uint64_t length_bytes);
  bool GlobalLine(std::string* line);
  bool PushGlobal(std::string_view module, std::string_view name);
  bool AddItem(std::uint32_t dict, std::uint32_t key, std::uint32_t value);
  bool Append(std::uint32_t list, std::uint32_t value);
  bool Reduce();
  bool RebuildTensor(const std::vector<std::uint32_t>& args, std::uint32_t* result);
  bool Build();
  bool PersistentId();

  const std::uint8_t* f_;
  Report& report_;
  const Records& records_;
  Model* model_;
  std::uint64_t ds_;
  std::uint64_t size_;
  std::uint64_t pos_ = 0;  // relative to ds_
  std::uint64_t op_ = 0;   // position of the current opcode
  std::vector<std::uint32_t> stack_;
  std::vector<std::vector<std::uint32_t>> marks_;
  std::uint64_t saved_ = 0;  // items in the stacks saved by marks
  std::uint64_t size_ints_ = 0;  // ints held by torch.Size values so far (4.4)
  std::uint64_t values_made_ = 0;  // values created by opcodes so far (4.4)
  std::map<std::uint64_t, std::uint32_t> memo_;
  std::map<std::string, std::pair<int, std::int64_t>> storage_keys_;  // key -> (dtype, numel)
};

bool Walker::String(std::uint64_t length_bytes) {
  if (!Need(length_bytes)) return false;
  std::uint64_t n = 0;
  for (std::uint64_t i = 0; i < length_bytes; ++i) n |= static_cast<std::uint64_t>(f_[ds_ + pos_ + i]) << (8 * i);
  pos_ += length_bytes;
  if (n > kMaxString) return Fail("PT-012", "string", "string longer than 1048576 bytes");
  if (!Need(n)) return false;
  std::size_t bad = 0;
  if (!IsStrictUtf8(f_ + ds_ + pos_, n, &bad)) return Malformed("string is not strict UTF-8");
  const std::uint32_t node = model_->Add(Kind::kStr, static_cast<std::int64_t>(ds_ + pos_), n);
  pos_ += n;
  return Push(node);
}

bool Walker::GlobalLine(std::string* line) {
  line->clear();
  for (std::uint64_t i = 0; i < 257; ++i) {
    if (pos_ + i >= size_) return Malformed("GLOBAL line without newline");
    const std::uint8_t b = f_[ds_ + pos_ + i];
    if (b == '\n') {
      pos_ += i + 1;
      return true;
    }
    if (b < 0x20 || b > 0x7E) return Malformed("GLOBAL line byte outside 0x20..0x7E");
    line->push_back(static_cast<char>(b));
  }
  return Malformed("GLOBAL line without newline within 257 bytes");
}

bool Walker::PushGlobal(std::string_view module, std::string_view name) {
  const int token = LookupGlobal(module, name);
  if (token < 0) {
    return Fail("PT-011", "global",
                "global outside the allow-list: " + std::string(module) + "." + std::string(name));
  }
  return Push(model_->Add(Kind::kToken, token, 0));
}

bool Walker::AddItem(std::uint32_t dict_node, std::uint32_t key, std::uint32_t value) {
  const Node& k = model_->nodes[key];
  if (k.kind != Kind::kStr && k.kind != Kind::kInt) return Fail("PT-017", "key", "dict key is not str or int");
  KeyRef ref;
  ref.is_str = k.kind == Kind::kStr;
  if (ref.is_str) {
    ref.offset = static_cast<std::uint64_t>(k.a);
    ref.length = k.b;
  } else {
    ref.integer = k.a;
  }
  Dict& dict = model_->dicts[model_->nodes[dict_node].a];
  if (dict.keys.count(ref) != 0) return Fail("PT-017", "key", "repeated dict key");
  if (dict.items.size() >= kMaxItems) return Fail("PT-012", "container", "too many items in one dict");
  dict.keys.insert(ref);
  dict.items.emplace_back(key, value);
  return true;
}

bool Walker::Append(std::uint32_t list, std::uint32_t value) {
  std::vector<std::uint32_t>& items = model_->seqs[model_->nodes[list].a];
  if (items.size() >= kMaxItems) return Fail("PT-012", "container", "too many items in one list");
  items.push_back(value);
  return true;
}

bool Walker::RebuildTensor(const std::vector<std::uint32_t>& t, std::uint32_t* result) {
  const Model& m = *model_;
  Tensor tensor;
  bool ok = (t.size() == 6 || t.size() == 7) && m.nodes[t[0]].kind == Kind::kStorage &&
            m.nodes[t[1]].kind == Kind::kInt && m.IntSequence(t[2], &tensor.size) &&
            m.IntSequence(t[3], &tensor.stride) && m.nodes[t[4]].kind == Kind::kBool &&
            m.IsEmptyDict(t[5]);
  if (ok && t.size() == 7) ok = m.nodes[t[6]].kind == Kind::kNone || m.IsEmptyDict(t[6]);
  if (!ok) return Fail("PT-014", "args", "_rebuild_tensor_v2 arguments of the wrong form");
  tensor.storage = static_cast<std::uint32_t>(m.nodes[t[0]].a);
  tensor.offset = m.nodes[t[1]].a;
  const Storage& storage = m.storages[tensor.storage];
  if (tensor.size.size() != tensor.stride.size() || tensor.size.size() > kMaxRank) {
    return Fail("PT-016", "shape", "size and stride ranks differ or rank above 64");
  }
  bool negative = tensor.offset < 0;
  for (std::size_t k = 0; k < tensor.size.size(); ++k) {
    negative = negative || tensor.size[k] < 0 || tensor.stride[k] < 0;
  }
  if (negative) return Fail("PT-016", "shape", "negative storage offset, size or stride");
  u128 numel = 1;
  for (const std::int64_t s : tensor.size) {
    numel *= static_cast<u128>(s);
    if (numel > static_cast<u128>(INT64_MAX)) return Fail("PT-016", "shape", "element count overflows");
  }
  const u128 limit = static_cast<u128>(storage.numel);
  if (numel > 0) {
    u128 last = static_cast<u128>(tensor.offset);
    bool inside = last < limit;
    for (std::size_t k = 0; inside && k < tensor.size.size(); ++k) {
      last += static_cast<u128>(tensor.size[k] - 1) * static_cast<u128>(tensor.stride[k]);
      inside = last < limit;
    }
    if (!inside) return Fail("PT-016", "storage_offset", "view beyond its storage");
  } else if (static_cast<u128>(tensor.offset) > limit) {
    return Fail("PT-016", "storage_offset", "storage offset beyond its storage");
  }
  tensor.numel = static_cast<std::uint64_t>(numel);
  model_->tensors.push_back(std::move(tensor));
  *result = model_->Add(Kind::kTensor, static_cast<std::int64_t>(model_->tensors.size() - 1), 0);
  return true;
}

bool Walker::Reduce() {
  if (stack_.size() < 2) return Malformed("stack underflow");
  const std::uint32_t args = Pop();
  const Node& callable = model_->nodes[stack_.back()];
  if (callable.kind != Kind::kToken || !IsCallableToken(static_cast<int>(callable.a))) {
    return Fail("PT-011", "reduce", "REDUCE of something that is not an allowed callable");
  }
  if (model_->nodes[args].kind != Kind::kTuple) return Fail("PT-014", "args", "REDUCE arguments are not a tuple");
  const std::vector<std::uint32_t> t = model_->seqs[model_->nodes[args].a];
  std::uint32_t result = 0;
  switch (static_cast<int>(callable.a)) {
    case kOrderedDict:
      if (!t.empty()) return Fail("PT-014", "args", "OrderedDict takes ()");
      result = model_->AddDict(true);
      break;
    case kRebuildTensorV2:
      if (!RebuildTensor(t, &result)) return false;
      break;
    case kRebuildParameter:
      if (t.size() != 3 || model_->nodes[t[0]].kind != Kind::kTensor ||
          model_->nodes[t[1]].kind != Kind::kBool || !model_->IsEmptyDict(t[2])) {
        return Fail("PT-014", "args", "_rebuild_parameter takes (tensor, bool, empty dict)");
      }
      result = t[0];
      break;
    default: {  // kTorchSize
      std::vector<std::int64_t> values;
      if (t.size() != 1 || !model_->IntSequence(t[0], &values)) {
        return Fail("PT-014", "args", "torch.Size takes (tuple of ints,)");
      }
      // docs/pt.md 4.4: all torch.Size values of a file hold at most 2^20 ints.
      size_ints_ += values.size();
      if (size_ints_ > kMaxItems) return Fail("PT-012", "container", "too many torch.Size items in the file");
      model_->sizes.push_back(std::move(values));
      result = model_->Add(Kind::kSize, static_cast<std::int64_t>(model_->sizes.size() - 1), 0);
      break;
    }
  }
  if (!ValueMade()) return false;  // the REDUCE result (4.4)
  stack_.back() = result;
  return true;
}

bool Walker::Build() {
  if (stack_.size() < 2) return Malformed("stack underflow");
  const std::uint32_t state = Pop();
  const Node& target = model_->nodes[stack_.back()];
  if (target.kind != Kind::kDict || !model_->dicts[target.a].ordered) {
    return Fail("PT-011", "build", "BUILD on something other than an ordered dict");
  }
  Dict& dict = model_->dicts[target.a];
  bool ok = !dict.built && model_->nodes[state].kind == Kind::kDict &&
            !model_->dicts[model_->nodes[state].a].ordered;
  if (ok) {
    const Dict& s = model_->dicts[model_->nodes[state].a];
    for (const auto& item : s.items) ok = ok && model_->nodes[item.first].kind == Kind::kStr;
  }
  if (!ok) return Fail("PT-014", "args", "BUILD state is not a plain dict of str keys, or a second BUILD");
  dict.built = true;
  dict.attrs = state;
  return true;
}

bool Walker::PersistentId() {
  if (stack_.empty()) return Malformed("stack underflow");
  const std::uint32_t pid = Pop();
  const Model& m = *model_;
  bool ok = m.nodes[pid].kind == Kind::kTuple && m.seqs[m.nodes[pid].a].size() == 5;
  std::vector<std::uint32_t> t;
  if (ok) t = m.seqs[m.nodes[pid].a];
  ok = ok && m.nodes[t[0]].kind == Kind::kStr && m.Str(t[0]) == "storage";
  ok = ok && m.nodes[t[1]].kind == Kind::kToken && m.nodes[t[1]].a >= kStorageBase &&
       m.nodes[t[1]].a < kStorageBase + 10;
  ok = ok && m.nodes[t[2]].kind == Kind::kStr && m.nodes[t[2]].b >= 1 && m.nodes[t[2]].b <= 64;
  if (ok) {
    for (const char ch : m.Str(t[2])) {
      const bool word = (ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_';
      ok = ok && word;
    }
  }
  ok = ok && m.nodes[t[3]].kind == Kind::kStr && m.nodes[t[4]].kind == Kind::kInt && m.nodes[t[4]].a >= 0;
  if (!ok) return Fail("PT-015", "persistent_id", "persistent ID is not a storage ID");
  Storage storage;
  storage.dtype = static_cast<int>(m.nodes[t[1]].a - kStorageBase);
  storage.key = std::string(m.Str(t[2]));
  storage.numel = m.nodes[t[4]].a;
  const auto record = records_.by_name.find("data/" + storage.key);
  if (record == records_.by_name.end()) return Fail("PT-015", "storage", "no record data/" + storage.key);
  const auto earlier = storage_keys_.find(storage.key);
  if (earlier != storage_keys_.end() &&
      (earlier->second.first != storage.dtype || earlier->second.second != storage.numel)) {
    return Fail("PT-015", "storage", "storage key reused with another dtype or numel");
  }
  if (static_cast<u128>(storage.numel) * kDtypes[storage.dtype].item_size != record->second.size) {
    return Fail("PT-015", "storage", "storage record length is not numel * item size");
  }
  storage_keys_[storage.key] = std::make_pair(storage.dtype, storage.numel);
  named.insert(storage.key);
  storage.data_start = record->second.data_start;
  model_->storages.push_back(std::move(storage));
  return Push(model_->Add(Kind::kStorage, static_cast<std::int64_t>(model_->storages.size() - 1), 0));
}

bool Walker::Run(std::uint32_t* root) {
  bool first = true;
  while (true) {
    op_ = pos_;
    if (pos_ >= size_) {
      op_ = size_;
      return Malformed("data.pkl ends without STOP");
    }
    const std::uint8_t op = f_[ds_ + pos_];
    pos_ += 1;
    if (first && op != 0x80) return Malformed("data.pkl does not start with PROTO");
    const bool was_first = first;
    first = false;
    switch (op) {
      case 0x80: {  // PROTO
        if (!was_first) return Malformed("PROTO after the first opcode");
        if (!Need(1)) return false;
        const std::uint8_t v = f_[ds_ + pos_];
        pos_ += 1;
        if (v < 2 || v > 5) return Malformed("protocol outside 2..5");
        break;
      }
      case 0x95: {  // FRAME
        if (!Need(8)) return false;
        const std::uint64_t len = LoadU64(f_ + ds_ + pos_);
        pos_ += 8;
        if (len > size_ - pos_) return Malformed("FRAME longer than the bytes left");
        break;
      }
      case 0x28:  // MARK
        if (marks_.size() >= kMaxMarks) return Fail("PT-012", "marks", "more than 256 open marks");
        saved_ += stack_.size();
        marks_.push_back(std::move(stack_));
        stack_.clear();
        break;
      case 0x29:  // EMPTY_TUPLE
        if (!Push(model_->AddSeq(Kind::kTuple, {}))) return false;
        break;
      case 0x5D:  // EMPTY_LIST
        if (!Push(model_->AddSeq(Kind::kList, {}))) return false;
        break;
      case 0x7D:  // EMPTY_DICT
        if (!Push(model_->AddDict(false))) return false;
        break;
      case 0x74: {  // TUPLE
        std::vector<std::uint32_t> items;
        if (!PopMark(&items)) return false;
        if (!Push(model_->AddSeq(Kind::kTuple, std::move(items)))) return false;
        break;
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1/2/3
        const std::size_t k = static_cast<std::size_t>(op - 0x84);
        if (stack_.size() < k) return Malformed("stack underflow");
        std::vector<std::uint32_t> items(stack_.end() - static_cast<std::ptrdiff_t>(k), stack_.end());
        stack_.resize(stack_.size() - k);
        if (!Push(model_->AddSeq(Kind::kTuple, std::move(items)))) return false;
        break;
      }
      case 0x4E:  // NONE
        if (!Push(model_->Add(Kind::kNone, 0, 0))) return false;
        break;
      case 0x88:
      case 0x89:  // NEWTRUE / NEWFALSE
        if (!Push(model_->Add(Kind::kBool, op == 0x88 ? 1 : 0, 0))) return false;
        break;
      case 0x4B:  // BININT1
        if (!Need(1)) return false;
        pos_ += 1;
        if (!Push(model_->Add(Kind::kInt, f_[ds_ + pos_ - 1], 0))) return false;
        break;
      case 0x4D:  // BININT2
        if (!Need(2)) return false;
        pos_ += 2;
        if (!Push(model_->Add(Kind::kInt, LoadU16(f_ + ds_ + pos_ - 2), 0))) return false;
        break;
      case 0x4A: {  // BININT
        if (!Need(4)) return false;
        const std::uint32_t raw = LoadU32(f_ + ds_ + pos_);
        pos_ += 4;
        const std::int64_t value = raw >= 0x80000000u ? static_cast<std::int64_t>(raw) - 4294967296LL
                                                      : static_cast<std::int64_t>(raw);
        if (!Push(model_->Add(Kind::kInt, value, 0))) return false;
        break;
      }
      case 0x8A: {  // LONG1
        if (!Need(1)) return false;
        const std::uint64_t n = f_[ds_ + pos_];
        pos_ += 1;
        if (n > kMaxLong) return Fail("PT-012", "integer", "LONG1 longer than 8 bytes");
        if (!Need(n)) return false;
        std::uint64_t bits = 0;
        for (std::uint64_t i = 0; i < n; ++i) bits |= static_cast<std::uint64_t>(f_[ds_ + pos_ + i]) << (8 * i);
        if (n > 0 && n < 8 && (f_[ds_ + pos_ + n - 1] & 0x80) != 0) bits |= ~std::uint64_t{0} << (8 * n);
        pos_ += n;
        std::int64_t value = 0;
        std::memcpy(&value, &bits, sizeof value);
        if (!Push(model_->Add(Kind::kInt, value, 0))) return false;
        break;
      }
      case 0x47: {  // BINFLOAT, big-endian
        if (!Need(8)) return false;
        std::uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | f_[ds_ + pos_ + i];
        pos_ += 8;
        if (!Push(model_->Add(Kind::kFloat, 0, bits))) return false;
        break;
      }
      case 0x58:  // BINUNICODE
        if (!String(4)) return false;
        break;
      case 0x8C:  // SHORT_BINUNICODE
        if (!String(1)) return false;
        break;
      case 0x8D:  // BINUNICODE8
        if (!String(8)) return false;
        break;
      case 0x71:  // BINPUT
        if (!Need(1)) return false;
        pos_ += 1;
        if (!Memo(f_[ds_ + pos_ - 1])) return false;
        break;
      case 0x72:  // LONG_BINPUT
        if (!Need(4)) return false;
        pos_ += 4;
        if (!Memo(LoadU32(f_ + ds_ + pos_ - 4))) return false;
        break;
      case 0x94:  // MEMOIZE
        if (!Memo(memo_.size())) return false;
        break;
      case 0x68:  // BINGET
        if (!Need(1)) return false;
        pos_ += 1;
        if (!Get(f_[ds_ + pos_ - 1])) return false;
        break;
      case 0x6A:  // LONG_BINGET
        if (!Need(4)) return false;
        pos_ += 4;
        if (!Get(LoadU32(f_ + ds_ + pos_ - 4))) return false;
        break;
      case 0x63: {  // GLOBAL
        std::string module;
        std::string name;
        if (!GlobalLine(&module) || !GlobalLine(&name)) return false;
        if (!PushGlobal(module, name)) return false;
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        if (stack_.size() < 2) return Malformed("stack underflow");
        const std::uint32_t name = Pop();
        const std::uint32_t module = Pop();
        if (model_->nodes[name].kind != Kind::kStr || model_->nodes[module].kind != Kind::kStr) {
          return Malformed("STACK_GLOBAL operands are not str");
        }
        if (!PushGlobal(model_->Str(module), model_->Str(name))) return false;
        break;
      }
      case 0x52:  // REDUCE
        if (!Reduce()) return false;
        break;
      case 0x62:  // BUILD
        if (!Build()) return false;
        break;
      case 0x51:  // BINPERSID
        if (!PersistentId()) return false;
        break;
      case 0x73: {  // SETITEM
        if (stack_.size() < 3) return Malformed("stack underflow");
        const std::uint32_t value = Pop();
        const std::uint32_t key = Pop();
        if (model_->nodes[stack_.back()].kind != Kind::kDict) return Malformed("SETITEM on something other than a dict");
        if (!AddItem(stack_.back(), key, value)) return false;
        break;
      }
      case 0x75: {  // SETITEMS
        std::vector<std::uint32_t> items;
        if (!PopMark(&items)) return false;
        if (stack_.empty()) return Malformed("stack underflow");
        if (items.size() % 2 != 0) return Malformed("SETITEMS with an odd count");
        if (model_->nodes[stack_.back()].kind != Kind::kDict) return Malformed("SETITEMS on something other than a dict");
        for (std::size_t i = 0; i < items.size(); i += 2) {
          if (!AddItem(stack_.back(), items[i], items[i + 1])) return false;
        }
        break;
      }
      case 0x61: {  // APPEND
        if (stack_.size() < 2) return Malformed("stack underflow");
        const std::uint32_t value = Pop();
        if (model_->nodes[stack_.back()].kind != Kind::kList) return Malformed("APPEND on something other than a list");
        if (!Append(stack_.back(), value)) return false;
        break;
      }
      case 0x65: {  // APPENDS
        std::vector<std::uint32_t> items;
        if (!PopMark(&items)) return false;
        if (stack_.empty()) return Malformed("stack underflow");
        if (model_->nodes[stack_.back()].kind != Kind::kList) return Malformed("APPENDS on something other than a list");
        for (const std::uint32_t item : items) {
          if (!Append(stack_.back(), item)) return false;
        }
        break;
      }
      case 0x2E: {  // STOP
        if (!marks_.empty()) return Malformed("STOP with an open mark");
        if (stack_.size() != 1) return Malformed("STOP with other than exactly one value");
        if (pos_ < size_) {
          op_ = pos_;
          return Malformed("bytes after STOP");
        }
        if (model_->nodes[stack_[0]].kind != Kind::kDict) return Fail("PT-017", "root", "the root is not a dict");
        *root = stack_[0];
        return true;
      }
      case 0x81:
      case 0x92:
      case 0x69:
      case 0x6F:
      case 0x82:
      case 0x83:
      case 0x84:
        return Fail("PT-011", "opcode", "opcode that constructs or names a callable");
      default:
        return Malformed("opcode outside the subset");
    }
  }
}

// ---------------------------------------------------------------------------
// Section 6: flattening and the value walk.

struct TableEntry {
  std::string name;
  std::uint32_t node = 0;
  bool is_tensor = false;
  std::uint64_t depth = 0;  // of the value itself: its dict's depth + 1
};

class Flattener {
 public:
  Flattener(Report& report, const Model& model, std::uint64_t pkl_start, std::uint64_t file_size)
      : report_(report), model_(model), offset_(pkl_start),
        budget_(static_cast<u128>(file_size) + kOutputSlack) {}

  bool Flatten(std::uint32_t dict_node, const std::string& prefix, std::uint64_t depth);
  // Section 6.2, after the whole root is flattened: every value entry in
  // table order.
  bool WalkValues();

  std::vector<TableEntry> table;

 private:
  bool Fail(const char* rule, const char* field, const std::string& message,
            const std::string& tensor = std::string()) {
    return report_.Refuse(rule, field, offset_, message, tensor);
  }
  bool Visit(std::uint64_t depth) {
    visits_ += 1;
    if (visits_ > kMaxNodes) return Fail("PT-012", "depth", "more than 1048576 nodes visited");
    if (depth > kMaxDepth) return Fail("PT-012", "depth", "nesting deeper than 64");
    return true;
  }
  // One item of a flattened dict (section 6.1: every item is one visit).
  bool Count() {
    visits_ += 1;
    if (visits_ > kMaxNodes) return Fail("PT-012", "depth", "more than 1048576 nodes visited");
    return true;
  }
  bool Spend(u128 bytes) {
    used_ += bytes;
    if (used_ > budget_) return Fail("PT-012", "container", "flattened names and tensor bytes exceed file size + 2^26");
    return true;
  }
  bool Walk(std::uint32_t node, std::uint64_t depth);

  Report& report_;
  const Model& model_;
  std::uint64_t offset_;
  u128 budget_;
  u128 used_ = 0;
  std::uint64_t visits_ = 0;
  std::set<std::string> names_;
};

bool Flattener::Walk(std::uint32_t node, std::uint64_t depth) {
  if (!Visit(depth)) return false;
  const Node& n = model_.nodes[node];
  if (n.kind == Kind::kTuple || n.kind == Kind::kList) {
    for (const std::uint32_t item : model_.seqs[n.a]) {
      if (!Walk(item, depth + 1)) return false;
    }
  } else if (n.kind == Kind::kDict) {
    const Dict& dict = model_.dicts[n.a];
    for (const auto& item : dict.items) {
      if (!Walk(item.second, depth + 1)) return false;
    }
    if (dict.attrs >= 0 && !Walk(static_cast<std::uint32_t>(dict.attrs), depth + 1)) return false;
  }
  return true;
}

bool Flattener::Flatten(std::uint32_t dict_node, const std::string& prefix, std::uint64_t depth) {
  if (depth > kMaxDepth) return Fail("PT-012", "depth", "dicts nested deeper than 64");
  const Dict& dict = model_.dicts[model_.nodes[dict_node].a];
  for (const auto& item : dict.items) {
    if (!Count()) return false;  // every item of a flattened dict is one visit
    const Node& key = model_.nodes[item.first];
    std::string text;
    if (key.kind == Kind::kStr) {
      text = std::string(model_.Str(item.first));
    } else {
      text = std::to_string(key.a);
    }
    if (text.empty()) return Fail("PT-017", "key", "empty dict key");
    const std::string name = prefix + text;
    const Node& value = model_.nodes[item.second];
    if (value.kind == Kind::kDict) {
      if (!Flatten(item.second, name + ".", depth + 1)) return false;
      continue;
    }
    if (names_.count(name) != 0) return Fail("PT-017", "key", "two flattened names collide", name);
    names_.insert(name);
    // Section 3: a table entry's name bytes, then a tensor's C-order bytes.
    if (!Spend(name.size())) return false;
    TableEntry entry;
    entry.name = name;
    entry.node = item.second;
    entry.is_tensor = value.kind == Kind::kTensor;
    entry.depth = depth + 1;
    if (entry.is_tensor) {
      const Tensor& tensor = model_.tensors[value.a];
      const Storage& storage = model_.storages[tensor.storage];
      if (!Spend(static_cast<u128>(tensor.numel) * kDtypes[storage.dtype].item_size)) return false;
    }
    table.push_back(std::move(entry));
  }
  return true;
}

bool Flattener::WalkValues() {
  for (const TableEntry& entry : table) {
    if (!entry.is_tensor && !Walk(entry.node, entry.depth)) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Section 7: materialisation, the structured value graph and the decoded
// output.

// 5.3 / 6.4: where an accepted tensor's elements lie. begin and end are
// saturated at 2^64 - 1: a broadcast view inside a value (not bounded by
// section 3) can describe more bytes than that.
PtTensorLayout LayoutOf(const Model& model, const Tensor& tensor, bool big_endian) {
  const Storage& storage = model.storages[tensor.storage];
  const std::uint64_t isz = kDtypes[storage.dtype].item_size;
  PtTensorLayout layout;
  layout.storage_start = storage.data_start;
  layout.item_size = isz;
  layout.storage_offset = static_cast<std::uint64_t>(tensor.offset);  // >= 0 (5.1)
  for (const std::int64_t stride : tensor.stride) {
    layout.stride.push_back(static_cast<std::uint64_t>(stride));
  }
  const u128 cap = ~std::uint64_t{0};
  const u128 begin = static_cast<u128>(storage.data_start) + static_cast<u128>(tensor.offset) * isz;
  const u128 end = begin + static_cast<u128>(tensor.numel) * isz;
  layout.begin = static_cast<std::uint64_t>(begin < cap ? begin : cap);
  layout.end = static_cast<std::uint64_t>(end < cap ? end : cap);
  layout.big_endian = big_endian;
  return layout;
}

std::vector<std::uint64_t> ShapeOf(const Tensor& tensor) {
  std::vector<std::uint64_t> shape;
  for (const std::int64_t s : tensor.size) shape.push_back(static_cast<std::uint64_t>(s));
  return shape;
}

qd::DecodedTensor Decode(const PtTensorBytes& entry) {
  qd::DecodedTensor decoded;
  decoded.name = entry.name;
  decoded.shape = entry.shape;
  const std::uint8_t* p = entry.bytes.data();
  std::uint64_t isz = 4;
  if (entry.dtype == "F16" || entry.dtype == "BF16") isz = 2;
  if (entry.dtype == "F64") isz = 8;
  const std::uint64_t count = entry.bytes.size() / isz;
  decoded.values.resize(count);
  for (std::uint64_t i = 0; i < count; ++i) decoded.values[i] = FloatElement(entry.dtype, p, i);
  return decoded;
}

// The value table's text form (pt.h).
void Render(const Model& model, std::uint32_t node, std::string* out) {
  if (out->size() >= kRenderCap) return;
  const Node& n = model.nodes[node];
  switch (n.kind) {
    case Kind::kNone:
      *out += "None";
      break;
    case Kind::kBool:
      *out += n.a != 0 ? "True" : "False";
      break;
    case Kind::kInt:
      *out += std::to_string(n.a);
      break;
    case Kind::kFloat: {
      double value = 0.0;
      std::memcpy(&value, &n.b, sizeof value);
      char buffer[64];
      std::snprintf(buffer, sizeof buffer, "%.17g", value);
      *out += buffer;
      break;
    }
    case Kind::kStr: {
      *out += '\'';
      for (const char ch : model.Str(node)) {
        if (ch == '\\' || ch == '\'') *out += '\\';
        *out += ch;
        if (out->size() >= kRenderCap) return;
      }
      *out += '\'';
      break;
    }
    case Kind::kTuple:
    case Kind::kList: {
      const std::vector<std::uint32_t>& items = model.seqs[n.a];
      *out += n.kind == Kind::kTuple ? '(' : '[';
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0) *out += ", ";
        Render(model, items[i], out);
        if (out->size() >= kRenderCap) return;
      }
      if (n.kind == Kind::kTuple && items.size() == 1) *out += ',';
      *out += n.kind == Kind::kTuple ? ')' : ']';
      break;
    }
    case Kind::kDict: {
      const Dict& dict = model.dicts[n.a];
      if (dict.ordered) *out += "OrderedDict(";
      *out += '{';
      for (std::size_t i = 0; i < dict.items.size(); ++i) {
        if (i > 0) *out += ", ";
        Render(model, dict.items[i].first, out);
        *out += ": ";
        Render(model, dict.items[i].second, out);
        if (out->size() >= kRenderCap) return;
      }
      *out += '}';
      if (dict.attrs >= 0) {
        *out += " attrs=";
        Render(model, static_cast<std::uint32_t>(dict.attrs), out);
      }
      if (dict.ordered) *out += ')';
      break;
    }
    case Kind::kSize: {
      *out += "torch.Size([";
      const std::vector<std::int64_t>& values = model.sizes[n.a];
      for (std::size_t i = 0; i < values.size(); ++i) {
        if (i > 0) *out += ", ";
        *out += std::to_string(values[i]);
      }
      *out += "])";
      break;
    }
    case Kind::kToken:
      *out += TokenText(static_cast<int>(n.a));
      break;
    case Kind::kStorage: {
      const Storage& storage = model.storages[n.a];
      *out += std::string("storage(") + kDtypes[storage.dtype].code + ", '" + storage.key + "', " +
              std::to_string(storage.numel) + ")";
      break;
    }
    case Kind::kTensor: {
      const Tensor& tensor = model.tensors[n.a];
      *out += std::string("tensor(") + kDtypes[model.storages[tensor.storage].dtype].code + ", [";
      for (std::size_t i = 0; i < tensor.size.size(); ++i) {
        if (i > 0) *out += ", ";
        *out += std::to_string(tensor.size[i]);
      }
      *out += "])";
      break;
    }
  }
}

// The structured value table (pt.h's PtValueGraph). Each model node is
// exported once, so sharing stays sharing and the graph is no larger than
// what data.pkl built; the recursion is as deep as the value walk's 64.
class GraphExport {
 public:
  GraphExport(const Model& model, bool big_endian, PtValueGraph* graph)
      : model_(model), big_endian_(big_endian), graph_(graph) {}

  std::uint32_t Add(std::uint32_t node) {
    const auto done = done_.find(node);
    if (done != done_.end()) return done->second;
    const std::uint32_t index = static_cast<std::uint32_t>(graph_->nodes.size());
    graph_->nodes.emplace_back();
    done_[node] = index;
    PtValueNode out;  // filled here, stored after the children (nodes may move)
    const Node& n = model_.nodes[node];
    switch (n.kind) {
      case Kind::kNone:
        out.kind = PtValueKind::kNone;
        break;
      case Kind::kBool:
        out.kind = PtValueKind::kBool;
        out.integer = n.a;
        break;
      case Kind::kInt:
        out.kind = PtValueKind::kInt;
        out.integer = n.a;
        break;
      case Kind::kFloat:
        out.kind = PtValueKind::kFloat;
        std::memcpy(&out.number, &n.b, sizeof out.number);
        break;
      case Kind::kStr:
        out.kind = PtValueKind::kStr;
        out.text = std::string(model_.Str(node));
        break;
      case Kind::kTuple:
      case Kind::kList:
        out.kind = n.kind == Kind::kTuple ? PtValueKind::kTuple : PtValueKind::kList;
        for (const std::uint32_t item : model_.seqs[n.a]) out.items.push_back(Add(item));
        break;
      case Kind::kDict: {
        const Dict& dict = model_.dicts[n.a];
        out.kind = PtValueKind::kDict;
        out.ordered = dict.ordered;
        for (const auto& item : dict.items) {
          out.items.push_back(Add(item.first));
          out.items.push_back(Add(item.second));
        }
        if (dict.attrs >= 0) out.attrs = Add(static_cast<std::uint32_t>(dict.attrs));
        break;
      }
      case Kind::kSize:
        out.kind = PtValueKind::kSize;
        out.ints = model_.sizes[n.a];
        break;
      case Kind::kToken: {
        const int token = static_cast<int>(n.a);
        out.kind = token >= kDtypeBase ? PtValueKind::kDtype : PtValueKind::kToken;
        out.text = TokenText(token);
        break;
      }
      case Kind::kStorage: {
        const Storage& storage = model_.storages[n.a];
        out.kind = PtValueKind::kStorage;
        out.dtype = kDtypes[storage.dtype].code;
        out.text = storage.key;
        out.integer = storage.numel;
        break;
      }
      case Kind::kTensor: {
        const Tensor& tensor = model_.tensors[n.a];
        out.kind = PtValueKind::kTensor;
        out.dtype = kDtypes[model_.storages[tensor.storage].dtype].code;
        out.shape = ShapeOf(tensor);
        out.layout = LayoutOf(model_, tensor, big_endian_);
        break;
      }
    }
    graph_->nodes[index] = std::move(out);
    return index;
  }

 private:
  const Model& model_;
  bool big_endian_;
  PtValueGraph* graph_;
  std::map<std::uint32_t, std::uint32_t> done_;
};

}  // namespace

// ---------------------------------------------------------------------------
// Section 8 steps 1..7: ReadPtTables.

qd::Outcome ReadPtTables(qd::ByteView file, const std::string& file_name, bool want_values,
                         PtGraphWanted graph_wanted, PtTables* tables) {
  *tables = PtTables();
  qd::Outcome outcome;
  Report report{file_name, &outcome};
  if (file.data == nullptr && file.size != 0) {
    report.Refuse("PT-002", "eocd", 0, "no bytes");
    return outcome;
  }
  Archive archive;
  if (!ReadEndRecords(file, report, &archive)) return outcome;          // step 1
  if (!ReadCentralDirectory(file, report, &archive)) return outcome;    // step 2
  if (!ReadEntries(file, report, &archive)) return outcome;             // step 3
  Records records;
  if (!ReadRecords(file, report, archive, &records)) return outcome;    // step 4

  Model model(file.data);
  Walker walker(file, report, records, &model);
  std::uint32_t root = 0;
  if (!walker.Run(&root)) return outcome;                               // step 5
  Flattener flattener(report, model, records.pkl_start, file.size);
  if (!flattener.Flatten(root, "", 1) || !flattener.WalkValues()) return outcome;  // step 6
  for (const std::string& name : records.local_order) {                 // step 7
    if (name.size() > 5 && name.compare(0, 5, "data/") == 0 && name.find('/', 5) == std::string::npos &&
        walker.named.count(name.substr(5)) == 0) {
      report.Warn("PT-102", "storage", records.by_name[name].local, "storage record not referenced: " + name);
    }
  }

  // The tensor table, the value table's text and the graph of the entries
  // the caller wants.
  std::vector<PtTensorBytes>& table = tables->tensors;
  PtValueGraph& graph = tables->graph;
  GraphExport exporter(model, records.big_endian, &graph);
  for (const TableEntry& entry : flattener.table) {
    if (!entry.is_tensor) {
      const Kind kind = model.nodes[entry.node].kind;
      if (graph_wanted == nullptr || graph_wanted(entry.name, kind == Kind::kTuple || kind == Kind::kList)) {
        PtValueRoot root;
        root.name = entry.name;
        root.node = exporter.Add(entry.node);
        graph.entries.push_back(std::move(root));
      }
      if (want_values) {
        PtValueEntry value;
        value.name = entry.name;
        Render(model, entry.node, &value.text);
        if (value.text.size() >= kRenderCap) {
          value.text.resize(kRenderCap);
          value.text += "...";
        }
        tables->values.push_back(std::move(value));
      }
      continue;
    }
    const Tensor& tensor = model.tensors[model.nodes[entry.node].a];
    const Storage& storage = model.storages[tensor.storage];
    PtTensorBytes bytes;
    bytes.name = entry.name;
    bytes.dtype = kDtypes[storage.dtype].code;
    bytes.shape = ShapeOf(tensor);
    bytes.layout = LayoutOf(model, tensor, records.big_endian);
    // Section 3 has bounded these bytes (PT-012 otherwise).
    bytes.bytes = PtTensorCOrderBytes(file, bytes.shape, bytes.layout);
    table.push_back(std::move(bytes));
  }
  tables->pickle_start = static_cast<std::int64_t>(records.pkl_start);
  return outcome;
}

std::vector<qd::DecodedTensor> DecodePtTable(const std::vector<PtTensorBytes>& table) {
  // Section 6.3 in 6.4's order: (begin, end, name bytes).
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (IsFloatDtype(table[i].dtype)) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&table](std::size_t a, std::size_t b) {
    if (table[a].layout.begin != table[b].layout.begin) return table[a].layout.begin < table[b].layout.begin;
    if (table[a].layout.end != table[b].layout.end) return table[a].layout.end < table[b].layout.end;
    return table[a].name < table[b].name;
  });
  std::vector<qd::DecodedTensor> decoded;
  for (const std::size_t i : order) decoded.push_back(Decode(table[i]));
  return decoded;
}

std::uint64_t PtByteOffset(const std::vector<std::uint64_t>& shape, const PtTensorLayout& layout,
                           std::uint64_t k) {
  const std::uint64_t isz = layout.item_size == 0 ? 1 : layout.item_size;
  // The C-order index i = k div isz as a multi-index, last dimension fastest.
  std::uint64_t i = k / isz;
  std::uint64_t s = layout.storage_offset;
  for (std::size_t d = shape.size(); d > 0; --d) {
    const std::uint64_t size = shape[d - 1];
    if (size == 0) break;  // an empty tensor: only k = 0, element index 0
    const std::uint64_t stride = d - 1 < layout.stride.size() ? layout.stride[d - 1] : 0;
    s += (i % size) * stride;
    i /= size;
  }
  return layout.storage_start + s * isz + k % isz;
}

std::vector<std::uint8_t> PtTensorCOrderBytes(qd::ByteView file,
                                              const std::vector<std::uint64_t>& shape,
                                              const PtTensorLayout& layout) {
  const std::size_t rank = shape.size();
  const std::uint64_t isz = layout.item_size;
  if (layout.stride.size() != rank || isz == 0) return {};
  u128 numel = 1;
  for (const std::uint64_t size : shape) {
    numel *= size;
    if (numel > static_cast<u128>(INT64_MAX)) return {};
  }
  if (numel == 0) return {};
  // The last storage element must lie inside the file (the reader's 5.1
  // bounds already say so for its own layouts; this keeps a stray layout
  // from reading outside the bytes).
  const u128 beyond = static_cast<u128>(1) << 64;  // past any file: stop adding
  u128 last = layout.storage_offset;
  for (std::size_t d = 0; d < rank && last < beyond; ++d) {
    last += static_cast<u128>(shape[d] - 1) * layout.stride[d];
  }
  if (last >= beyond || static_cast<u128>(layout.storage_start) + (last + 1) * isz > file.size) {
    return {};
  }
  if (numel * isz > static_cast<u128>(SIZE_MAX)) return {};
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(numel * isz));
  std::vector<std::uint64_t> index(rank, 0);
  std::uint64_t s = layout.storage_offset;  // the storage element of C-order element i
  for (std::uint64_t i = 0; i < static_cast<std::uint64_t>(numel); ++i) {
    const std::uint8_t* element = file.data + layout.storage_start + s * isz;
    for (std::uint64_t b = 0; b < isz; ++b) {
      // 5.2: a big-endian file's elements are byte-swapped on read.
      bytes[i * isz + b] = layout.big_endian ? element[isz - 1 - b] : element[b];
    }
    for (std::size_t k = rank; k > 0; --k) {
      const std::size_t d = k - 1;
      index[d] += 1;
      s += layout.stride[d];
      if (index[d] < shape[d]) break;
      s -= layout.stride[d] * shape[d];
      index[d] = 0;
    }
  }
  return bytes;
}

bool IsPtFile(qd::ByteView file) {
  // 1.1: byte 8 opens a safetensors header; nothing else is looked at then.
  if (file.size >= 9 && file.data[8] == '{') return false;
  static const std::uint8_t kEndSig[4] = {0x50, 0x4B, 0x05, 0x06};  // an archive of no entry
  return StartsWith(file.data, file.size, kLocalSig, 4) ||
         StartsWith(file.data, file.size, kEndSig, 4) || IsLegacy(file);
}

}  // namespace qd::oracle
