// pt_test_support.h: the hand-written ZIP and pickle builders the oracle's
// .pt tests share (pt_oracle_test.cc, bnb_pt_oracle_test.cc). Test code
// only; like the oracles it includes nothing from codecs/.
//
// Zip() writes entries in Python zipfile's style (version 20, flags 0, no
// descriptor, no extra field) unless ZipStyle says otherwise, so the layout
// is plain arithmetic: entry i of name length L_i and data size D_i has its
// local header at h_i = sum_{j<i} (30 + L_j + D_j) and its data at
// h_i + 30 + L_i. Pkl writes pickle opcodes one by one.
#ifndef QUANTDIFF_ORACLES_PT_TEST_SUPPORT_H_
#define QUANTDIFF_ORACLES_PT_TEST_SUPPORT_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace qd::oracle::pt_test {

using Bytes = std::vector<std::uint8_t>;

inline void Put16(Bytes* b, std::uint64_t v) {
  for (int i = 0; i < 2; ++i) b->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
inline void Put32(Bytes* b, std::uint64_t v) {
  for (int i = 0; i < 4; ++i) b->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
inline void Put64(Bytes* b, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
inline void Set32(Bytes* b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) (*b)[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline void Set16(Bytes* b, std::size_t at, std::uint16_t v) {
  for (int i = 0; i < 2; ++i) (*b)[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline Bytes Text(const std::string& s) { return Bytes(s.begin(), s.end()); }

// CRC-32 of the test's own, table-driven (a different construction from
// the reader's bit loop; the check value is zlib.crc32(b"123456789")).
inline std::uint32_t TestCrc(const Bytes& data) {
  static std::uint32_t table[256];
  static bool ready = false;
  if (!ready) {
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    ready = true;
  }
  std::uint32_t crc = 0xFFFFFFFFu;
  for (const std::uint8_t b : data) crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

struct ZipEntry {
  std::string name;
  Bytes data;
};

struct ZipStyle {
  bool torch = false;  // FB padding to 64, flags 0x0808, descriptor
  bool zip64 = false;  // zip64 end record and locator
};

inline Bytes Zip(const std::vector<ZipEntry>& entries, ZipStyle style = {}) {
  Bytes out;
  std::vector<std::uint64_t> offsets;
  for (const ZipEntry& e : entries) {
    offsets.push_back(out.size());
    const std::uint16_t flags = style.torch ? 0x0808 : 0;
    const std::uint32_t crc = TestCrc(e.data);
    std::uint64_t pad = 0;
    if (style.torch) {
      const std::uint64_t start = out.size() + 30 + e.name.size() + 4;
      pad = (64 - start % 64) % 64;
    }
    Put32(&out, 0x04034b50);
    Put16(&out, style.torch ? 0 : 20);
    Put16(&out, flags);
    Put16(&out, 0);  // method
    Put32(&out, 0);  // time, date
    Put32(&out, style.torch ? 0 : crc);
    Put32(&out, style.torch ? 0 : e.data.size());
    Put32(&out, style.torch ? 0 : e.data.size());
    Put16(&out, e.name.size());
    Put16(&out, style.torch ? 4 + pad : 0);
    out.insert(out.end(), e.name.begin(), e.name.end());
    if (style.torch) {
      Put16(&out, 0x4246);
      Put16(&out, pad);
      for (std::uint64_t i = 0; i < pad; ++i) out.push_back('Z');
    }
    out.insert(out.end(), e.data.begin(), e.data.end());
    if (style.torch) {
      Put32(&out, 0x08074b50);
      Put32(&out, crc);
      Put32(&out, e.data.size());
      Put32(&out, e.data.size());
    }
  }
  const std::uint64_t cd_off = out.size();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const ZipEntry& e = entries[i];
    Put32(&out, 0x02014b50);
    Put16(&out, 20);
    Put16(&out, 20);
    Put16(&out, style.torch ? 0x0808 : 0);
    Put16(&out, 0);
    Put32(&out, 0);
    Put32(&out, TestCrc(e.data));
    Put32(&out, e.data.size());
    Put32(&out, e.data.size());
    Put16(&out, e.name.size());
    Put16(&out, 0);
    Put16(&out, 0);
    Put16(&out, 0);
    Put16(&out, 0);
    Put32(&out, 0);
    Put32(&out, offsets[i]);
    out.insert(out.end(), e.name.begin(), e.name.end());
  }
  const std::uint64_t cd_size = out.size() - cd_off;
  if (style.zip64) {
    const std::uint64_t z = out.size();
    Put32(&out, 0x06064b50);
    Put64(&out, 44);
    Put16(&out, 45);
    Put16(&out, 45);
    Put32(&out, 0);
    Put32(&out, 0);
    Put64(&out, entries.size());
    Put64(&out, entries.size());
    Put64(&out, cd_size);
    Put64(&out, cd_off);
    Put32(&out, 0x07064b50);
    Put32(&out, 0);
    Put64(&out, z);
    Put32(&out, 1);
  }
  Put32(&out, 0x06054b50);
  Put16(&out, 0);
  Put16(&out, 0);
  Put16(&out, entries.size());
  Put16(&out, entries.size());
  Put32(&out, cd_size);
  Put32(&out, cd_off);
  Put16(&out, 0);
  return out;
}

// ---------------------------------------------------------------------------
// Pickle bytes, opcode by opcode.

struct Pkl {
  Bytes b;
  std::size_t pos() const { return b.size(); }
  Pkl& op(std::uint8_t x) {
    b.push_back(x);
    return *this;
  }
  Pkl& raw(const std::string& s) {
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Pkl& proto(int v = 2) { return op(0x80).op(static_cast<std::uint8_t>(v)); }
  Pkl& str(const std::string& s) {
    if (s.size() < 256) {
      op(0x8C).op(static_cast<std::uint8_t>(s.size()));
    } else {
      op(0x58);
      Put32(&b, s.size());
    }
    return raw(s);
  }
  Pkl& integer(std::int64_t v) {
    if (v >= 0 && v < 256) return op(0x4B).op(static_cast<std::uint8_t>(v));
    op(0x8A).op(8);
    Put64(&b, static_cast<std::uint64_t>(v));
    return *this;
  }
  Pkl& global(const std::string& m, const std::string& n) { return op(0x63).raw(m + "\n" + n + "\n"); }
  Pkl& mark() { return op(0x28); }
  Pkl& tuple() { return op(0x74); }
  Pkl& dict() { return op(0x7D); }
  Pkl& setitem() { return op(0x73); }
  Pkl& setitems() { return op(0x75); }
  Pkl& reduce() { return op(0x52); }
  Pkl& stop() { return op(0x2E); }
  Pkl& ints(const std::vector<std::int64_t>& v) {
    mark();
    for (const std::int64_t x : v) integer(x);
    return tuple();
  }
  Pkl& ordered() { return global("collections", "OrderedDict").op(0x29).reduce(); }
  Pkl& pid(const std::string& cls, const std::string& key, std::int64_t numel) {
    mark().str("storage").global("torch", cls).str(key).str("cpu").integer(numel).tuple();
    return op(0x51);
  }
  // _rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())
  Pkl& tensor(const std::string& cls, const std::string& key, std::int64_t numel, std::int64_t offset,
              const std::vector<std::int64_t>& size, const std::vector<std::int64_t>& stride) {
    global("torch._utils", "_rebuild_tensor_v2").mark().pid(cls, key, numel);
    integer(offset).ints(size).ints(stride).op(0x89).ordered().tuple();
    return reduce();
  }
};

inline Bytes F32s(const std::vector<float>& v) {
  Bytes out;
  for (const float x : v) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &x, 4);
    Put32(&out, bits);
  }
  return out;
}

}  // namespace qd::oracle::pt_test

#endif  // QUANTDIFF_ORACLES_PT_TEST_SUPPORT_H_
