// pt_violations.cc: .pt files that break one rule of docs/pt.md section 9
// each, with no check earlier in section 8's order failing: the ZIP (PT-002..
// PT-008), the records (PT-009, PT-010, PT-101, PT-102, PT-104), the pickle
// (PT-011..PT-017) and the legacy format (PT-001); the BNB-* rules a .pt file
// can break come from pt_bnb.cc.
#include <map>
#include <set>

#include "generators/pt_bnb.h"
#include "generators/pt_model.h"

namespace qd::gen {
namespace {

using namespace pt_gen;

// ---- violations by rule -----------------------------------------------------------------

// Opcode sequences that push one value (inserted as a dict value).
V RawValue(const std::string& ops) { return Raw(ops); }

std::string U32Text(std::uint32_t v) {
  std::string s;
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
  return s;
}

std::string GlobalOp(const std::string& module, const std::string& name) {
  return "c" + module + "\n" + name + "\n";
}

std::string BinUnicode(const std::string& s) { return "X" + U32Text(static_cast<std::uint32_t>(s.size())) + s; }

// Inserts a raw value under a fresh key at a random place of the root.
void InsertRaw(Model& m, const std::string& ops, Rng& rng) {
  const std::size_t at = Pick(rng, m.root->entries.size() + 1);
  m.root->entries.insert(m.root->entries.begin() + static_cast<std::ptrdiff_t>(at),
                         {Str("raw" + std::to_string(m.counter++)), RawValue(ops)});
}

// The tensor added last by BaseModel ("tail<n>.weight", F32 [2, 3]).
Tensor& TailTensor(Model& m) { return m.tensors[m.root->entries.back().second->tensor]; }

Generated ZipViolation(const std::string& r, Rng& rng) {
  Model m = BaseModel(rng);
  PtDraft d = Serialize(m);
  std::vector<PtZipEntry> entries = Entries(d);
  PtZipOptions options = Options(d);
  PtZipLayout l;
  Bytes f = PtWriteZip(entries, options, &l);
  const std::size_t n = entries.size();
  const std::size_t victim = Pick(rng, n);
  const PtZipLayout::Entry& le = l.entries[victim];

  if (r == "PT-002") {
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
  if (r == "PT-003") {
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
  if (r == "PT-004") {
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
  if (r == "PT-005") {
    PtZipEntry dup = entries[victim];
    if (Coin(rng)) dup.data.push_back('x');
    entries.insert(entries.begin() + static_cast<std::ptrdiff_t>(victim + 1 + Pick(rng, n - victim)), dup);
    return Done(PtWriteZip(entries, options), r, "two entries with one name");
  }
  if (r == "PT-006") {
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
  if (r == "PT-007") {
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
  if (r == "PT-008") {
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
  return Done(std::move(f), "", "valid");
}

Generated RecordViolation(const std::string& r, Rng& rng) {
  Model m = BaseModel(rng);
  PtDraft d = Serialize(m);
  const std::string version_name = m.data_version ? ".data/version" : "version";
  if (r == "PT-009") {
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
  if (r == "PT-010") {
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
  if (r == "PT-101") {
    const char* const names[] = {"extra.txt", "data/0/x", ".data/foo", "data.pkl.bak", "xl/abc",
                                 ".format_version2", "code/__torch__.py", "constants.pkl"};
    // drawn in this order so every compiler makes the same bytes
    const char* const name = names[Pick(rng, std::size(names))];
    const std::size_t at = 1 + Pick(rng, d.records.size());
    d.records.insert(d.records.begin() + static_cast<std::ptrdiff_t>(at), {name, TextBytes("ignored")});
    return Done(PtWriteDraft(d), r, "unknown record (warning)");
  }
  if (r == "PT-102") {
    // drawn in this order so every compiler makes the same bytes
    std::pair<std::string, Bytes> record = {"data/unused" + std::to_string(Pick(rng, 100)), Bytes(Pick(rng, 12), 7)};
    const std::size_t at = 1 + Pick(rng, d.records.size());
    d.records.insert(d.records.begin() + static_cast<std::ptrdiff_t>(at), std::move(record));
    return Done(PtWriteDraft(d), r, "storage record no persistent ID names (warning)");
  }
  if (r == "PT-104") {
    const char* const versions[] = {"1", "2\n", "4", "10\n", "0", "12345"};
    d.records[RecordIndex(d, version_name)].second = TextBytes(versions[Pick(rng, std::size(versions))]);
    return Done(PtWriteDraft(d), r, "version other than 3 (warning)");
  }
  return Done(PtWriteDraft(d), "", "valid");
}

Generated PickleViolation(const std::string& r, Rng& rng) {
  Model m = BaseModel(rng, Coin(rng, 4) ? 4 : 2);
  Tensor& tail = TailTensor(m);
  std::string what;
  if (r == "PT-011") {
    switch (Pick(rng, 6)) {
      case 0: case 1: {
        const std::pair<const char*, const char*> names[] = {
            {"posix", "system"}, {"__builtin__", "eval"}, {"builtins", "getattr"}, {"os", "system"},
            {"torch._utils", "_rebuild_tensor"}, {"torch._utils", "_rebuild_tensor_v3"},
            {"torch", "UntypedStorage"}, {"collections", "Counter"}, {"torch", "device"},
            {"_codecs", "encode"}, {"torch._tensor", "_rebuild_from_type_v2"},
            {"torch", "ComplexFloatStorage"}, {"torch", "uint16"}, {"torch", "QInt8Storage"},
            {"torch._utils", "_rebuild_parameter_with_state"}, {"Collections", "OrderedDict"},
            {"torch", "size"}, {"torch ", "Size"}, {"torch._utils", "_rebuild_qtensor"}, {"nt", "system"},
        };
        const auto& [module, name] = names[Pick(rng, std::size(names))];
        if (Coin(rng)) {
          InsertRaw(m, GlobalOp(module, name) + BinUnicode("touch /tmp/quantdiff_pwned") + "\x85R", rng);
        } else {  // STACK_GLOBAL
          InsertRaw(m, BinUnicode(module) + BinUnicode(name) + "\x93" + BinUnicode("x") + "\x85R", rng);
        }
        what = std::string("global ") + module + "." + name;
        break;
      }
      case 2: {  // instance-building opcodes
        const std::string ops[] = {
            GlobalOp("collections", "OrderedDict") + ")\x81",
            GlobalOp("collections", "OrderedDict") + ")}\x92",
            "(itorch\nSize\n",
            "(" + GlobalOp("collections", "OrderedDict") + "o",
            "\x82\x01", std::string("\x83\x01\x00", 3), std::string("\x84\x01\x00\x00\x00", 5),
        };
        InsertRaw(m, ops[Pick(rng, std::size(ops))], rng);
        what = "NEWOBJ / INST / OBJ / EXT";
        break;
      }
      case 3: {  // REDUCE of a token that is not callable, or of no token
        const std::string callee[] = {GlobalOp("torch", "FloatStorage"), GlobalOp("torch", "float16"),
                                      "N", "K\x01", ")", BinUnicode("OrderedDict"), "}", "]"};
        InsertRaw(m, callee[Pick(rng, std::size(callee))] + ")R", rng);
        what = "REDUCE of a non-callable";
        break;
      }
      case 4: {  // BUILD on a plain dict, a list, a tensor's place, a str
        const std::string target[] = {"}", "]", ")", BinUnicode("x"), "N",
                                      GlobalOp("collections", "OrderedDict")};
        InsertRaw(m, target[Pick(rng, std::size(target))] + "}b", rng);
        what = "BUILD on something other than an ordered dict";
        break;
      }
      default: {  // BUILD on a dict inside the file that is plain
        V plain = Dict(false);
        plain->entries.emplace_back(Str("a"), Int(1));
        m.root->entries.emplace_back(Str("p" + std::to_string(m.counter++)), plain);
        m.root->entries.emplace_back(Str("q" + std::to_string(m.counter++)),
                                     RawValue("}}" + BinUnicode("_metadata") + "}sb"));
        what = "BUILD on a plain dict";
      }
    }
  } else if (r == "PT-012") {
    switch (Pick(rng, 6)) {
      case 0: InsertRaw(m, std::string(257 + Pick(rng, 3), '('), rng); what = "257 open marks"; break;
      case 1: InsertRaw(m, "\x8a" + std::string(1, static_cast<char>(9 + Pick(rng, 200))) + std::string(8, '\x01'), rng);
        what = "LONG1 longer than 8 bytes";
        break;
      case 2: {
        const std::uint32_t n = 0x100001 + static_cast<std::uint32_t>(Pick(rng, 1000));
        InsertRaw(m, Coin(rng) ? "X" + U32Text(n) : "\x8d" + U32Text(n) + U32Text(0), rng);
        what = "string longer than 1,048,576 bytes";
        break;
      }
      case 3: {  // dicts nested deeper than 64 below the root
        V top = Dict(Coin(rng));
        V d = top;
        for (int k = 0; k < 64 + static_cast<int>(Pick(rng, 4)); ++k) {
          V inner = Dict(Coin(rng));
          d->entries.emplace_back(Str("n"), inner);
          d = inner;
        }
        d->entries.emplace_back(Str("leaf"), Int(1));
        m.root->entries.emplace_back(Str("deep" + std::to_string(m.counter++)), top);
        what = "flattened dicts deeper than 64";
        break;
      }
      case 4: {  // a value nested deeper than 64
        V top = Seq(Value::kList);
        V l = top;
        for (int k = 0; k < 64 + static_cast<int>(Pick(rng, 4)); ++k) {
          V inner = Seq(Coin(rng) ? Value::kList : Value::kTuple);
          if (inner->kind == Value::kTuple) {
            V list = Seq(Value::kList);
            inner->items.push_back(list);
            l->items.push_back(inner);
            l = list;
          } else {
            l->items.push_back(inner);
            l = inner;
          }
        }
        m.root->entries.emplace_back(Str("nest" + std::to_string(m.counter++)), top);
        what = "value nested deeper than 64";
        break;
      }
      default: {  // more than 1,048,576 nodes through shared lists
        V inner = Seq(Value::kList);
        for (int k = 0; k < 1100; ++k) inner->items.push_back(Int(k & 0xff));
        V outer = Seq(Value::kList);
        for (int k = 0; k < 960; ++k) outer->items.push_back(inner);
        m.root->entries.emplace_back(Str("wide" + std::to_string(m.counter++)), outer);
        what = "more than 1,048,576 value nodes";
      }
    }
  } else if (r == "PT-013") {
    switch (Pick(rng, 7)) {
      case 0: {  // an opcode outside the subset
        const char ops[] = {'0', 'P', 'S', 'B', 'C', 'I', 'L', 'F', 'V', 'p', 'g', '2', 'U', 'T',
                            'd', 'l', '1', 'A', '\x8e', '\x8f', '\x90', '\x91', '\x96', '\x97',
                            '\x98', '\xff', '\x00', 'Z', '\n'};
        InsertRaw(m, std::string(1, ops[Pick(rng, std::size(ops))]) + "NNNNNNNN", rng);
        what = "opcode outside the subset";
        break;
      }
      case 1: {  // memo index never set
        InsertRaw(m, "j" + U32Text(0x7fffffff - static_cast<std::uint32_t>(Pick(rng, 100))), rng);
        what = "unset memo index";
        break;
      }
      case 2: {  // bad UTF-8
        const std::string bad[] = {"\xc3\x28", "\xed\xa0\x80", "\xff", "\xc0\xaf", "a\xe2\x82", "\xf4\x90\x80\x80"};
        const std::string s = bad[Pick(rng, std::size(bad))];
        InsertRaw(m, Coin(rng) ? BinUnicode(s) : "\x8c" + std::string(1, static_cast<char>(s.size())) + s, rng);
        what = "invalid UTF-8";
        break;
      }
      case 3: {  // wrong container
        const std::string ops[] = {"]K\x01K\x02s", "}K\x01" "a", ")K\x01" "a", "](K\x01K\x02u",
                                   "}(K\x01" "e", "NK\x01K\x02s", "K\x05K\x01" "a"};
        InsertRaw(m, ops[Pick(rng, std::size(ops))], rng);
        what = "SETITEM/APPEND on the wrong container";
        break;
      }
      case 4: {  // a GLOBAL line without a newline within 257 bytes
        InsertRaw(m, "c" + std::string(257 + Pick(rng, 40), 'a') + "\nb\n", rng);
        what = "GLOBAL line too long";
        break;
      }
      case 5: {  // at STOP: two values, or an open mark; or bytes after STOP
        Bytes pkl;
        PtDraft d = Serialize(m);
        pkl = d.records[0].second;
        switch (Pick(rng, 4)) {
          case 0: pkl.insert(pkl.end() - 1, 'N'); break;
          case 1: pkl.insert(pkl.end() - 1, '('); break;
          case 2: pkl.push_back(Coin(rng) ? '.' : 'N'); break;
          default: pkl.pop_back(); break;  // no STOP
        }
        d.records[0].second = pkl;
        return Done(PtWriteDraft(d), r, "STOP misplaced");
      }
      default: {  // no PROTO first, a protocol outside 2..5, stack underflow, truncation
        PtDraft d = Serialize(m);
        Bytes& pkl = d.records[0].second;
        switch (Pick(rng, 4)) {
          case 0: pkl.erase(pkl.begin(), pkl.begin() + 2); break;
          case 1: pkl[1] = static_cast<std::uint8_t>(Coin(rng) ? Pick(rng, 2) : 6 + Pick(rng, 250)); break;
          case 2: pkl.insert(pkl.begin() + 2, Coin(rng) ? 'R' : 's'); break;
          default: pkl.resize(2 + Pick(rng, pkl.size() - 3)); break;
        }
        return Done(PtWriteDraft(d), r, "pickle framing broken");
      }
    }
  } else if (r == "PT-014") {
    switch (Pick(rng, 5)) {
      case 0: {
        const std::string args[] = {"K\x01\x85", "]", "N", "))\x86", BinUnicode("a") + "\x85"};
        InsertRaw(m, GlobalOp("collections", "OrderedDict") + args[Pick(rng, std::size(args))] + "R", rng);
        what = "OrderedDict with arguments";
        break;
      }
      case 1: {
        const std::string args[] = {"K\x02\x85", "K\x01K\x02\x86K\x03\x86", ")", "G\x3f\xf8\0\0\0\0\0\0\x85\x85"s,
                                    "]\x85", "K\x01\x85K\x02\x86"};
        InsertRaw(m, GlobalOp("torch", "Size") + args[Pick(rng, std::size(args))] + "R", rng);
        what = "torch.Size with bad arguments";
        break;
      }
      case 2: {  // _rebuild_tensor_v2 arguments of the wrong form
        // The tail tensor's argument tuple written by hand with one argument replaced.
        std::string bad;
        switch (Pick(rng, 7)) {
          case 0: bad = "offset"; break;
          case 1: bad = "size"; break;
          case 2: bad = "grad"; break;
          case 3: bad = "hooks"; break;
          case 4: bad = "meta"; break;
          case 5: bad = "count"; break;
          default: bad = "stride"; break;
        }
        // Written by hand below: ( (persid) Q offset size stride grad hooks [meta] t
        const Storage& st = m.storages[tail.storage];
        std::string ops = "((" + BinUnicode("storage") + GlobalOp("torch", kDtypes[st.dtype].storage) +
                          BinUnicode(st.key) + BinUnicode("cpu") + "K\x06tQ";
        ops += bad == "offset" ? "G\0\0\0\0\0\0\0\0"s : "K\x00"s;
        ops += bad == "size" ? "K\x02" + BinUnicode("3") + "\x86" : "K\x02K\x03\x86";
        ops += bad == "stride" ? "]" : "K\x03K\x01\x86";
        ops += bad == "grad" ? "K\x00"s : "\x89"s;
        ops += bad == "hooks" ? "}K\x01K\x02s" : GlobalOp("collections", "OrderedDict") + ")R";
        if (bad == "meta") ops += BinUnicode("x");
        if (bad == "count") ops += "NN";
        ops += "t";
        tail.args = Raw(ops);
        what = "_rebuild_tensor_v2 argument " + bad;
        break;
      }
      case 3: {  // _rebuild_parameter with bad arguments
        const std::string bad[] = {"K\x01" + GlobalOp("collections", "OrderedDict") + ")R\x87",
                                   "\x89\x86", "\x89}K\x01K\x02s\x87"};
        // tensor is on the stack; then these items; then REDUCE
        tail.args = nullptr;
        InsertRaw(m, GlobalOp("torch._utils", "_rebuild_parameter") + GlobalOp("collections", "OrderedDict") + ")R" +
                         bad[Pick(rng, std::size(bad))] + "R",
                  rng);
        what = "_rebuild_parameter with bad arguments";
        break;
      }
      default: {  // a bad BUILD state on the root, or a second BUILD
        m.root = Dict(true);
        m.root->entries.emplace_back(Str("w" + std::to_string(m.counter++)), m.NewTensor(1, {2}, rng));
        m.Finish(rng);
        switch (Pick(rng, 3)) {
          case 0: {
            V state = Dict(false);
            state->entries.emplace_back(Str("_metadata"), Dict(true));
            m.root->state = state;
            m.root->build_count = 2;
            break;
          }
          case 1: {
            V state = Dict(false);
            state->entries.emplace_back(Int(1), Int(2));
            m.root->state = state;
            break;
          }
          default: {
            m.root->state = Seq(Value::kList, {Int(1)});
          }
        }
        what = "BUILD with a bad state or twice";
      }
    }
  } else if (r == "PT-015") {
    const Storage& st = m.storages[tail.storage];
    const std::string good_class = GlobalOp("torch", kDtypes[st.dtype].storage);
    auto persid = [&](const std::string& first, const std::string& cls, const std::string& key,
                      const std::string& loc, const std::string& numel) {
      return "(" + first + cls + key + loc + numel + "t";
    };
    const std::string s = BinUnicode("storage"), k = BinUnicode(st.key), loc = BinUnicode("cpu"), num = "K\x06";
    std::string id;
    switch (Pick(rng, 11)) {
      case 0: id = persid(BinUnicode(Coin(rng) ? "Storage" : "storag"), good_class, k, loc, num); break;
      case 1: id = persid(s, GlobalOp("torch", "float32"), k, loc, num); break;
      case 2: id = persid(s, good_class, BinUnicode(std::vector<std::string>{"", "0/x", "a.b", "0 ", std::string(65, 'k'), "\xc3\xa9"}[Pick(rng, 6)]), loc, num); break;
      case 3: id = persid(s, good_class, k, "K\x00"s, num); break;
      case 4: id = persid(s, good_class, k, loc, "J\xff\xff\xff\xff"); break;
      case 5: id = persid(s, good_class, k, loc, BinUnicode("6")); break;
      case 6: id = "(" + s + good_class + k + loc + "t"; break;          // 4 items
      case 7: id = "(" + s + good_class + k + loc + num + "Nt"; break;   // 6 items
      case 8: id = persid(s, good_class, BinUnicode("77"), loc, num); break;  // no data/77
      case 9: {  // the record is not numel * item size
        m.storages[tail.storage].bytes.push_back(0);
        m.storages[tail.storage].explicit_bytes = true;
        id = persid(s, good_class, k, loc, num);
        break;
      }
      default: {  // the key reused with another class or numel
        const bool other_class = Coin(rng);
        const int other = (st.dtype + 1) % kDtypeCount;
        tail.size = {6};
        tail.stride = {1};
        id = persid(s, good_class, k, loc, num);
        std::string second = other_class ? persid(s, GlobalOp("torch", kDtypes[other].storage), k, loc, num)
                                         : persid(s, good_class, k, loc, "K\x07");
        InsertRaw(m, GlobalOp("torch._utils", "_rebuild_tensor_v2") + "(" + second + "QK\x00K\x01\x85K\x01\x85\x89"s +
                         GlobalOp("collections", "OrderedDict") + ")RtR",
                  rng);
        // The reuse must come after the first use: move the raw entry to the end.
        auto it = std::find_if(m.root->entries.begin(), m.root->entries.end(),
                               [](const auto& e) { return e.second->kind == Value::kRaw; });
        auto entry = *it;
        m.root->entries.erase(it);
        m.root->entries.push_back(entry);
      }
    }
    if (tail.size.empty() || tail.size != std::vector<std::int64_t>{6}) {
      tail.size = {6};
      tail.stride = {1};
    }
    tail.args = Raw("(" + id + "QK\x00K\x06\x85K\x01\x85\x89"s + GlobalOp("collections", "OrderedDict") + ")Rt");
    what = "bad persistent ID";
  } else if (r == "PT-016") {
    Storage& st = m.storages[tail.storage];
    switch (Pick(rng, 8)) {
      case 0: tail.size = {2, 3}; tail.stride = {3}; break;
      case 1: tail.size = {2, -1}; tail.stride = {3, 1}; break;
      case 2: tail.size = {2, 3}; tail.stride = {-3, 1}; break;
      case 3: tail.offset = -1 - static_cast<std::int64_t>(Pick(rng, 5)); break;
      case 4: {
        const std::int64_t big = static_cast<std::int64_t>(1) << (32 + Pick(rng, 20));
        tail.size = {big, big, 0};
        tail.stride = {1, 1, 1};
        break;
      }
      case 5: {
        tail.size.assign(65 + Pick(rng, 3), 1);
        tail.stride.assign(tail.size.size(), 1);
        break;
      }
      case 6: tail.offset = static_cast<std::int64_t>(1 + Pick(rng, 3)); break;  // one past the storage
      default: tail.size = {0, 2}; tail.stride = {2, 1}; tail.offset = static_cast<std::int64_t>(7 + Pick(rng, 4)); break;
    }
    // The storage stays 6 elements (as written before the change).
    st.numel = 6;
    st.bytes = RandomElements(st.dtype, 6, rng);
    st.explicit_bytes = true;
    what = "invalid tensor geometry";
    PtDraft d = Serialize(m);
    return Done(PtWriteDraft(d), r, what);
  } else if (r == "PT-017") {
    switch (Pick(rng, 7)) {
      case 0: {  // the root is not a dict
        V roots[] = {Seq(Value::kList, {Int(1)}), None(), m.root->entries.back().second,
                     Seq(Value::kTuple, {m.root}), Str("state")};
        m.root = roots[Pick(rng, std::size(roots))];
        what = "root not a dict";
        break;
      }
      case 1: {  // a key that is not str/int
        V keys[] = {None(), Float(1.0), Bool(true), Bool(false), Seq(Value::kTuple, {Int(1)}), Seq(Value::kTuple)};
        V d = Coin(rng) ? m.root : Dict(Coin(rng));
        d->entries.emplace_back(keys[Pick(rng, std::size(keys))], Int(1));
        if (d != m.root) m.root->entries.emplace_back(Str("sub" + std::to_string(m.counter++)), d);
        what = "dict key not str or int";
        break;
      }
      case 2: {  // a repeated key
        V d = Coin(rng) ? m.root : Dict(Coin(rng));
        V key = Coin(rng) ? Str("dup") : Int(7);
        d->entries.emplace_back(key, Int(1));
        d->entries.emplace_back(key->kind == Value::kStr ? Str("dup") : Int(7), Int(2));
        if (d != m.root) m.root->entries.emplace_back(Str("sub" + std::to_string(m.counter++)), d);
        what = "repeated dict key";
        break;
      }
      case 3: {  // an empty key text
        V d = Dict(Coin(rng));
        d->entries.emplace_back(Str(""), Int(1));
        m.root->entries.emplace_back(Str("sub" + std::to_string(m.counter++)), d);
        if (Coin(rng)) m.root->entries.emplace_back(Str(""), m.NewTensor(1, {1}, rng));
        what = "empty key";
        break;
      }
      case 4: {  // flattened names collide: "a.b" and {"a": {"b"}}
        V d = Dict(Coin(rng));
        d->entries.emplace_back(Str("b"), Coin(rng) ? m.NewTensor(2, {2}, rng) : Int(3));
        const std::string a = "col" + std::to_string(m.counter++);
        V first = Coin(rng) ? m.NewTensor(1, {1}, rng) : Str("v");
        if (Coin(rng)) {
          m.root->entries.emplace_back(Str(a + ".b"), first);
          m.root->entries.emplace_back(Str(a), d);
        } else {
          m.root->entries.emplace_back(Str(a), d);
          m.root->entries.emplace_back(Str(a + ".b"), first);
        }
        what = "flattened names collide";
        break;
      }
      case 5: {  // int key 5 and str key "5"
        V d = Dict(Coin(rng));
        d->entries.emplace_back(Int(5), Int(1));
        d->entries.emplace_back(Str("5"), m.NewTensor(1, {1}, rng));
        m.root->entries.emplace_back(Str("opt" + std::to_string(m.counter++)), d);
        what = "int and str key with one text";
        break;
      }
      default: {  // SETITEMS with a bool key written by hand
        InsertRaw(m, "}(\x88K\x01u", rng);
        what = "bool key";
      }
    }
    m.Finish(rng);
  }
  return Done(WriteModel(m), r, what);
}

Generated LegacyViolation(const std::string&, Rng& rng) {
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
// lists them: each builder breaks its family's rules of one reading step.
struct PtRule {
  const char* rule;
  Generated (*build)(const std::string& rule, Rng& rng);
};
constexpr PtRule kPtRules[] = {
    {"PT-001", &LegacyViolation}, {"PT-002", &ZipViolation},    {"PT-003", &ZipViolation},
    {"PT-004", &ZipViolation},    {"PT-005", &ZipViolation},    {"PT-006", &ZipViolation},
    {"PT-007", &ZipViolation},    {"PT-008", &ZipViolation},    {"PT-009", &RecordViolation},
    {"PT-010", &RecordViolation}, {"PT-011", &PickleViolation}, {"PT-012", &PickleViolation},
    {"PT-013", &PickleViolation}, {"PT-014", &PickleViolation}, {"PT-015", &PickleViolation},
    {"PT-016", &PickleViolation}, {"PT-017", &PickleViolation}, {"PT-101", &RecordViolation},
    {"PT-102", &RecordViolation}, {"PT-104", &RecordViolation},
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
