// pt_zip.cc: the ZIP container of a torch.save file (docs/pt.md section 2):
// end records (2.2), central directory (2.3), local headers, data and
// descriptors (2.4), records (2.5), the legacy format (2.6). See pt_reader.h.
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <unordered_set>

#include "codecs/pt_reader.h"

namespace qd::codec::pt_internal {
namespace {

struct Extra {
  bool ok = true;
  bool has_zip64 = false;
  u64 zip64_at = 0, zip64_len = 0;  // absolute offset of the data
  bool has_fb = false;
  u64 fb_at = 0, fb_len = 0;
};

// A well-formed (id, len, data) sequence that exactly fills [at, at + len), no id twice.
Extra ParseExtra(const std::uint8_t* base, u64 at, u64 len, std::vector<std::uint8_t>& seen) {
  Extra x;
  std::vector<std::uint16_t> touched;
  u64 p = at;
  const u64 end = at + len;
  while (p < end) {
    if (end - p < 4) { x.ok = false; break; }
    const auto id = static_cast<std::uint16_t>(Rd16(base + p));
    const u64 l = Rd16(base + p + 2);
    if (end - p - 4 < l) { x.ok = false; break; }
    if (seen[id]) { x.ok = false; break; }
    seen[id] = 1;
    touched.push_back(id);
    if (id == 0x0001) { x.has_zip64 = true; x.zip64_at = p + 4; x.zip64_len = l; }
    if (id == 0x4246) { x.has_fb = true; x.fb_at = p + 4; x.fb_len = l; }
    p += 4 + l;
  }
  for (std::uint16_t id : touched) seen[id] = 0;
  return x;
}

const char* const kKnownRecords[] = {"data.pkl", "version", ".data/version", "byteorder",
                                     ".data/serialization_id", ".format_version",
                                     ".storage_alignment"};

}  // namespace

// Section 2.3 (names) and 4.2 (strings).
bool ValidUtf8(const std::uint8_t* p, u64 n) {
  u64 i = 0;
  while (i < n) {
    const std::uint8_t c = p[i];
    if (c < 0x80) { ++i; continue; }
    u64 len;
    std::uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) { len = 2; cp = c & 0x1f; }
    else if (c >= 0xe0 && c <= 0xef) { len = 3; cp = c & 0x0f; }
    else if (c >= 0xf0 && c <= 0xf4) { len = 4; cp = c & 0x07; }
    else return false;
    if (n - i < len) return false;
    for (u64 k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    if (len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) return false;
    if (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) return false;
    i += len;
  }
  return true;
}

bool IsStorageRecordName(std::string_view r) {
  return r.size() > 5 && r.substr(0, 5) == "data/" && r.find('/', 5) == std::string_view::npos;
}

// ---- section 2.2 ----
bool Reader::ReadEnd() {
  static const std::uint8_t kLegacy[14] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                           0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  if (n_ < 4 || Rd32(d_) != 0x04034b50u) {
    const bool legacy = n_ >= 14 && std::memcmp(d_, kLegacy, 14) == 0;
    const bool tar = n_ >= 262 && std::memcmp(d_ + 257, "ustar", 5) == 0;
    if (legacy || tar) {
      Error("PT-001", "format", 0, legacy ? "legacy torch pickle stream (pre-zip format)"
                                          : "tar archive (pre-zip torch format)");
    } else {
      Error("PT-002", "eocd", 0, "no ZIP local header at offset 0");
    }
    return false;
  }
  if (n_ < 22) {
    Error("PT-002", "eocd", 0, "file shorter than a ZIP end record");
    return false;
  }
  const u64 e = n_ - 22;
  e_ = e;
  auto fail = [&](const char* m) {
    Error("PT-002", "eocd", e, m);
    return false;
  };
  if (Rd32(d_ + e) != 0x06054b50u) return fail("no end record at n - 22");
  if (Rd16(d_ + e + 20) != 0) return fail("archive comment present");
  if (Rd16(d_ + e + 4) != 0 || Rd16(d_ + e + 6) != 0) return fail("multi-disk archive");
  if (Rd16(d_ + e + 8) != Rd16(d_ + e + 10)) return fail("entry counts differ");
  u64 count = Rd16(d_ + e + 10), size = Rd32(d_ + e + 12), off = Rd32(d_ + e + 16);
  u64 dir_end;
  if (e >= 20 && Rd32(d_ + e - 20) == 0x07064b50u) {
    const u64 l = e - 20;
    if (Rd32(d_ + l + 4) != 0 || Rd32(d_ + l + 16) != 1) return fail("zip64 locator: multi-disk");
    const u64 z = Rd64(d_ + l + 8);
    u64 z_end;
    if (!Add(z, 56, &z_end) || z_end != l) return fail("zip64 end record not before the locator");
    if (Rd32(d_ + z) != 0x06064b50u) return fail("zip64 end record signature");
    if (Rd64(d_ + z + 4) != 44) return fail("zip64 end record size is not 44");
    if (Rd32(d_ + z + 16) != 0 || Rd32(d_ + z + 20) != 0) return fail("zip64: multi-disk");
    if (Rd64(d_ + z + 24) != Rd64(d_ + z + 32)) return fail("zip64 entry counts differ");
    const u64 count64 = Rd64(d_ + z + 32), size64 = Rd64(d_ + z + 40), off64 = Rd64(d_ + z + 48);
    if ((count != 0xffff && count != count64) || (size != kSat32 && size != size64) ||
        (off != kSat32 && off != off64)) {
      return fail("classic and zip64 end records disagree");
    }
    count = count64;
    size = size64;
    off = off64;
    dir_end = z;
  } else {
    if (count == 0xffff || size == kSat32 || off == kSat32) {
      return fail("saturated end record without zip64 records");
    }
    dir_end = e;
  }
  u64 cd_end;
  if (!Add(off, size, &cd_end) || cd_end != dir_end) {
    return fail("central directory does not end at the end records");
  }
  if (count < 1) return fail("no entries");
  if (static_cast<u128>(count) * 46 > size) return fail("entry count exceeds the directory");
  cd_off_ = off;
  cd_size_ = size;
  cd_end_ = cd_end;
  count_ = count;
  return true;
}

// ---- section 2.3 ----
bool Reader::ReadCentral() {
  entries_.reserve(count_);  // count * 46 <= cd_size <= n
  std::vector<std::uint8_t> seen(65536, 0);
  std::unordered_set<std::string_view> names;
  names.reserve(count_);
  std::string_view prefix;
  u64 c = cd_off_;
  for (u64 k = 0; k < count_; ++k) {
    auto bad = [&](const char* m) {
      Error("PT-003", "central_directory", c, m);
      return false;
    };
    if (cd_end_ - c < 46) return bad("central entry runs past the directory");
    if (Rd32(d_ + c) != 0x02014b50u) return bad("central entry signature");
    const u64 flags = Rd16(d_ + c + 8), method = Rd16(d_ + c + 10);
    const u64 crc = Rd32(d_ + c + 16);
    u64 csize = Rd32(d_ + c + 20), usize = Rd32(d_ + c + 24);
    const u64 nl = Rd16(d_ + c + 28), el = Rd16(d_ + c + 30), cl = Rd16(d_ + c + 32);
    const u64 disk = Rd16(d_ + c + 34);
    u64 h = Rd32(d_ + c + 42);
    if (cd_end_ - c - 46 < nl + el + cl) return bad("central entry runs past the directory");
    if ((flags & ~u64{0x0808}) != 0) return bad("general-purpose flags outside bits 3 and 11");
    if (method != 0) return bad("compression method is not stored");
    const Extra x = ParseExtra(d_, c + 46 + nl, el, seen);
    if (!x.ok) return bad("malformed extra field");
    const bool su = usize == kSat32, sc = csize == kSat32, sh = h == kSat32, sd = disk == 0xffff;
    const u64 need = 8 * (u64(su) + u64(sc) + u64(sh)) + (sd ? 4 : 0);
    if (need > 0) {
      if (!x.has_zip64 || x.zip64_len < need) return bad("missing zip64 extra value");
      u64 p = x.zip64_at;
      if (su) { usize = Rd64(d_ + p); p += 8; }
      if (sc) { csize = Rd64(d_ + p); p += 8; }
      if (sh) { h = Rd64(d_ + p); p += 8; }
      if (sd && Rd32(d_ + p) != 0) return bad("disk start is not 0");
    } else if (disk != 0) {
      return bad("disk start is not 0");
    }
    if (csize != usize) return bad("compressed size differs from size (stored)");

    // PT-004.
    const std::string_view name(reinterpret_cast<const char*>(d_ + c + 46), nl);
    auto bad_name = [&](const char* m) {
      Error("PT-004", "name", c, m);
      return false;
    };
    if (!ValidUtf8(d_ + c + 46, nl)) return bad_name("name is not UTF-8");
    for (char ch : name) {
      const auto b = static_cast<std::uint8_t>(ch);
      if (b < 0x20 || b == 0x7f) return bad_name("control byte in name");
      if (ch == '\\') return bad_name("backslash in name");
    }
    if (!name.empty() && name[0] == '/') return bad_name("absolute name");
    const std::size_t slash = name.find('/');
    if (slash == std::string_view::npos) return bad_name("name has no archive prefix");
    {
      std::size_t start = 0;
      while (true) {
        const std::size_t next = name.find('/', start);
        const std::string_view seg =
            name.substr(start, next == std::string_view::npos ? std::string_view::npos
                                                             : next - start);
        if (seg.empty() || seg == "." || seg == "..") return bad_name("empty, . or .. segment");
        if (next == std::string_view::npos) break;
        start = next + 1;
      }
    }
    if (k == 0) prefix = name.substr(0, slash);
    if (name.substr(0, slash) != prefix) return bad_name("prefix differs from the first entry's");
    // PT-005.
    if (!names.insert(name).second) {
      Error("PT-005", "name", c, "duplicate entry name");
      return false;
    }
    Entry en;
    en.central = c;
    en.index = k;
    en.name = name;
    en.record = name.substr(prefix.size() + 1);
    en.flags = flags;
    en.crc = crc;
    en.size = usize;
    en.h = h;
    entries_.push_back(en);
    c += 46 + nl + el + cl;
  }
  if (c != cd_end_) {
    Error("PT-003", "central_directory", c, "central directory has bytes after the last entry");
    return false;
  }
  r_.prefix = std::string(prefix);
  return true;
}

// ---- section 2.4 ----
bool Reader::ReadLocals() {
  std::vector<std::uint8_t> seen(65536, 0);
  for (Entry& en : entries_) {
    auto bad = [&](const char* m) {
      Error("PT-006", "local_header", en.central, m);
      return false;
    };
    const u64 h = en.h;
    if (h > cd_off_ || cd_off_ - h < 30) return bad("local header outside the entries area");
    if (Rd32(d_ + h) != 0x04034b50u) return bad("local header signature");
    const u64 flags = Rd16(d_ + h + 6), method = Rd16(d_ + h + 8), crc = Rd32(d_ + h + 14);
    const u64 csize = Rd32(d_ + h + 18), usize = Rd32(d_ + h + 22);
    const u64 nl = Rd16(d_ + h + 26), el = Rd16(d_ + h + 28);
    if (cd_off_ - h - 30 < nl + el) return bad("local name or extra outside the entries area");
    if (nl != en.name.size() || std::memcmp(d_ + h + 30, en.name.data(), nl) != 0) {
      return bad("local name differs from the central name");
    }
    if (flags != en.flags) return bad("local flags differ from the central flags");
    if (method != 0) return bad("local method is not stored");
    const Extra x = ParseExtra(d_, h + 30 + nl, el, seen);
    if (!x.ok) return bad("malformed local extra field");
    if (x.has_fb) {
      for (u64 i = 0; i < x.fb_len; ++i) {
        if (d_[x.fb_at + i] != 0x5a) return bad("FB padding holds a byte other than Z");
      }
    }
    const u64 ds = h + 30 + nl + el;
    u64 de;
    if (!Add(ds, en.size, &de) || de > cd_off_) return bad("entry data outside the entries area");
    u64 end = de;
    if ((flags & 0x8) == 0) {
      if (crc != en.crc) return bad("local CRC differs from the central CRC");
      const bool plain = csize == en.size && usize == en.size;
      const bool z64 = csize == kSat32 && usize == kSat32 && x.has_zip64 && x.zip64_len >= 16 &&
                       Rd64(d_ + x.zip64_at) == en.size && Rd64(d_ + x.zip64_at + 8) == en.size;
      if (!plain && !z64) return bad("local sizes differ from the central size");
    } else {
      const bool zeros = crc == 0 && csize == 0 && usize == 0;
      const bool real = crc == en.crc && (csize == en.size || csize == kSat32) &&
                        (usize == en.size || usize == kSat32);
      if (!zeros && !real) return bad("local CRC or sizes disagree with the central directory");
      const u64 dl = x.has_zip64 ? 24 : 16;
      if (cd_off_ - de < dl) return bad("data descriptor outside the entries area");
      if (Rd32(d_ + de) != 0x08074b50u) return bad("data descriptor signature");
      bool ok = Rd32(d_ + de + 4) == en.crc;
      if (dl == 24) {
        ok = ok && Rd64(d_ + de + 8) == en.size && Rd64(d_ + de + 16) == en.size;
      } else {
        ok = ok && Rd32(d_ + de + 8) == en.size && Rd32(d_ + de + 12) == en.size;
      }
      if (!ok) return bad("data descriptor disagrees with the central directory");
      end = de + dl;
    }
    en.ds = ds;
    en.de = de;
    en.end = end;
  }
  // PT-007.
  std::vector<std::size_t> order(entries_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return entries_[a].h != entries_[b].h ? entries_[a].h < entries_[b].h : a < b;
  });
  for (std::size_t i = 1; i < order.size(); ++i) {
    const Entry& prev = entries_[order[i - 1]];
    const Entry& cur = entries_[order[i]];
    if (cur.h < prev.end) {
      Error("PT-007", "local_header", cur.central, "entries overlap");
      return false;
    }
  }
  // PT-008.
  for (const Entry& en : entries_) {
    uLong crc = crc32_z(0L, Z_NULL, 0);
    crc = crc32_z(crc, d_ + en.ds, static_cast<z_size_t>(en.size));
    if (static_cast<u64>(crc) != en.crc) {
      Error("PT-008", "crc32", en.ds, "CRC-32 differs from the central directory");
      return false;
    }
  }
  // Local header order from here on (PT-101, PT-102).
  std::vector<Entry> sorted;
  sorted.reserve(entries_.size());
  for (std::size_t i : order) sorted.push_back(entries_[i]);
  entries_ = std::move(sorted);
  return true;
}

// ---- section 2.5 ----
bool Reader::CheckRecords() {
  by_record_.reserve(entries_.size());
  for (std::size_t i = 0; i < entries_.size(); ++i) by_record_.emplace(entries_[i].record, i);
  auto find = [&](std::string_view r) -> const Entry* {
    auto it = by_record_.find(r);
    return it == by_record_.end() ? nullptr : &entries_[it->second];
  };
  const Entry* pkl = find("data.pkl");
  if (pkl == nullptr) {
    Error("PT-009", "data.pkl", cd_off_, "no data.pkl record");
    return false;
  }
  pkl_ = by_record_.find("data.pkl")->second;
  const Entry* version = find(".data/version");
  if (version == nullptr) version = find("version");
  if (version == nullptr) {
    Error("PT-009", "version", cd_off_, "no version record");
    return false;
  }
  std::string_view v(reinterpret_cast<const char*>(d_ + version->ds), version->size);
  if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
  bool digits = !v.empty() && v.size() <= 20;
  for (char ch : v) digits = digits && ch >= '0' && ch <= '9';
  if (!digits) {
    Error("PT-009", "version", version->ds, "version is not a decimal number");
    return false;
  }
  if (const Entry* bo = find("byteorder")) {
    const std::string_view b(reinterpret_cast<const char*>(d_ + bo->ds), bo->size);
    if (b != "little" && b != "big") {
      Error("PT-010", "byteorder", bo->ds, "byteorder is neither little nor big");
      return false;
    }
    r_.big_endian = b == "big";
  }
  std::string_view vz = v;
  while (vz.size() > 1 && vz.front() == '0') vz.remove_prefix(1);
  if (vz != "3") Warn("PT-104", "version", version->ds, "version record is not 3");
  for (const Entry& en : entries_) {
    bool known = IsStorageRecordName(en.record);
    for (const char* k : kKnownRecords) known = known || en.record == k;
    if (!known) Warn("PT-101", "record", en.h, "unknown record ignored: " + std::string(en.record));
  }
  return true;
}

}  // namespace qd::codec::pt_internal
