// pt_zip.cc: the oracle's reading of the ZIP container torch.save writes
// (docs/pt.md section 2): end records (2.2), central directory (2.3), local
// headers and descriptors (2.4), overlap, CRC, records (2.5), the legacy
// format (2.6), and detection (1.1). See pt_model.h.
#include <algorithm>
#include <cstring>
#include <set>

#include "oracles/bytes.h"
#include "oracles/json.h"
#include "oracles/pt_model.h"

namespace qd::oracle::pt_internal {
namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

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
// Records (2.5).

bool IsStorageRecord(const std::string& name) {
  return name.size() > 5 && name.compare(0, 5, "data/") == 0 && name.find('/', 5) == std::string::npos;
}

namespace {

bool IsKnownRecord(const std::string& name) {
  if (name == "data.pkl" || name == "version" || name == ".data/version" || name == "byteorder" ||
      name == ".data/serialization_id" || name == ".format_version" || name == ".storage_alignment") {
    return true;
  }
  return IsStorageRecord(name);
}

}  // namespace

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

}  // namespace qd::oracle::pt_internal

namespace qd::oracle {

bool IsPtFile(qd::ByteView file) {
  // 1.1: byte 8 opens a safetensors header; nothing else is looked at then.
  if (file.size >= 9 && file.data[8] == '{') return false;
  static const std::uint8_t kEndSig[4] = {0x50, 0x4B, 0x05, 0x06};  // an archive of no entry
  return pt_internal::StartsWith(file.data, file.size, pt_internal::kLocalSig, 4) ||
         pt_internal::StartsWith(file.data, file.size, kEndSig, 4) || pt_internal::IsLegacy(file);
}

}  // namespace qd::oracle
