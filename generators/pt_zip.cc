// pt_zip.cc: the .pt generator's ZIP writer: stored entries laid out as
// torch's PyTorchStreamWriter lays them out (FB padding to 64 bytes, flags
// 0x0808 with a data descriptor, zip64 end records) or as Python's zipfile
// does (docs/pt.md section 2).
#include <array>

#include "generators/pt_model.h"

namespace qd::gen {

using namespace pt_gen;

std::uint32_t PtCrc32(const std::uint8_t* data, std::size_t size) {
  static const auto table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) c = table[(c ^ data[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::vector<std::uint8_t> PtLocalRecord(const std::string& name, const std::vector<std::uint8_t>& data) {
  Bytes b;
  Add32(&b, 0x04034b50);
  Add16(&b, 20);
  Add16(&b, 0);
  Add16(&b, 0);
  Add16(&b, 0);
  Add16(&b, 0x21);
  Add32(&b, PtCrc32(data.data(), data.size()));
  Add32(&b, data.size());
  Add32(&b, data.size());
  Add16(&b, name.size());
  Add16(&b, 0);
  AddText(&b, name);
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

std::vector<std::uint8_t> PtWriteZip(const std::vector<PtZipEntry>& entries, const PtZipOptions& options,
                                     PtZipLayout* layout) {
  Bytes f;
  PtZipLayout l;
  l.entries.resize(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const PtZipEntry& e = entries[i];
    if (e.embed_in >= 0) continue;
    PtZipLayout::Entry& le = l.entries[i];
    const std::uint32_t crc = PtCrc32(e.data.data(), e.data.size());
    le.local = f.size();
    Add32(&f, 0x04034b50);
    if (e.torch_style) {
      // torch: version 0, flags 0x0808, no time, CRC and sizes in the descriptor.
      Add16(&f, 0);
      Add16(&f, 0x0808);
      Add16(&f, 0);
      Add32(&f, 0);
      Add32(&f, 0);
      Add32(&f, 0);
      Add32(&f, 0);
      // FB field: Z bytes so that the data starts at a multiple of 64 [W getPadding].
      const std::uint64_t start = le.local + 30 + e.name.size() + 4;
      const std::uint64_t pad = (64 - start % 64) % 64;
      Add16(&f, e.name.size());
      Add16(&f, 4 + pad);
      AddText(&f, e.name);
      Add16(&f, 0x4246);
      Add16(&f, pad);
      le.fb = f.size();
      le.fb_size = pad;
      f.insert(f.end(), pad, 'Z');
    } else {
      Add16(&f, 20);
      Add16(&f, 0);
      Add16(&f, 0);
      Add16(&f, 0);
      Add16(&f, 0x21);
      Add32(&f, crc);
      Add32(&f, e.data.size());
      Add32(&f, e.data.size());
      Add16(&f, e.name.size());
      Add16(&f, 0);
      AddText(&f, e.name);
    }
    le.data_start = f.size();
    f.insert(f.end(), e.data.begin(), e.data.end());
    if (e.torch_style) {
      Add32(&f, 0x08074b50);
      Add32(&f, crc);
      Add32(&f, e.data.size());
      Add32(&f, e.data.size());
    }
    le.end = f.size();
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const PtZipEntry& e = entries[i];
    if (e.embed_in < 0) continue;
    PtZipLayout::Entry& le = l.entries[i];
    le.local = l.entries[e.embed_in].data_start + e.embed_at;
    le.data_start = le.local + 30 + e.name.size();
    le.end = le.data_start + e.data.size();
  }
  l.cd_off = f.size();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const PtZipEntry& e = entries[i];
    const bool torch = e.torch_style && e.embed_in < 0;
    l.entries[i].central = f.size();
    Add32(&f, 0x02014b50);
    Add16(&f, torch ? 0 : 0x0314);  // version made by
    Add16(&f, torch ? 0 : 20);      // version needed
    Add16(&f, torch ? 0x0808 : 0);
    Add16(&f, 0);
    Add16(&f, 0);
    Add16(&f, torch ? 0 : 0x21);
    Add32(&f, PtCrc32(e.data.data(), e.data.size()));
    Add32(&f, e.data.size());
    Add32(&f, e.data.size());
    Add16(&f, e.name.size());
    Add16(&f, e.central_extra.size());
    Add16(&f, 0);
    Add16(&f, 0);
    Add16(&f, 0);
    Add32(&f, torch ? 0 : 0x01800000u);
    Add32(&f, l.entries[i].local);
    AddText(&f, e.name);
    f.insert(f.end(), e.central_extra.begin(), e.central_extra.end());
  }
  f.insert(f.end(), options.central_tail.begin(), options.central_tail.end());
  l.cd_size = f.size() - l.cd_off;
  if (options.zip64_end) {
    l.zip64 = true;
    l.zip64_record = f.size();
    Add32(&f, 0x06064b50);
    Add64(&f, 44);
    Add16(&f, 0x031e);
    Add16(&f, 0x2d);
    Add32(&f, 0);
    Add32(&f, 0);
    Add64(&f, entries.size());
    Add64(&f, entries.size());
    Add64(&f, l.cd_size);
    Add64(&f, l.cd_off);
    l.locator = f.size();
    Add32(&f, 0x07064b50);
    Add32(&f, 0);
    Add64(&f, l.zip64_record);
    Add32(&f, 1);
  }
  l.eocd = f.size();
  Add32(&f, 0x06054b50);
  Add16(&f, 0);
  Add16(&f, 0);
  Add16(&f, entries.size());
  Add16(&f, entries.size());
  Add32(&f, l.cd_size);
  Add32(&f, l.cd_off);
  Add16(&f, 0);
  if (layout) *layout = std::move(l);
  return f;
}

}  // namespace qd::gen
