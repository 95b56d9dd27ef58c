// pt_test_builder.h: hand-built torch.save files for the codec-side tests.
// A tiny ZIP writer (torch.save's layout: flags 0x0808, `FB` padding to 64,
// data descriptors, zip64 end records; or Python zipfile's plain layout) and a
// tiny pickle builder (opcode bytes from the pickle opcode table,
// docs/pt.md 4.1). Expected values in the tests come from docs/pt.md and
// docs/bnb.md, never from the readers.
#ifndef QUANTDIFF_TESTS_PT_TEST_BUILDER_H_
#define QUANTDIFF_TESTS_PT_TEST_BUILDER_H_

#include <zlib.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "quantdiff/plain_data.h"

namespace qd::pt_test {

using Bytes = std::vector<std::uint8_t>;

inline void PutN(Bytes& b, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
inline void Set32(Bytes& b, std::size_t at, std::uint64_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline void Set16(Bytes& b, std::size_t at, std::uint64_t v) {
  for (int i = 0; i < 2; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline std::uint32_t Crc(const Bytes& d) {
  return static_cast<std::uint32_t>(crc32(crc32(0, Z_NULL, 0), d.data(), static_cast<uInt>(d.size())));
}

// ---- ZIP writer -----------------------------------------------------------------
struct ZEntry {
  std::string name;
  Bytes data;
  bool torch = true;  // torch layout (0x0808, FB padding, descriptor) or zipfile's
  Bytes central_extra = {};
};
struct Zip {
  Bytes bytes;
  std::vector<std::uint64_t> h, ds, central;
  std::uint64_t cd_off = 0, cd_size = 0, eocd = 0;
  qd::ByteView View() const { return {bytes.data(), bytes.size()}; }
};

inline Zip WriteZip(const std::vector<ZEntry>& es, bool zip64 = true) {
  Zip z;
  Bytes& b = z.bytes;
  for (const ZEntry& e : es) {
    const std::uint64_t h = b.size();
    z.h.push_back(h);
    PutN(b, 0x04034b50, 4);
    PutN(b, e.torch ? 0 : 20, 2);
    PutN(b, e.torch ? 0x0808 : 0, 2);
    PutN(b, 0, 2);  // stored
    PutN(b, 0, 4);  // time, date
    const std::uint32_t crc = Crc(e.data);
    PutN(b, e.torch ? 0 : crc, 4);
    PutN(b, e.torch ? 0 : e.data.size(), 4);
    PutN(b, e.torch ? 0 : e.data.size(), 4);
    PutN(b, e.name.size(), 2);
    std::uint64_t pad = 0;
    if (e.torch) {
      const std::uint64_t start = h + 30 + e.name.size() + 4;
      pad = (64 - start % 64) % 64;
    }
    PutN(b, e.torch ? 4 + pad : 0, 2);
    b.insert(b.end(), e.name.begin(), e.name.end());
    if (e.torch) {
      PutN(b, 0x4246, 2);
      PutN(b, pad, 2);
      b.insert(b.end(), pad, 'Z');
    }
    z.ds.push_back(b.size());
    b.insert(b.end(), e.data.begin(), e.data.end());
    if (e.torch) {
      PutN(b, 0x08074b50, 4);
      PutN(b, crc, 4);
      PutN(b, e.data.size(), 4);
      PutN(b, e.data.size(), 4);
    }
  }
  z.cd_off = b.size();
  for (std::size_t i = 0; i < es.size(); ++i) {
    const ZEntry& e = es[i];
    z.central.push_back(b.size());
    PutN(b, 0x02014b50, 4);
    PutN(b, 20, 2);
    PutN(b, 20, 2);
    PutN(b, e.torch ? 0x0808 : 0, 2);
    PutN(b, 0, 2);
    PutN(b, 0, 4);
    PutN(b, Crc(e.data), 4);
    PutN(b, e.data.size(), 4);
    PutN(b, e.data.size(), 4);
    PutN(b, e.name.size(), 2);
    PutN(b, e.central_extra.size(), 2);
    PutN(b, 0, 2);   // comment
    PutN(b, 0, 2);   // disk
    PutN(b, 0, 2);   // internal
    PutN(b, 0, 4);   // external
    PutN(b, z.h[i], 4);
    b.insert(b.end(), e.name.begin(), e.name.end());
    b.insert(b.end(), e.central_extra.begin(), e.central_extra.end());
  }
  z.cd_size = b.size() - z.cd_off;
  if (zip64) {
    const std::uint64_t zr = b.size();
    PutN(b, 0x06064b50, 4);
    PutN(b, 44, 8);
    PutN(b, 45, 2);
    PutN(b, 45, 2);
    PutN(b, 0, 4);
    PutN(b, 0, 4);
    PutN(b, es.size(), 8);
    PutN(b, es.size(), 8);
    PutN(b, z.cd_size, 8);
    PutN(b, z.cd_off, 8);
    PutN(b, 0x07064b50, 4);
    PutN(b, 0, 4);
    PutN(b, zr, 8);
    PutN(b, 1, 4);
  }
  z.eocd = b.size();
  PutN(b, 0x06054b50, 4);
  PutN(b, 0, 2);
  PutN(b, 0, 2);
  PutN(b, es.size(), 2);
  PutN(b, es.size(), 2);
  PutN(b, z.cd_size, 4);
  PutN(b, z.cd_off, 4);
  PutN(b, 0, 2);
  return z;
}

// ---- pickle builder ---------------------------------------------------------------
struct Pk {
  Bytes b;
  std::uint64_t at() const { return b.size(); }
  Pk& op(std::uint8_t o) { b.push_back(o); return *this; }
  Pk& raw(const std::string& s) { b.insert(b.end(), s.begin(), s.end()); return *this; }
  Pk& proto(int v = 2) { return op(0x80).op(static_cast<std::uint8_t>(v)); }
  Pk& str(const std::string& s) { op('X'); PutN(b, s.size(), 4); return raw(s); }
  Pk& sstr(const std::string& s) { op(0x8c); PutN(b, s.size(), 1); return raw(s); }
  Pk& i1(int v) { op('K'); PutN(b, static_cast<std::uint64_t>(v), 1); return *this; }
  Pk& i2(int v) { op('M'); PutN(b, static_cast<std::uint64_t>(v), 2); return *this; }
  Pk& i4(std::int32_t v) { op('J'); PutN(b, static_cast<std::uint32_t>(v), 4); return *this; }
  Pk& i8(std::int64_t v) { op(0x8a).op(8); PutN(b, static_cast<std::uint64_t>(v), 8); return *this; }
  Pk& fl(double d) {
    op('G');
    const auto bits = std::bit_cast<std::uint64_t>(d);
    for (int i = 7; i >= 0; --i) b.push_back(static_cast<std::uint8_t>(bits >> (8 * i)));
    return *this;
  }
  Pk& glob(const std::string& m, const std::string& n) { op('c'); raw(m + "\n"); return raw(n + "\n"); }
  Pk& mark() { return op('('); }
  Pk& tuple() { return op('t'); }
  Pk& reduce() { return op('R'); }
  Pk& none() { return op('N'); }
  Pk& dict() { return op('}'); }
  Pk& list() { return op(']'); }
  Pk& put(int i) { op('q'); PutN(b, static_cast<std::uint64_t>(i), 1); return *this; }
  Pk& get(int i) { op('h'); PutN(b, static_cast<std::uint64_t>(i), 1); return *this; }
  Pk& stop() { return op('.'); }
  Pk& od() { return glob("collections", "OrderedDict").op(')').reduce(); }
  Pk& ints(const std::vector<std::int64_t>& v) {
    mark();
    for (std::int64_t x : v) i8(x);
    return tuple();
  }
  Pk& pid(const std::string& key, const std::string& cls, std::int64_t numel) {
    mark().str("storage").glob("torch", cls).str(key).str("cpu").i8(numel).tuple();
    return op('Q');
  }
  // _rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())
  Pk& tensor(const std::string& key, const std::string& cls, std::int64_t numel,
             std::int64_t offset, const std::vector<std::int64_t>& size,
             const std::vector<std::int64_t>& stride) {
    glob("torch._utils", "_rebuild_tensor_v2").mark().pid(key, cls, numel).i8(offset);
    ints(size).ints(stride).op(0x89).od().tuple();
    return reduce();
  }
};

inline Bytes F32s(const std::vector<float>& v) {
  Bytes b;
  for (float f : v) PutN(b, std::bit_cast<std::uint32_t>(f), 4);
  return b;
}

struct Record {
  std::string name;  // without the prefix
  Bytes data;
};

// archive/data.pkl, archive/data/<k>..., extras, archive/version.
inline Zip Archive(const Bytes& pkl, const std::vector<Record>& storages = {},
            const std::vector<Record>& extras = {}, const std::string& version = "3\n") {
  std::vector<ZEntry> es;
  es.push_back({"archive/data.pkl", pkl});
  for (const Record& r : storages) es.push_back({"archive/data/" + r.name, r.data});
  for (const Record& r : extras) es.push_back({"archive/" + r.name, r.data});
  es.push_back({"archive/version", Bytes(version.begin(), version.end())});
  return WriteZip(es);
}

}  // namespace qd::pt_test

#endif  // QUANTDIFF_TESTS_PT_TEST_BUILDER_H_
