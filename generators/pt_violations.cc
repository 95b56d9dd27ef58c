// pt_violations.cc: .pt files that break one rule of docs/pt.md section 9
// each, with no check earlier in section 8's order failing: the ZIP (PT-002..
// PT-008), the records (PT-009, PT-010, PT-101, PT-102, PT-104) and the
// legacy format (PT-001) here, the pickle (PT-011..PT-017) in
// pt_pickle_violations.cc; the BNB-* rules a .pt file can break come from
// pt_bnb.cc. kPtRules maps each rule to its builder.
#include <cstring>
#include <string>
#include <vector>

#include "generators/pt_bnb.h"
#include "generators/pt_model.h"
#include "generators/pt_violations.h"

namespace qd::gen {
namespace {

using namespace pt_gen;

// ---- the ZIP (PT-002..PT-008) --------------------------------------------------------------

// What a ZIP rule's builder starts from: a random model's archive as written,
// its layout, and one entry (the victim), drawn before the builder breaks
// anything. The builders bind the members in this order.
struct ZipCase {
  PtDraft draft;
  std::vector<PtZipEntry> entries;
  PtZipOptions options;
  PtZipLayout layout;
  Bytes file;
  std::size_t count = 0;   // entries.size()
  std::size_t victim = 0;  // an index of entries
};

ZipCase BaseZip(Rng& rng) {
  ZipCase c;
  const Model m = BaseModel(rng);
  c.draft = Serialize(m);
  c.entries = Entries(c.draft);
  c.options = Options(c.draft);
  c.file = PtWriteZip(c.entries, c.options, &c.layout);
  c.count = c.entries.size();
  c.victim = Pick(rng, c.count);
  return c;
}

Generated ViolatePt002(const std::string& r, Rng& rng) {
  auto [d, entries, options, l, f, n, victim] = BaseZip(rng);
  switch (Pick(rng, 12)) {
    case 0: f.resize(Pick(rng, 22)); if (f.size() >= 4) f[0] = 'P'; break;
    case 1: f.insert(f.begin(), static_cast<std::uint8_t>(Pick(rng, 256) == 'P' ? 0 : 'Q')); break;
    case 2: Set16(&f, l.eocd + 20, 1 + Pick(rng, 100)); break;  // comment length, no comment
    case 3: for (std::uint64_t k = 1 + Pick(rng, 30); k > 0; --k) f.push_back(static_cast<std::uint8_t>(rng())); break;
    case 4: Set16(&f, l.eocd + 4 + 2 * Pick(rng, 2), 1); break;  // disk fields
    case 5: Set16(&f, l.eocd + 8, n + 1); break;                // entries on this disk
    case 6: {  // the directory does not end at the end records
      const std::uint64_t off = l.cd_off - 1;
      Set32(&f, l.eocd + 16, off);
      if (l.zip64) Set64(&f, l.zip64_record + 48, off);
      break;
    }
    case 7: {  // no entry
      Set16(&f, l.eocd + 8, 0);
      Set16(&f, l.eocd + 10, 0);
      if (l.zip64) {
        Set64(&f, l.zip64_record + 24, 0);
        Set64(&f, l.zip64_record + 32, 0);
      }
      break;
    }
    case 8: {  // more entries than the directory can hold
      const std::uint64_t count = l.cd_size / 46 + 1 + Pick(rng, 60000 - l.cd_size / 46);
      Set16(&f, l.eocd + 8, count);
      Set16(&f, l.eocd + 10, count);
      if (l.zip64) {
        Set64(&f, l.zip64_record + 24, count);
        Set64(&f, l.zip64_record + 32, count);
      }
      break;
    }
    case 9:
      if (l.zip64) {  // a zip64 field out of line
        switch (Pick(rng, 5)) {
          case 0: Set32(&f, l.locator + 16, 2); break;                         // disk count
          case 1: Set64(&f, l.locator + 8, l.zip64_record - 1); break;         // z + 56 != L
          case 2: Set64(&f, l.zip64_record + 4, 45); break;                    // record size
          case 3: Set64(&f, l.zip64_record + 24, n + 1); break;                // counts differ
          default: Set32(&f, l.locator + 4, 1); break;                         // locator disk
        }
      } else {  // a saturated classic value without a locator
        Set16(&f, l.eocd + 10, 0xFFFF);
        Set16(&f, l.eocd + 8, 0xFFFF);
      }
      break;
    case 10:
      if (l.zip64) {  // the classic value is not saturated and differs from zip64's
        Set32(&f, l.eocd + 12, l.cd_size + 1 + Pick(rng, 5));
      } else {
        Set32(&f, l.eocd + 16, 0xFFFFFFFF);
      }
      break;
    default: {  // an archive of no entries at all: just an end record
      f.assign(22, 0);
      Set32(&f, 0, 0x06054b50);
    }
  }
  return Done(std::move(f), r, "end records outside the subset");
}

Generated ViolatePt003(const std::string& r, Rng& rng) {
  auto [d, entries, options, l, f, n, victim] = BaseZip(rng);
  const PtZipLayout::Entry& le = l.entries[victim];
  const std::uint64_t c = le.central;
  switch (Pick(rng, 9)) {
    case 0: f[c + Pick(rng, 4)] ^= static_cast<std::uint8_t>(1 + Pick(rng, 255)); break;  // signature
    case 1: {  // a flag outside bits 3 and 11 (bit 0: encryption)
      const std::uint16_t bits[] = {0x0001, 0x0002, 0x0004, 0x0040, 0x2000, 0x0010, 0x0100, 0x0041};
      const std::uint16_t bit = bits[Pick(rng, std::size(bits))];
      f[c + 8] |= static_cast<std::uint8_t>(bit & 0xff);
      f[c + 9] |= static_cast<std::uint8_t>(bit >> 8);
      break;
    }
    case 2: Set16(&f, c + 10, Coin(rng) ? 8 : 1 + Pick(rng, 20)); break;  // method (deflate)
    case 3: Set32(&f, c + 20, Get32(f, c + 20) + 1 + Pick(rng, 9)); break;  // compressed != uncompressed
    case 4: Set16(&f, c + 34, 1 + Pick(rng, 3)); break;                     // disk start
    case 5: {  // saturated sizes without a zip64 extra field
      Set32(&f, c + 20, 0xFFFFFFFF);
      Set32(&f, c + 24, 0xFFFFFFFF);
      break;
    }
    case 6: {  // extra field not filled exactly / id twice / zip64 too short
      const Bytes extras[] = {
          {0xCA, 0xFE, 0x08, 0x00, 1, 2, 3, 4},
          {0xCA, 0xFE, 0x00, 0x00, 0xCA, 0xFE, 0x00, 0x00},
          {0x01},
          {0xCA, 0xFE, 0x02, 0x00, 1, 2, 3},
      };
      entries[victim].central_extra = extras[Pick(rng, 4)];
      f = PtWriteZip(entries, options, &l);
      break;
    }
    case 7: {  // a name running past the directory (last entry)
      const std::uint64_t last = l.entries.back().central;
      Set16(&f, last + 28, l.cd_size + Pick(rng, 100));
      break;
    }
    default: {  // bytes after the last entry, inside cd_size
      options.central_tail = Bytes(1 + Pick(rng, 45), 0x00);
      f = PtWriteZip(entries, options, &l);
    }
  }
  return Done(std::move(f), r, "central directory entry outside the subset");
}

Generated ViolatePt004(const std::string& r, Rng& rng) {
  auto [d, entries, options, l, f, n, victim] = BaseZip(rng);
  const std::string p = d.prefix;
  const std::size_t i = 1 + Pick(rng, n - 1);  // not the first: its prefix is P
  std::string rest = entries[i].name.substr(p.size() + 1);
  const std::string bad[] = {
      p + "/../" + rest, "/" + p + "/" + rest, p + "\\" + rest, p + "/" + rest + "\x01",
      p + "/x\xff" + rest, rest.find('/') == std::string::npos ? rest : "data.pkl",
      "other/" + rest, p + "//" + rest, p + "/./" + rest, p + "/" + rest + "/",
      p + "/\xc0\xaf" + rest, p + "/" + rest + "\x7f", p + "/\xed\xa0\x80" + rest,
  };
  entries[i].name = bad[Pick(rng, std::size(bad))];
  if (Coin(rng, 4)) {  // or the first entry, escaping at once
    entries[i].name = d.prefix + "/" + rest;
    entries[0].name = Coin(rng) ? "../data.pkl" : "/" + entries[0].name;
  }
  return Done(PtWriteZip(entries, options), r, "entry name escapes the archive");
}

Generated ViolatePt005(const std::string& r, Rng& rng) {
  auto [d, entries, options, l, f, n, victim] = BaseZip(rng);
  PtZipEntry dup = entries[victim];
  if (Coin(rng)) dup.data.push_back('x');
  entries.insert(entries.begin() + static_cast<std::ptrdiff_t>(victim + 1 + Pick(rng, n - victim)), dup);
  return Done(PtWriteZip(entries, options), r, "two entries with one name");
}

Generated ViolatePt006(const std::string& r, Rng& rng) {
  auto [d, entries, options, l, f, n, victim] = BaseZip(rng);
  const PtZipLayout::Entry& le = l.entries[victim];
  const std::uint64_t h = le.local;
  const bool torch = entries[victim].torch_style;
  switch (Pick(rng, torch ? 11 : 7)) {
    case 0: {  // signature (not the first entry's: that is the file's PT-002 check)
      // drawn in this order so every compiler makes the same bytes
      const auto flip = static_cast<std::uint8_t>(1 + Pick(rng, 255));
      const std::size_t entry = 1 + Pick(rng, n - 1);
      const std::uint64_t byte = Pick(rng, 4);
      f[l.entries[entry].local + byte] ^= flip;
      break;
    }
    case 1: f[h + 30 + Pick(rng, entries[victim].name.size())] ^= 0x20; break;            // name
    case 2: f[h + 6] ^= Coin(rng) ? 0x08 : 0x00, f[h + 7] ^= 0x08; break;                // flags
    case 3: Set16(&f, h + 8, 8); break;                                                   // method
    case 4: Set32(&f, l.entries[victim].central + 42, l.cd_off - 29 + Pick(rng, 29)); break;  // h + 30 > cd_off
    case 5: {  // central sizes one larger: the data or descriptor moves
      const std::uint64_t c = le.central;
      Set32(&f, c + 20, Get32(f, c + 20) + 1);
      Set32(&f, c + 24, Get32(f, c + 24) + 1);
      break;
    }
    case 6: {  // local CRC disagrees (bit 3 clear: the CRC must equal; set: 0 or equal)
      std::uint32_t crc = Get32(f, le.central + 16) ^ (1u << Pick(rng, 32));
      if (crc == 0) crc = 1;
      Set32(&f, h + 14, crc);
      break;
    }
    case 7: {  // FB padding byte not Z
      if (le.fb_size > 0) {
        f[le.fb + Pick(rng, le.fb_size)] = static_cast<std::uint8_t>(Coin(rng) ? 0xA5 : 'z');
      } else {
        Set32(&f, le.end - 16, 0x08074b51);
      }
      break;
    }
    case 8: Set32(&f, le.end - 16, 0x08074b50 ^ (1u << Pick(rng, 32))); break;  // descriptor signature
    case 9: Set32(&f, le.end - 12 + 4 * Pick(rng, 3), Get32(f, le.end - 12) ^ 0x100); break;  // descriptor values
    default: {  // the local sizes set but not equal to the central size
      // drawn in this order so every compiler makes the same bytes
      const std::uint64_t more = 1 + Pick(rng, 4);
      const std::uint64_t field = Pick(rng, 2);
      Set32(&f, h + 18 + 4 * field, Get32(f, le.central + 20) + more);
    }
  }
  return Done(std::move(f), r, "local header disagrees with the central directory");
}

Generated ViolatePt007(const std::string& r, Rng& rng) {
  auto [d, entries, options, l, f, n, victim] = BaseZip(rng);
  // An entry whose local header lies inside another entry's data.
  PtZipEntry inner;
  inner.name = d.prefix + "/data/" + std::to_string(100 + Pick(rng, 100));
  // drawn in this order so every compiler makes the same bytes
  const auto fill = static_cast<std::uint8_t>(rng());
  inner.data = Bytes(Pick(rng, 20), fill);
  inner.torch_style = false;
  PtZipEntry outer;
  outer.name = d.prefix + "/blob" + std::to_string(Pick(rng, 10));
  outer.torch_style = Coin(rng);
  const std::uint64_t lead = Pick(rng, 40);
  outer.data = Bytes(lead, 0x41);
  const Bytes record = PtLocalRecord(inner.name, inner.data);
  outer.data.insert(outer.data.end(), record.begin(), record.end());
  outer.data.resize(outer.data.size() + Pick(rng, 20), 0x42);
  const std::size_t at = Pick(rng, n + 1);
  entries.insert(entries.begin() + static_cast<std::ptrdiff_t>(at), outer);
  inner.embed_in = static_cast<int>(at);
  inner.embed_at = lead;
  entries.insert(entries.begin() + static_cast<std::ptrdiff_t>(at + 1 + Pick(rng, n + 1 - at)), inner);
  return Done(PtWriteZip(entries, options), r, "an entry inside another entry's data");
}

Generated ViolatePt008(const std::string& r, Rng& rng) {
  auto [d, entries, options, l, f, n, victim] = BaseZip(rng);
  // A data byte changed, or a CRC of 0 recorded consistently everywhere.
  std::size_t i = victim;
  for (std::size_t k = 0; k < n && entries[i].data.empty(); ++k) i = (i + 1) % n;
  const PtZipLayout::Entry& e = l.entries[i];
  if (Coin(rng)) {
    f[e.data_start + Pick(rng, entries[i].data.size())] ^= static_cast<std::uint8_t>(1 + Pick(rng, 255));
  } else {
    Set32(&f, e.central + 16, 0);
    if (entries[i].torch_style) {
      Set32(&f, e.end - 12, 0);
    } else {
      Set32(&f, e.local + 14, 0);
    }
  }
  return Done(std::move(f), r, "CRC-32 mismatch");
}

// ---- the records (PT-009, PT-010, PT-101, PT-102, PT-104) ----------------------------------

// What a record rule's builder starts from: a random model's records, and
// the name its version record has. The builders bind the members in order.
struct RecordCase {
  PtDraft draft;
  std::string version_name;
};

RecordCase BaseRecords(Rng& rng) {
  const Model m = BaseModel(rng);
  return {Serialize(m), m.data_version ? ".data/version" : "version"};
}

Generated ViolatePt009(const std::string& r, Rng& rng) {
  auto [d, version_name] = BaseRecords(rng);
  switch (Pick(rng, 4)) {
    case 0: d.records.erase(d.records.begin()); break;  // no data.pkl
    case 1: d.records.erase(d.records.begin() + static_cast<std::ptrdiff_t>(RecordIndex(d, version_name))); break;
    case 2: {
      const char* const bad[] = {"", "\n", "3\n\n", "x", " 3", "3 ", "-3", "+3", "3\r\n", "3.0",
                                 "123456789012345678901", "\n3", "three"};
      d.records[RecordIndex(d, version_name)].second = TextBytes(bad[Pick(rng, std::size(bad))]);
      break;
    }
    default: {  // .data/version wins over a good version record
      if (version_name == "version") {
        d.records.emplace_back(".data/version", TextBytes("3a\n"));
      } else {
        d.records[RecordIndex(d, version_name)].second = TextBytes("");
        d.records.emplace_back("version", TextBytes("3\n"));
      }
    }
  }
  return Done(PtWriteDraft(d), r, "data.pkl or version record missing or malformed");
}

Generated ViolatePt010(const std::string& r, Rng& rng) {
  auto [d, version_name] = BaseRecords(rng);
  const char* const bad[] = {"", "Little", "little\n", "big ", "LITTLE", "middle", "littl", "bigg", "little "};
  const std::size_t i = RecordIndex(d, "byteorder");
  const std::string text = bad[Pick(rng, std::size(bad))];
  if (i < d.records.size()) {
    d.records[i].second = TextBytes(text);
  } else {
    d.records.insert(d.records.begin() + 1, {"byteorder", TextBytes(text)});
  }
  return Done(PtWriteDraft(d), r, "byteorder neither little nor big");
}

Generated ViolatePt101(const std::string& r, Rng& rng) {
  auto [d, version_name] = BaseRecords(rng);
  const char* const names[] = {"extra.txt", "data/0/x", ".data/foo", "data.pkl.bak", "xl/abc",
                               ".format_version2", "code/__torch__.py", "constants.pkl"};
  // drawn in this order so every compiler makes the same bytes
  const char* const name = names[Pick(rng, std::size(names))];
  const std::size_t at = 1 + Pick(rng, d.records.size());
  d.records.insert(d.records.begin() + static_cast<std::ptrdiff_t>(at), {name, TextBytes("ignored")});
  return Done(PtWriteDraft(d), r, "unknown record (warning)");
}

Generated ViolatePt102(const std::string& r, Rng& rng) {
  auto [d, version_name] = BaseRecords(rng);
  // drawn in this order so every compiler makes the same bytes
  std::pair<std::string, Bytes> record = {"data/unused" + std::to_string(Pick(rng, 100)), Bytes(Pick(rng, 12), 7)};
  const std::size_t at = 1 + Pick(rng, d.records.size());
  d.records.insert(d.records.begin() + static_cast<std::ptrdiff_t>(at), std::move(record));
  return Done(PtWriteDraft(d), r, "storage record no persistent ID names (warning)");
}

Generated ViolatePt104(const std::string& r, Rng& rng) {
  auto [d, version_name] = BaseRecords(rng);
  const char* const versions[] = {"1", "2\n", "4", "10\n", "0", "12345"};
  d.records[RecordIndex(d, version_name)].second = TextBytes(versions[Pick(rng, std::size(versions))]);
  return Done(PtWriteDraft(d), r, "version other than 3 (warning)");
}

// ---- the legacy format (PT-001) ------------------------------------------------------------

Generated ViolatePt001(const std::string&, Rng& rng) {
  Bytes f;
  if (Coin(rng, 3)) {  // a tar archive: ustar at 257
    f.assign(512 * (2 + Pick(rng, 2)), 0);
    const std::string name = "storages";
    std::memcpy(f.data(), name.data(), name.size());
    std::memcpy(f.data() + 257, Coin(rng) ? "ustar\0" "00" : "ustar  \0", 8);
    f[0] = 's';
  } else {
    const std::uint8_t magic[] = {0x80, 0x02, 0x8A, 0x0A, 0x6C, 0xFC, 0x9C, 0x46, 0xF9, 0x20, 0x6A, 0xA8, 0x50, 0x19};
    f.assign(std::begin(magic), std::end(magic));
    AddText(&f, ".\x80\x02M\xe9\x03.\x80\x02}q\x00(X\x10\x00\x00\x00protocol_versionq\x01M\xe9\x03u."s);
    for (std::uint64_t k = Pick(rng, 64); k > 0; --k) f.push_back(static_cast<std::uint8_t>(rng()));
  }
  return Done(std::move(f), "PT-001", "legacy torch serialization");
}

// Rules -> builders (docs/pt.md section 9), in the order PtViolableRules
// lists them: each builder draws its family's base file (BaseZip,
// BaseRecords, BasePickleModel) and breaks the one rule.
struct PtRule {
  const char* rule;
  Generated (*build)(const std::string& rule, Rng& rng);
};
constexpr PtRule kPtRules[] = {
    {"PT-001", &ViolatePt001}, {"PT-002", &ViolatePt002}, {"PT-003", &ViolatePt003},
    {"PT-004", &ViolatePt004}, {"PT-005", &ViolatePt005}, {"PT-006", &ViolatePt006},
    {"PT-007", &ViolatePt007}, {"PT-008", &ViolatePt008}, {"PT-009", &ViolatePt009},
    {"PT-010", &ViolatePt010}, {"PT-011", &ViolatePt011}, {"PT-012", &ViolatePt012},
    {"PT-013", &ViolatePt013}, {"PT-014", &ViolatePt014}, {"PT-015", &ViolatePt015},
    {"PT-016", &ViolatePt016}, {"PT-017", &ViolatePt017}, {"PT-101", &ViolatePt101},
    {"PT-102", &ViolatePt102}, {"PT-104", &ViolatePt104},
};

}  // namespace

std::vector<std::string> PtViolableRules() {
  std::vector<std::string> rules;
  for (const PtRule& r : kPtRules) rules.emplace_back(r.rule);
  // The bitsandbytes readers run on an accepted file's tensor table (docs/pt.md 6.4, 8 step 8).
  for (std::string& r : PtBnbViolableRules()) rules.push_back(std::move(r));
  return rules;
}

Generated PtViolation(std::string_view rule, Rng& rng) {
  const std::string r(rule);
  if (r.rfind("BNB-", 0) == 0) return PtBnbViolation(r, rng);
  for (const PtRule& entry : kPtRules) {
    if (r == entry.rule) return entry.build(r, rng);
  }
  return PtValid(rng);
}

}  // namespace qd::gen
