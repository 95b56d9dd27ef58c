// pt.cc: the torch.save zip reader (docs/pt.md). See pt.h.
#include "codecs/pt.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "codecs/finding.h"
#include "codecs/float16.h"

namespace qd::codec {
namespace {

using u64 = std::uint64_t;
using u128 = unsigned __int128;

// Section 4.4.
constexpr u64 kMaxMarks = 256;
constexpr u64 kMaxStack = 1048576;
constexpr u64 kMaxMemo = 1048576;
constexpr u64 kMaxString = 1048576;
constexpr u64 kMaxLong1 = 8;
constexpr u64 kMaxItems = 1048576;
constexpr u64 kMaxRank = 64;
constexpr u64 kMaxDepth = 64;
constexpr u64 kMaxVisits = 1048576;
constexpr u64 kMaxCreated = 2097152;  // values made by opcodes (4.4)

constexpr u64 kSat32 = 0xffffffffu;

inline u64 Rd16(const std::uint8_t* p) { return u64(p[0]) | (u64(p[1]) << 8); }
inline u64 Rd32(const std::uint8_t* p) {
  return u64(p[0]) | (u64(p[1]) << 8) | (u64(p[2]) << 16) | (u64(p[3]) << 24);
}
inline u64 Rd64(const std::uint8_t* p) { return Rd32(p) | (Rd32(p + 4) << 32); }

inline bool Add(u64 a, u64 b, u64* r) { return !__builtin_add_overflow(a, b, r); }

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
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

struct Entry {
  u64 central = 0;  // c
  u64 index = 0;    // position in the central directory
  std::string_view name;
  std::string_view record;  // name without "P/"
  u64 flags = 0, crc = 0, size = 0, h = 0;
  u64 ds = 0, de = 0, end = 0;
};

const char* const kKnownRecords[] = {"data.pkl", "version", ".data/version", "byteorder",
                                     ".data/serialization_id", ".format_version",
                                     ".storage_alignment"};

bool IsStorageRecordName(std::string_view r) {
  return r.size() > 5 && r.substr(0, 5) == "data/" && r.find('/', 5) == std::string_view::npos;
}

// ---- allow-list (section 4.3) ----
enum Callable : std::uint32_t { kOrderedDict, kRebuildTensorV2, kRebuildParameter, kSize };

struct Global {
  std::string_view module, name;
  PtTokenKind kind;
  Dtype dtype;
  std::uint32_t callable;
};

const Global kGlobals[] = {
    {"collections", "OrderedDict", PtTokenKind::kCallable, Dtype::kU8, kOrderedDict},
    {"torch._utils", "_rebuild_tensor_v2", PtTokenKind::kCallable, Dtype::kU8, kRebuildTensorV2},
    {"torch._utils", "_rebuild_parameter", PtTokenKind::kCallable, Dtype::kU8, kRebuildParameter},
    {"torch", "Size", PtTokenKind::kCallable, Dtype::kU8, kSize},
    {"torch", "DoubleStorage", PtTokenKind::kStorageClass, Dtype::kF64, 0},
    {"torch", "FloatStorage", PtTokenKind::kStorageClass, Dtype::kF32, 0},
    {"torch", "HalfStorage", PtTokenKind::kStorageClass, Dtype::kF16, 0},
    {"torch", "BFloat16Storage", PtTokenKind::kStorageClass, Dtype::kBF16, 0},
    {"torch", "LongStorage", PtTokenKind::kStorageClass, Dtype::kI64, 0},
    {"torch", "IntStorage", PtTokenKind::kStorageClass, Dtype::kI32, 0},
    {"torch", "ShortStorage", PtTokenKind::kStorageClass, Dtype::kI16, 0},
    {"torch", "CharStorage", PtTokenKind::kStorageClass, Dtype::kI8, 0},
    {"torch", "ByteStorage", PtTokenKind::kStorageClass, Dtype::kU8, 0},
    {"torch", "BoolStorage", PtTokenKind::kStorageClass, Dtype::kBool, 0},
    {"torch", "float64", PtTokenKind::kDtype, Dtype::kF64, 0},
    {"torch", "float32", PtTokenKind::kDtype, Dtype::kF32, 0},
    {"torch", "float16", PtTokenKind::kDtype, Dtype::kF16, 0},
    {"torch", "bfloat16", PtTokenKind::kDtype, Dtype::kBF16, 0},
    {"torch", "int64", PtTokenKind::kDtype, Dtype::kI64, 0},
    {"torch", "int32", PtTokenKind::kDtype, Dtype::kI32, 0},
    {"torch", "int16", PtTokenKind::kDtype, Dtype::kI16, 0},
    {"torch", "int8", PtTokenKind::kDtype, Dtype::kI8, 0},
    {"torch", "uint8", PtTokenKind::kDtype, Dtype::kU8, 0},
    {"torch", "bool", PtTokenKind::kDtype, Dtype::kBool, 0},
};

const Global* FindGlobal(std::string_view module, std::string_view name) {
  for (const Global& g : kGlobals) {
    if (g.module == module && g.name == name) return &g;
  }
  return nullptr;
}

struct Storage {
  Dtype dtype;
  u64 numel;
  std::size_t entry;  // index into the entries
};

class Reader {
 public:
  Reader(qd::ByteView file, const std::string& file_name, PtResult* out)
      : d_(file.data), n_(file.size), file_name_(file_name), r_(*out) {}

  void Run();

 private:
  // Findings.
  void Error(const char* rule, const char* field, u64 offset, std::string message,
             std::string tensor = {}) {
    r_.findings.push_back(MakeFinding(rule, qd::Severity::kError, file_name_, std::move(tensor),
                                      field, static_cast<std::int64_t>(offset),
                                      std::move(message)));
    r_.refused = true;
  }
  void Warn(const char* rule, const char* field, u64 offset, std::string message) {
    r_.findings.push_back(MakeFinding(rule, qd::Severity::kWarning, file_name_, {}, field,
                                      static_cast<std::int64_t>(offset), std::move(message)));
  }

  bool ReadEnd();
  bool ReadCentral();
  bool ReadLocals();
  bool CheckRecords();
  bool Walk();
  bool Flatten(std::uint32_t dict, const std::string& prefix, u64 depth);
  bool WalkValue(std::uint32_t node, u64 depth);
  void FinishTensors();

  // Pickle helpers.
  std::uint32_t NewNode(PtKind kind) {
    r_.nodes.emplace_back();
    r_.nodes.back().kind = kind;
    return static_cast<std::uint32_t>(r_.nodes.size() - 1);
  }
  PtNode& N(std::uint32_t i) { return r_.nodes[i]; }
  u64 Avail() const { return stack_.size() - (marks_.empty() ? 0 : marks_.back()); }
  // made: the value is new (every push but BINGET's), counted against the
  // created-values budget after the stack limit (docs/pt.md 4.4).
  bool Push(std::uint32_t node, bool made = true) {
    if (stack_.size() >= kMaxStack) {
      Error("PT-012", "stack", op_at_, "more than 1048576 stack items");
      return false;
    }
    if (made && !CountMade()) return false;
    stack_.push_back(node);
    return true;
  }
  bool CountMade() {
    if (++made_ > kMaxCreated) {
      Error("PT-012", "container", op_at_, "more than 2097152 values created");
      return false;
    }
    return true;
  }
  // GLOBAL / STACK_GLOBAL (section 4.3): the allow-listed name as a token on
  // the stack, or PT-011 naming it. Nothing named is ever called.
  bool PushGlobal(std::string_view module, std::string_view name) {
    const Global* g = FindGlobal(module, name);
    if (g == nullptr) {
      Error("PT-011", "global", op_at_,
            "global outside the allow-list: " + std::string(module) + "." + std::string(name));
      return false;
    }
    const std::uint32_t t = NewNode(PtKind::kToken);
    N(t).token = g->kind;
    N(t).dtype = g->dtype;
    N(t).text = std::string(g->name);
    N(t).tensor = g->callable;
    return Push(t);
  }

  bool Malformed(const char* what) {
    Error("PT-013", "opcode", op_at_, what);
    return false;
  }
  bool IsEmptyDict(std::uint32_t i) {
    const PtNode& x = N(i);
    return x.kind == PtKind::kDict && x.items.empty() && x.attributes == kPtNoNode;
  }
  bool IsIntSeq(std::uint32_t i) {
    const PtNode& x = N(i);
    if (x.kind != PtKind::kTuple && x.kind != PtKind::kSize) return false;
    for (std::uint32_t k : x.items) {
      if (N(k).kind != PtKind::kInt) return false;
    }
    return true;
  }
  bool SetItem(std::uint32_t dict, std::uint32_t key, std::uint32_t value);
  bool Reduce();
  bool RebuildTensor(std::uint32_t args, std::uint32_t* out);
  bool PersistentId();

  const std::uint8_t* d_;
  u64 n_;
  const std::string& file_name_;
  PtResult& r_;

  // ZIP.
  u64 e_ = 0, cd_off_ = 0, cd_size_ = 0, cd_end_ = 0, count_ = 0;
  std::vector<Entry> entries_;
  std::unordered_map<std::string_view, std::size_t> by_record_;
  std::size_t pkl_ = 0;

  // Pickle walk.
  u64 op_at_ = 0;  // absolute offset of the current opcode
  std::vector<std::uint32_t> stack_;
  std::vector<u64> marks_;
  std::unordered_map<std::uint32_t, std::uint32_t> memo_;
  std::unordered_map<std::uint32_t, std::unordered_set<std::string>> dict_keys_;
  std::unordered_map<std::string, Storage> storages_;
  std::unordered_set<std::uint32_t> built_;
  u64 visits_ = 0;
  u64 size_items_ = 0;  // ints copied into torch.Size values so far (4.4)
  u64 made_ = 0;        // values created so far (4.4)
  std::unordered_set<std::string> names_;
  std::vector<u64> value_depths_;
  u128 output_ = 0;
  u128 output_limit_ = 0;  // n + 2^26 (section 3)
};

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

// ---- section 4 ----
bool Reader::SetItem(std::uint32_t dict, std::uint32_t key, std::uint32_t value) {
  const PtNode& k = N(key);
  std::string enc;
  if (k.kind == PtKind::kStr) {
    enc = "s" + k.text;
  } else if (k.kind == PtKind::kInt) {
    enc.assign("i");
    enc.append(reinterpret_cast<const char*>(&k.integer), sizeof k.integer);
  } else {
    Error("PT-017", "key", op_at_, "dict key is not str or int");
    return false;
  }
  if (!dict_keys_[dict].insert(std::move(enc)).second) {
    Error("PT-017", "key", op_at_, "repeated dict key");
    return false;
  }
  if (N(dict).items.size() / 2 >= kMaxItems) {
    Error("PT-012", "container", op_at_, "more than 1048576 items in one dict");
    return false;
  }
  N(dict).items.push_back(key);
  N(dict).items.push_back(value);
  return true;
}

bool Reader::PersistentId() {
  if (Avail() < 1) return Malformed("stack underflow");
  const std::uint32_t pid = stack_.back();
  stack_.pop_back();
  auto bad_pid = [&](const char* m) {
    Error("PT-015", "persistent_id", op_at_, m);
    return false;
  };
  const PtNode& t = N(pid);
  if (t.kind != PtKind::kTuple || t.items.size() != 5) return bad_pid("not a 5-tuple");
  const PtNode& tag = N(t.items[0]);
  const PtNode& cls = N(t.items[1]);
  const PtNode& key = N(t.items[2]);
  const PtNode& loc = N(t.items[3]);
  const PtNode& numel = N(t.items[4]);
  if (tag.kind != PtKind::kStr || tag.text != "storage") return bad_pid("not a storage ID");
  if (cls.kind != PtKind::kToken || cls.token != PtTokenKind::kStorageClass) {
    return bad_pid("no storage class");
  }
  if (key.kind != PtKind::kStr || key.text.empty() || key.text.size() > 64) {
    return bad_pid("bad storage key");
  }
  for (char ch : key.text) {
    const bool ok = (ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= 'a' && ch <= 'z') || ch == '_';
    if (!ok) return bad_pid("bad storage key");
  }
  if (loc.kind != PtKind::kStr) return bad_pid("location is not a str");
  if (numel.kind != PtKind::kInt || numel.integer < 0) return bad_pid("bad numel");
  const u64 count = static_cast<u64>(numel.integer);
  const Dtype dtype = cls.dtype;
  const std::string key_text = key.text;
  auto bad_storage = [&](const std::string& m) {
    Error("PT-015", "storage", op_at_, m);
    return false;
  };
  auto rec = by_record_.find("data/" + key_text);
  if (rec == by_record_.end()) return bad_storage("no record data/" + key_text);
  auto it = storages_.find(key_text);
  if (it != storages_.end()) {
    if (it->second.dtype != dtype || it->second.numel != count) {
      return bad_storage("storage key reused with another dtype or numel");
    }
  }
  const u128 bytes = static_cast<u128>(count) * PtItemSize(dtype);
  if (bytes != entries_[rec->second].size) {
    return bad_storage("storage record length is not numel * item size");
  }
  if (it == storages_.end()) storages_.emplace(key_text, Storage{dtype, count, rec->second});
  const std::uint32_t s = NewNode(PtKind::kStorage);
  N(s).dtype = dtype;
  N(s).integer = static_cast<std::int64_t>(count);
  N(s).text = key_text;
  return Push(s);
}

bool Reader::RebuildTensor(std::uint32_t args, std::uint32_t* out) {
  const PtNode& a = N(args);
  auto bad = [&](const char* m) {
    Error("PT-014", "args", op_at_, m);
    return false;
  };
  if (a.items.size() != 6 && a.items.size() != 7) return bad("_rebuild_tensor_v2 takes 6 or 7 arguments");
  const std::uint32_t st = a.items[0], off = a.items[1], size = a.items[2], stride = a.items[3];
  if (N(st).kind != PtKind::kStorage) return bad("argument 0 is not a storage");
  if (N(off).kind != PtKind::kInt) return bad("storage offset is not an int");
  if (!IsIntSeq(size)) return bad("size is not a tuple of ints");
  if (!IsIntSeq(stride)) return bad("stride is not a tuple of ints");
  if (N(a.items[4]).kind != PtKind::kBool) return bad("requires_grad is not a bool");
  if (!IsEmptyDict(a.items[5])) return bad("backward hooks are not an empty dict");
  if (a.items.size() == 7 && N(a.items[6]).kind != PtKind::kNone && !IsEmptyDict(a.items[6])) {
    return bad("metadata is not None or an empty dict");
  }
  const PtNode& sz = N(size);
  const PtNode& sd = N(stride);
  auto shape = [&](const char* m) {
    Error("PT-016", "shape", op_at_, m);
    return false;
  };
  if (sz.items.size() != sd.items.size()) return shape("size and stride ranks differ");
  if (sz.items.size() > kMaxRank) return shape("rank above 64");
  const std::int64_t offset = N(off).integer;
  if (offset < 0) return shape("negative storage offset");
  for (std::size_t k = 0; k < sz.items.size(); ++k) {
    if (N(sz.items[k]).integer < 0 || N(sd.items[k]).integer < 0) return shape("negative size or stride");
  }
  u64 numel = 1;
  for (std::uint32_t k : sz.items) {
    const u128 p = static_cast<u128>(numel) * static_cast<u64>(N(k).integer);
    if (p > static_cast<u128>(INT64_MAX)) return shape("element count overflows");
    numel = static_cast<u64>(p);
  }
  const PtNode& storage = N(st);
  const u64 snumel = static_cast<u64>(storage.integer);
  if (numel > 0) {
    u128 last = static_cast<u64>(offset);
    for (std::size_t k = 0; k < sz.items.size() && last < snumel; ++k) {
      last += static_cast<u128>(static_cast<u64>(N(sz.items[k]).integer) - 1) *
              static_cast<u64>(N(sd.items[k]).integer);
    }
    if (last + 1 > snumel) {
      Error("PT-016", "storage_offset", op_at_, "view beyond its storage");
      return false;
    }
  } else if (static_cast<u64>(offset) > snumel) {
    Error("PT-016", "storage_offset", op_at_, "storage offset beyond its storage");
    return false;
  }
  const Storage& s = storages_.at(storage.text);
  const Entry& rec = entries_[s.entry];
  PtTensor t;
  t.dtype = s.dtype;
  for (std::uint32_t k : sz.items) t.shape.push_back(static_cast<u64>(N(k).integer));
  for (std::uint32_t k : sd.items) t.stride.push_back(static_cast<u64>(N(k).integer));
  t.storage_offset = static_cast<u64>(offset);
  t.numel = numel;
  t.storage_key = storage.text;
  t.storage_numel = snumel;
  t.storage_begin = rec.ds;
  t.storage = d_ + rec.ds;
  t.big_endian = r_.big_endian;
  const u64 isz = PtItemSize(s.dtype);
  const u128 begin = static_cast<u128>(rec.ds) + static_cast<u128>(t.storage_offset) * isz;
  const u128 end = begin + static_cast<u128>(numel) * isz;
  // Saturate: only ordering uses these, and a view within its storage stays exact.
  t.begin = begin > UINT64_MAX ? UINT64_MAX : static_cast<u64>(begin);
  t.end = end > UINT64_MAX ? UINT64_MAX : static_cast<u64>(end);
  r_.all_tensors.push_back(std::move(t));
  const std::uint32_t node = NewNode(PtKind::kTensor);
  N(node).tensor = static_cast<std::uint32_t>(r_.all_tensors.size() - 1);
  N(node).dtype = s.dtype;
  *out = node;
  return true;
}

bool Reader::Reduce() {
  if (Avail() < 2) return Malformed("stack underflow");
  const std::uint32_t args = stack_.back();
  stack_.pop_back();
  const std::uint32_t fn = stack_.back();
  const PtNode& f = N(fn);
  if (f.kind != PtKind::kToken || f.token != PtTokenKind::kCallable) {
    Error("PT-011", "reduce", op_at_, "REDUCE of something that is not an allowed callable");
    return false;
  }
  auto bad = [&](const char* m) {
    Error("PT-014", "args", op_at_, m);
    return false;
  };
  if (N(args).kind != PtKind::kTuple) return bad("REDUCE arguments are not a tuple");
  const PtNode& a = N(args);
  std::uint32_t result = kPtNoNode;
  switch (f.tensor) {  // the callable id is kept in `tensor` for callable tokens
    case kOrderedDict:
      if (!a.items.empty()) return bad("OrderedDict takes ()");
      result = NewNode(PtKind::kDict);
      N(result).ordered = true;
      break;
    case kRebuildTensorV2:
      if (!RebuildTensor(args, &result)) return false;
      break;
    case kRebuildParameter:
      if (a.items.size() != 3 || N(a.items[0]).kind != PtKind::kTensor ||
          N(a.items[1]).kind != PtKind::kBool || !IsEmptyDict(a.items[2])) {
        return bad("_rebuild_parameter takes (tensor, bool, {})");
      }
      result = a.items[0];
      break;
    case kSize: {
      if (a.items.size() != 1 || !IsIntSeq(a.items[0])) return bad("torch.Size takes (tuple of ints,)");
      const std::uint32_t src = a.items[0];
      // A Size copies its ints; one memoized tuple could be copied again and
      // again, so all Sizes of a file share one budget (docs/pt.md 4.4).
      if (N(src).items.size() > kMaxItems - size_items_) {
        Error("PT-012", "container", op_at_, "more than 1048576 torch.Size items in the file");
        return false;
      }
      size_items_ += N(src).items.size();
      result = NewNode(PtKind::kSize);
      N(result).items = N(src).items;
      break;
    }
    default:
      return bad("unknown callable");
  }
  if (!CountMade()) return false;
  stack_.back() = result;
  return true;
}

bool Reader::Walk() {
  const Entry& pkl = entries_[pkl_];
  const std::uint8_t* p = d_ + pkl.ds;
  const u64 size = pkl.size;
  r_.pickle_begin = pkl.ds;
  r_.nodes.reserve(std::min<u64>(size, 1u << 16) + 3);
  // Singletons: None, False, True.
  const std::uint32_t kNone = NewNode(PtKind::kNone);
  const std::uint32_t kFalse = NewNode(PtKind::kBool);
  const std::uint32_t kTrue = NewNode(PtKind::kBool);
  N(kTrue).boolean = true;
  u64 pos = 0;
  auto need = [&](u64 k) { return size - pos >= k; };  // operand bytes after pos
  while (true) {
    op_at_ = pkl.ds + pos;
    if (pos >= size) return Malformed("data.pkl ends without STOP");
    const std::uint8_t op = p[pos];
    if (pos == 0 && op != 0x80) return Malformed("data.pkl does not start with PROTO");
    ++pos;
    switch (op) {
      case 0x80: {  // PROTO
        if (op_at_ != pkl.ds) return Malformed("PROTO after the first opcode");
        if (!need(1)) return Malformed("truncated operand");
        const std::uint8_t v = p[pos++];
        if (v < 2 || v > 5) return Malformed("protocol outside 2..5");
        break;
      }
      case 0x95: {  // FRAME
        if (!need(8)) return Malformed("truncated operand");
        const u64 len = Rd64(p + pos);
        pos += 8;
        if (len > size - pos) return Malformed("FRAME longer than the bytes left");
        break;
      }
      case 0x28:  // MARK
        if (marks_.size() >= kMaxMarks) {
          Error("PT-012", "marks", op_at_, "more than 256 open marks");
          return false;
        }
        marks_.push_back(stack_.size());
        break;
      case 0x29:  // EMPTY_TUPLE
        if (!Push(NewNode(PtKind::kTuple))) return false;
        break;
      case 0x5d:  // EMPTY_LIST
        if (!Push(NewNode(PtKind::kList))) return false;
        break;
      case 0x7d:  // EMPTY_DICT
        if (!Push(NewNode(PtKind::kDict))) return false;
        break;
      case 0x74: {  // TUPLE
        if (marks_.empty()) return Malformed("TUPLE without an open mark");
        const u64 m = marks_.back();
        marks_.pop_back();
        const std::uint32_t t = NewNode(PtKind::kTuple);
        N(t).items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
        stack_.resize(m);
        if (!Push(t)) return false;
        break;
      }
      case 0x85: case 0x86: case 0x87: {  // TUPLE1/2/3
        const u64 k = op - 0x84u;
        if (Avail() < k) return Malformed("stack underflow");
        const std::uint32_t t = NewNode(PtKind::kTuple);
        N(t).items.assign(stack_.end() - static_cast<std::ptrdiff_t>(k), stack_.end());
        stack_.resize(stack_.size() - k);
        if (!Push(t)) return false;
        break;
      }
      case 0x4e:  // NONE
        if (!Push(kNone)) return false;
        break;
      case 0x88:  // NEWTRUE
        if (!Push(kTrue)) return false;
        break;
      case 0x89:  // NEWFALSE
        if (!Push(kFalse)) return false;
        break;
      case 0x4b: case 0x4d: case 0x4a: {  // BININT1, BININT2, BININT
        const u64 k = op == 0x4b ? 1 : op == 0x4d ? 2 : 4;
        if (!need(k)) return Malformed("truncated operand");
        std::int64_t v;
        if (k == 1) v = p[pos];
        else if (k == 2) v = static_cast<std::int64_t>(Rd16(p + pos));
        else v = static_cast<std::int32_t>(static_cast<std::uint32_t>(Rd32(p + pos)));
        pos += k;
        const std::uint32_t i = NewNode(PtKind::kInt);
        N(i).integer = v;
        if (!Push(i)) return false;
        break;
      }
      case 0x8a: {  // LONG1
        if (!need(1)) return Malformed("truncated operand");
        const u64 k = p[pos++];
        if (k > kMaxLong1) {
          Error("PT-012", "integer", op_at_, "LONG1 longer than 8 bytes");
          return false;
        }
        if (!need(k)) return Malformed("truncated operand");
        u64 v = 0;
        for (u64 b = 0; b < k; ++b) v |= u64(p[pos + b]) << (8 * b);
        if (k > 0 && k < 8 && (p[pos + k - 1] & 0x80)) v |= ~u64{0} << (8 * k);
        pos += k;
        const std::uint32_t i = NewNode(PtKind::kInt);
        N(i).integer = static_cast<std::int64_t>(v);
        if (!Push(i)) return false;
        break;
      }
      case 0x47: {  // BINFLOAT
        if (!need(8)) return Malformed("truncated operand");
        u64 bits = 0;
        for (int b = 0; b < 8; ++b) bits = (bits << 8) | p[pos + b];
        pos += 8;
        const std::uint32_t f = NewNode(PtKind::kFloat);
        N(f).real = std::bit_cast<double>(bits);
        if (!Push(f)) return false;
        break;
      }
      case 0x58: case 0x8c: case 0x8d: {  // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
        const u64 w = op == 0x8c ? 1 : op == 0x58 ? 4 : 8;
        if (!need(w)) return Malformed("truncated operand");
        const u64 len = w == 1 ? p[pos] : w == 4 ? Rd32(p + pos) : Rd64(p + pos);
        pos += w;
        if (len > kMaxString) {
          Error("PT-012", "string", op_at_, "string longer than 1048576 bytes");
          return false;
        }
        if (!need(len)) return Malformed("truncated operand");
        if (!ValidUtf8(p + pos, len)) return Malformed("string is not valid UTF-8");
        const std::uint32_t s = NewNode(PtKind::kStr);
        N(s).text.assign(reinterpret_cast<const char*>(p + pos), len);
        pos += len;
        if (!Push(s)) return false;
        break;
      }
      case 0x71: case 0x72: case 0x94: {  // BINPUT, LONG_BINPUT, MEMOIZE
        u64 idx;
        if (op == 0x94) {
          idx = memo_.size();
        } else {
          const u64 w = op == 0x71 ? 1 : 4;
          if (!need(w)) return Malformed("truncated operand");
          idx = w == 1 ? p[pos] : Rd32(p + pos);
          pos += w;
        }
        if (Avail() < 1) return Malformed("memo of an empty stack");
        const auto key = static_cast<std::uint32_t>(idx);
        auto it = memo_.find(key);
        if (it == memo_.end()) {
          if (memo_.size() >= kMaxMemo) {
            Error("PT-012", "memo", op_at_, "more than 1048576 memo entries");
            return false;
          }
          memo_.emplace(key, stack_.back());
        } else {
          it->second = stack_.back();
        }
        break;
      }
      case 0x68: case 0x6a: {  // BINGET, LONG_BINGET
        const u64 w = op == 0x68 ? 1 : 4;
        if (!need(w)) return Malformed("truncated operand");
        const u64 idx = w == 1 ? p[pos] : Rd32(p + pos);
        pos += w;
        auto it = memo_.find(static_cast<std::uint32_t>(idx));
        if (it == memo_.end()) return Malformed("unset memo index");
        if (!Push(it->second, /*made=*/false)) return false;
        break;
      }
      case 0x63: {  // GLOBAL
        std::string_view lines[2];
        for (auto& line : lines) {
          const u64 start = pos;
          while (true) {
            if (pos >= size) return Malformed("GLOBAL line without newline");
            const std::uint8_t b = p[pos];
            if (b == '\n') break;
            if (pos - start >= 256) return Malformed("GLOBAL line longer than 256 bytes");
            if (b < 0x20 || b > 0x7e) return Malformed("GLOBAL line byte outside 0x20..0x7E");
            ++pos;
          }
          line = std::string_view(reinterpret_cast<const char*>(p + start), pos - start);
          ++pos;
        }
        if (!PushGlobal(lines[0], lines[1])) return false;
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        if (Avail() < 2) return Malformed("stack underflow");
        const std::uint32_t name = stack_.back();
        const std::uint32_t module = stack_[stack_.size() - 2];
        if (N(name).kind != PtKind::kStr || N(module).kind != PtKind::kStr) {
          return Malformed("STACK_GLOBAL operands are not str");
        }
        stack_.resize(stack_.size() - 2);
        // Copies: PushGlobal adds a node, which may move the strings.
        if (!PushGlobal(std::string(N(module).text), std::string(N(name).text))) return false;
        break;
      }
      case 0x52:  // REDUCE
        if (!Reduce()) return false;
        break;
      case 0x62: {  // BUILD
        if (Avail() < 2) return Malformed("stack underflow");
        const std::uint32_t state = stack_.back();
        stack_.pop_back();
        const std::uint32_t target = stack_.back();
        if (N(target).kind != PtKind::kDict || !N(target).ordered) {
          Error("PT-011", "build", op_at_, "BUILD on something other than an ordered dict");
          return false;
        }
        if (built_.count(target) != 0) {
          Error("PT-014", "args", op_at_, "second BUILD on one ordered dict");
          return false;
        }
        const PtNode& s = N(state);
        bool ok = s.kind == PtKind::kDict && !s.ordered;
        for (std::size_t k = 0; ok && k < s.items.size(); k += 2) {
          ok = N(s.items[k]).kind == PtKind::kStr;
        }
        if (!ok) {
          Error("PT-014", "args", op_at_, "BUILD state is not a plain dict with str keys");
          return false;
        }
        built_.insert(target);
        N(target).attributes = state;
        break;
      }
      case 0x51:  // BINPERSID
        if (!PersistentId()) return false;
        break;
      case 0x73: {  // SETITEM
        if (Avail() < 3) return Malformed("stack underflow");
        const std::uint32_t value = stack_.back();
        const std::uint32_t key = stack_[stack_.size() - 2];
        stack_.resize(stack_.size() - 2);
        const std::uint32_t dict = stack_.back();
        if (N(dict).kind != PtKind::kDict) return Malformed("SETITEM on something that is not a dict");
        if (!SetItem(dict, key, value)) return false;
        break;
      }
      case 0x75: {  // SETITEMS
        if (marks_.empty()) return Malformed("SETITEMS without an open mark");
        const u64 m = marks_.back();
        marks_.pop_back();
        if (m <= (marks_.empty() ? 0 : marks_.back())) return Malformed("stack underflow");
        const std::uint32_t dict = stack_[m - 1];
        if (N(dict).kind != PtKind::kDict) return Malformed("SETITEMS on something that is not a dict");
        if ((stack_.size() - m) % 2 != 0) return Malformed("SETITEMS with an odd item count");
        for (u64 k = m; k < stack_.size(); k += 2) {
          if (!SetItem(dict, stack_[k], stack_[k + 1])) return false;
        }
        stack_.resize(m);
        break;
      }
      case 0x61: {  // APPEND
        if (Avail() < 2) return Malformed("stack underflow");
        const std::uint32_t value = stack_.back();
        stack_.pop_back();
        const std::uint32_t list = stack_.back();
        if (N(list).kind != PtKind::kList) return Malformed("APPEND to something that is not a list");
        if (N(list).items.size() >= kMaxItems) {
          Error("PT-012", "container", op_at_, "more than 1048576 items in one list");
          return false;
        }
        N(list).items.push_back(value);
        break;
      }
      case 0x65: {  // APPENDS
        if (marks_.empty()) return Malformed("APPENDS without an open mark");
        const u64 m = marks_.back();
        marks_.pop_back();
        if (m <= (marks_.empty() ? 0 : marks_.back())) return Malformed("stack underflow");
        const std::uint32_t list = stack_[m - 1];
        if (N(list).kind != PtKind::kList) return Malformed("APPENDS to something that is not a list");
        for (u64 k = m; k < stack_.size(); ++k) {
          if (N(list).items.size() >= kMaxItems) {
            Error("PT-012", "container", op_at_, "more than 1048576 items in one list");
            return false;
          }
          N(list).items.push_back(stack_[k]);
        }
        stack_.resize(m);
        break;
      }
      case 0x81: case 0x92: case 0x69: case 0x6f: case 0x82: case 0x83: case 0x84:
        Error("PT-011", "opcode", op_at_,
              "opcode that constructs or names an object (NEWOBJ, NEWOBJ_EX, INST, OBJ, EXT)");
        return false;
      case 0x2e: {  // STOP
        if (!marks_.empty() || stack_.size() != 1) {
          return Malformed("STOP without exactly one value and no open mark");
        }
        if (pos != size) {
          op_at_ = pkl.ds + pos;
          return Malformed("bytes after STOP");
        }
        const std::uint32_t root = stack_.back();
        if (N(root).kind != PtKind::kDict) {
          Error("PT-017", "root", op_at_, "the root is not a dict");
          return false;
        }
        r_.root = root;
        return true;
      }
      default:
        return Malformed("opcode outside the subset");
    }
  }
}

// ---- section 6 ----
bool Reader::Flatten(std::uint32_t dict, const std::string& prefix, u64 depth) {
  const u64 ds = r_.pickle_begin;
  if (depth > kMaxDepth) {
    Error("PT-012", "depth", ds, "dicts nested deeper than 64");
    return false;
  }
  const std::size_t count = N(dict).items.size();
  for (std::size_t k = 0; k < count; k += 2) {
    if (++visits_ > kMaxVisits) {
      Error("PT-012", "depth", ds, "more than 1048576 nodes visited");
      return false;
    }
    const std::uint32_t key = N(dict).items[k], value = N(dict).items[k + 1];
    std::string text = N(key).kind == PtKind::kStr ? N(key).text : std::to_string(N(key).integer);
    if (text.empty()) {
      Error("PT-017", "key", ds, "empty dict key");
      return false;
    }
    std::string name = prefix + text;
    const PtKind kind = N(value).kind;
    if (kind == PtKind::kDict) {
      if (!Flatten(value, name + ".", depth + 1)) return false;
      continue;
    }
    if (!names_.insert(name).second) {
      Error("PT-017", "key", ds, "two flattened names collide", name);
      return false;
    }
    // Section 3: names' bytes plus tensors' C-order bytes within n + 2^26.
    output_ += name.size();
    if (output_ > output_limit_) {
      Error("PT-012", "container", ds, "flattened names and tensors exceed the output bound");
      return false;
    }
    if (kind == PtKind::kTensor) {
      const PtTensor& view = r_.all_tensors[N(value).tensor];
      output_ += static_cast<u128>(view.numel) * PtItemSize(view.dtype);
      if (output_ > output_limit_) {
        Error("PT-012", "container", ds, "flattened names and tensors exceed the output bound");
        return false;
      }
      PtTensor t = view;
      t.name = std::move(name);
      r_.tensors.push_back(std::move(t));
    } else {
      r_.values.emplace_back(std::move(name), value);
      value_depths_.push_back(depth + 1);
    }
  }
  return true;
}


bool Reader::WalkValue(std::uint32_t node, u64 depth) {
  // Iterative depth-first walk: (node, depth) pairs, children pushed in reverse.
  std::vector<std::pair<std::uint32_t, u64>> todo;
  todo.emplace_back(node, depth);
  const u64 ds = r_.pickle_begin;
  while (!todo.empty()) {
    const auto [i, d] = todo.back();
    todo.pop_back();
    if (++visits_ > kMaxVisits) {
      Error("PT-012", "depth", ds, "more than 1048576 nodes visited");
      return false;
    }
    if (d > kMaxDepth) {
      Error("PT-012", "depth", ds, "values nested deeper than 64");
      return false;
    }
    const PtNode& x = N(i);
    if (x.kind == PtKind::kTuple || x.kind == PtKind::kList) {
      for (std::size_t k = x.items.size(); k-- > 0;) todo.emplace_back(x.items[k], d + 1);
    } else if (x.kind == PtKind::kDict) {
      if (x.attributes != kPtNoNode) todo.emplace_back(x.attributes, d + 1);
      for (std::size_t k = x.items.size(); k >= 2; k -= 2) todo.emplace_back(x.items[k - 1], d + 1);
    }
  }
  return true;
}

void Reader::Run() {
  if (!ReadEnd() || !ReadCentral() || !ReadLocals() || !CheckRecords() || !Walk()) return;
  output_limit_ = static_cast<u128>(n_) + (u128{1} << 26);
  if (!Flatten(r_.root, "", 1)) return;
  for (std::size_t k = 0; k < r_.values.size(); ++k) {
    if (!WalkValue(r_.values[k].second, value_depths_[k])) return;
  }
  for (const Entry& en : entries_) {
    if (!IsStorageRecordName(en.record)) continue;
    if (storages_.count(std::string(en.record.substr(5))) == 0) {
      Warn("PT-102", "storage", en.h,
           "storage record not referenced by any persistent ID: " + std::string(en.record));
    }
  }
}

template <typename F>
void ForEachElement(const PtTensor& t, std::uint64_t isz, F&& f) {
  if (t.numel == 0) return;
  const std::size_t rank = t.shape.size();
  if (PtIsContiguous(t)) {
    const std::uint8_t* p = t.storage + t.storage_offset * isz;
    for (u64 i = 0; i < t.numel; ++i) f(p + i * isz);
    return;
  }
  // Odometer over all dimensions but the last; the last runs as a strided loop.
  const u64 inner = t.shape[rank - 1];
  const u64 inner_step = t.stride[rank - 1] * isz;
  std::vector<u64> index(rank, 0);
  u64 base = t.storage_offset;
  while (true) {
    const std::uint8_t* p = t.storage + base * isz;
    for (u64 j = 0; j < inner; ++j) f(p + j * inner_step);
    std::size_t k = rank - 1;
    while (true) {
      if (k == 0) return;
      --k;
      if (++index[k] < t.shape[k]) {
        base += t.stride[k];
        break;
      }
      base -= (t.shape[k] - 1) * t.stride[k];
      index[k] = 0;
    }
  }
}

inline void LoadElement(const std::uint8_t* src, u64 isz, bool swap, std::uint8_t* dst) {
  if (!swap) {
    std::memcpy(dst, src, isz);
  } else {
    for (u64 b = 0; b < isz; ++b) dst[b] = src[isz - 1 - b];
  }
}

}  // namespace

std::uint64_t PtItemSize(Dtype dtype) {
  switch (dtype) {
    case Dtype::kF64: case Dtype::kI64: return 8;
    case Dtype::kF32: case Dtype::kI32: return 4;
    case Dtype::kF16: case Dtype::kBF16: case Dtype::kI16: return 2;
    case Dtype::kI8: case Dtype::kU8: case Dtype::kBool: return 1;
    default: return 0;
  }
}

bool PtIsContiguous(const PtTensor& t) {
  u64 expected = 1;
  for (std::size_t k = t.shape.size(); k-- > 0;) {
    if (t.shape[k] != 1 && t.stride[k] != expected) return false;
    expected *= t.shape[k];
  }
  return true;
}

std::uint64_t PtStorageIndex(const PtTensor& t, std::uint64_t i) {
  u64 s = t.storage_offset;
  for (std::size_t k = t.shape.size(); k-- > 0;) {
    const u64 dim = t.shape[k];
    s += (i % dim) * t.stride[k];
    i /= dim;
  }
  return s;
}

std::uint64_t PtElementOffset(const PtTensor& t, std::uint64_t i) {
  return t.storage_begin + PtStorageIndex(t, i) * PtItemSize(t.dtype);
}

void CopyPtTensorBytes(const PtTensor& t, std::uint8_t* out) {
  const u64 isz = PtItemSize(t.dtype);
  if (!t.big_endian && PtIsContiguous(t)) {
    if (t.numel != 0) std::memcpy(out, t.storage + t.storage_offset * isz, t.numel * isz);
    return;
  }
  ForEachElement(t, isz, [&](const std::uint8_t* e) {
    LoadElement(e, isz, t.big_endian, out);
    out += isz;
  });
}

std::vector<std::uint8_t> PtTensorBytes(const PtTensor& t) {
  std::vector<std::uint8_t> bytes(t.numel * PtItemSize(t.dtype));
  CopyPtTensorBytes(t, bytes.data());
  return bytes;
}

bool DecodePtTensor(const PtTensor& t, float* out) {
  const bool swap = t.big_endian;
  switch (t.dtype) {
    case Dtype::kF32:
      if (!swap && PtIsContiguous(t)) {
        if (t.numel != 0) std::memcpy(out, t.storage + t.storage_offset * 4, t.numel * 4);
        return true;
      }
      ForEachElement(t, 4, [&](const std::uint8_t* e) {
        std::uint8_t b[4];
        LoadElement(e, 4, swap, b);
        std::memcpy(out++, b, 4);
      });
      return true;
    case Dtype::kF16:
    case Dtype::kBF16: {
      const bool half = t.dtype == Dtype::kF16;
      ForEachElement(t, 2, [&](const std::uint8_t* e) {
        const auto w = static_cast<std::uint16_t>(swap ? (e[1] | (e[0] << 8)) : (e[0] | (e[1] << 8)));
        *out++ = half ? F16ToF32(w) : BF16ToF32(w);
      });
      return true;
    }
    case Dtype::kF64:
      ForEachElement(t, 8, [&](const std::uint8_t* e) {
        std::uint8_t b[8];
        LoadElement(e, 8, swap, b);
        double v;
        std::memcpy(&v, b, 8);
        *out++ = static_cast<float>(v);
      });
      return true;
    default:
      return false;
  }
}

const PtNode* PtResult::Value(std::string_view name) const {
  for (const auto& [n, node] : values) {
    if (n == name) return &nodes[node];
  }
  return nullptr;
}

const PtTensor* PtResult::Tensor(std::string_view name) const {
  for (const PtTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const PtNode* PtResult::Item(const PtNode& dict, std::string_view key) const {
  if (dict.kind != PtKind::kDict) return nullptr;
  for (std::size_t k = 0; k + 1 < dict.items.size(); k += 2) {
    const PtNode& kn = nodes[dict.items[k]];
    if (kn.kind == PtKind::kStr && kn.text == key) return &nodes[dict.items[k + 1]];
  }
  return nullptr;
}

PtResult ReadPt(qd::ByteView file, const std::string& file_name) {
  PtResult result;
  Reader reader(file, file_name, &result);
  reader.Run();
  if (result.refused) {
    // Keep the findings only: a refused result offers no tables.
    result.tensors.clear();
    result.values.clear();
    result.nodes.clear();
    result.all_tensors.clear();
    result.root = kPtNoNode;
  }
  return result;
}

bool ClaimsPt(qd::ByteView file) {
  const std::uint8_t* d = file.data;
  const u64 n = file.size;
  if (n >= 9 && d[8] == '{') return false;  // a safetensors header
  // docs/pt.md 1.1: an archive opens with a local header, or with the end
  // record when it has no entry.
  if (n >= 4 && (Rd32(d) == 0x04034b50u || Rd32(d) == 0x06054b50u)) return true;
  static const std::uint8_t kLegacy[14] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                           0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  if (n >= 14 && std::memcmp(d, kLegacy, 14) == 0) return true;
  return n >= 262 && std::memcmp(d + 257, "ustar", 5) == 0;
}

}  // namespace qd::codec
