// pt_properties.cc: properties of the torch .pt readers (docs/pt.md), codec
// (codecs/pt.h) and oracle (oracles/pt.h), on files from the generator's
// torch.save-like writer (generators/pt.cc). The expected tensor table comes
// from the writer's own model (sizes, strides, offsets and the storage bytes
// it wrote), materialised in C order by the writer, not by either reader.
//
//  * Round trip: both readers accept a written file with no finding; their
//    tensor tables hold every tensor the writer flattened, in order, with
//    its name, dtype, shape and C-order little-endian bytes; the decoded
//    output of codec and oracle is equal bit for bit and equals binary32 of
//    those bytes (F16 and BF16 exactly, F64 rounded to nearest even).
//  * Views: a view (offset, strides, broadcast, transpose) equals the
//    contiguous copy the writer put beside it, in both tables and in the
//    decoded output.
//  * Hostile globals: a GLOBAL / STACK_GLOBAL naming a callable outside the
//    allow-list, or NEWOBJ / INST / OBJ / EXT, inserted before any opcode of
//    a valid data.pkl, is refused by both readers with PT-011 at exactly that
//    opcode and nothing else (no other finding, no tensor, no file created).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "codecs/pt.h"
#include "generators/generators.h"
#include "harness/differ.h"
#include "harness/registry.h"
#include "oracles/bnb_pt_layers.h"
#include "oracles/pt.h"
#include "property_tests/gen/half.h"
#include "property_tests/gen/rc_gen.h"

namespace {

constexpr char kFile[] = "pt-property.pt";

std::string Findings(const qd::Outcome& o) {
  std::string s = o.refused ? "refused" : "accepted";
  for (const qd::Finding& f : o.findings) s += " | " + qd::harness::Describe(f);
  return s;
}

// binary32 of element i of C-order little-endian bytes of a floating dtype;
// false for an integer or BOOL dtype.
bool ExpectedFloat(const std::string& dtype, const std::vector<std::uint8_t>& bytes, std::size_t i,
                   float* out) {
  if (dtype == "F32") {
    std::uint32_t u = 0;
    for (int k = 3; k >= 0; --k) u = (u << 8) | bytes[4 * i + k];
    *out = qdtest::BitsFloat(u);
  } else if (dtype == "F16") {
    *out = qdtest::HalfValue(static_cast<std::uint16_t>(bytes[2 * i] | bytes[2 * i + 1] << 8));
  } else if (dtype == "BF16") {
    *out = qdtest::BitsFloat(static_cast<std::uint32_t>(bytes[2 * i] | bytes[2 * i + 1] << 8) << 16);
  } else if (dtype == "F64") {
    std::uint64_t u = 0;
    for (int k = 7; k >= 0; --k) u = (u << 8) | bytes[8 * i + k];
    double d;
    std::memcpy(&d, &u, 8);
    *out = static_cast<float>(d);  // round to nearest even (the default mode)
  } else {
    return false;
  }
  return true;
}

std::string ShapeText(const std::vector<std::uint64_t>& shape) {
  std::string s = "[";
  for (std::size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + "]";
}

struct Read {
  // The file itself: the codec's tensors are views into it (codecs/pt.h), so
  // it lives as long as they do (a moved vector keeps its buffer).
  std::vector<std::uint8_t> file;
  qd::Outcome codec, oracle;
  qd::codec::PtResult table;  // the codec's tensor table
  std::vector<qd::oracle::PtTensorBytes> oracle_table;
};

Read ReadBoth(std::vector<std::uint8_t> file) {
  const qd::harness::FormatEntry& pt = *qd::harness::FindFormat("pt");
  Read r;
  r.file = std::move(file);
  const qd::ByteView view{r.file.data(), r.file.size()};
  r.codec = pt.codec_read(view, kFile, {});
  r.table = qd::codec::ReadPt(view, kFile);
  r.oracle = qd::oracle::ReadPtFile(view, kFile, &r.oracle_table);
  return r;
}

rc::Gen<qd::gen::PtDraftOptions> AnyOptions() {
  return rc::gen::build<qd::gen::PtDraftOptions>(
      rc::gen::set(&qd::gen::PtDraftOptions::max_items, rc::gen::inRange(1, 9)),
      rc::gen::set(&qd::gen::PtDraftOptions::copies, rc::gen::arbitrary<bool>()),
      rc::gen::set(&qd::gen::PtDraftOptions::allow_big, rc::gen::arbitrary<bool>()),
      rc::gen::set(&qd::gen::PtDraftOptions::protocol, rc::gen::element(0, 2, 3, 4, 5)));
}

}  // namespace

RC_GTEST_PROP(PtProperties, WriterRoundTripsThroughBothReaders, (std::uint64_t seed)) {
  const qd::gen::PtDraftOptions options = *AnyOptions();
  qd::harness::Rng rng(seed);
  const qd::gen::PtDraft draft = qd::gen::PtRandomDraft(rng, options);
  const std::vector<std::uint8_t> file = qd::gen::PtWriteDraft(draft);
  const Read r = ReadBoth(file);
  if (r.codec.refused || !r.codec.findings.empty() || r.oracle.refused || !r.oracle.findings.empty() ||
      r.table.refused) {
    RC_FAIL("a written file is not accepted cleanly\ncodec:  " + Findings(r.codec) +
            "\noracle: " + Findings(r.oracle) + "\nfile: " + qdtest::gen::ShowBytes(file));
  }
  if (auto d = qd::harness::Compare(r.codec, r.oracle, "pt")) RC_FAIL(d->signature + ": " + d->detail);

  // Both tensor tables: the writer's tensors in flattening order.
  RC_ASSERT(r.table.tensors.size() == draft.tensors.size());
  RC_ASSERT(r.oracle_table.size() == draft.tensors.size());
  std::map<std::string, const qd::gen::PtExpectedTensor*> expected;
  for (std::size_t i = 0; i < draft.tensors.size(); ++i) {
    const qd::gen::PtExpectedTensor& e = draft.tensors[i];
    expected[e.name] = &e;
    const qd::codec::PtTensor& c = r.table.TableTensor(i);
    const qd::oracle::PtTensorBytes& o = r.oracle_table[i];
    RC_ASSERT(r.table.tensors[i].name == e.name);
    RC_ASSERT(o.name == e.name);
    RC_ASSERT(std::string(qd::codec::InfoOf(c.dtype).name) == e.dtype);
    RC_ASSERT(o.dtype == e.dtype);
    if (c.shape != e.shape || o.shape != e.shape) {
      RC_FAIL(e.name + ": shape " + ShapeText(e.shape) + ", codec " + ShapeText(c.shape) + ", oracle " +
              ShapeText(o.shape));
    }
    RC_ASSERT(qd::codec::PtTensorBytes(c) == e.bytes);
    RC_ASSERT(o.bytes == e.bytes);
  }

  // Decoded output: every floating tensor of the table, binary32 of its bytes.
  std::size_t floating = 0;
  for (const qd::gen::PtExpectedTensor& e : draft.tensors) {
    floating += e.dtype == "F32" || e.dtype == "F16" || e.dtype == "BF16" || e.dtype == "F64";
  }
  RC_ASSERT(r.codec.tensors.size() == floating);
  for (const qd::DecodedTensor& t : r.codec.tensors) {
    const auto it = expected.find(t.name);
    RC_ASSERT(it != expected.end());
    const qd::gen::PtExpectedTensor& e = *it->second;
    RC_ASSERT(t.shape == e.shape);
    std::uint64_t numel = 1;
    for (std::uint64_t d : e.shape) numel *= d;
    RC_ASSERT(t.values.size() == numel);
    for (std::size_t i = 0; i < numel; ++i) {
      float want = 0;
      RC_ASSERT(ExpectedFloat(e.dtype, e.bytes, i, &want));
      if (!qdtest::SameFloat(t.values[i], want)) {
        RC_FAIL(e.name + " (" + e.dtype + ") element " + std::to_string(i) + ": decoded " +
                std::to_string(t.values[i]) + ", expected " + std::to_string(want));
      }
    }
  }
}

// Views equal the contiguous copies the writer puts beside them.
RC_GTEST_PROP(PtProperties, ViewsEqualTheirMaterialisedCopies, (std::uint64_t seed)) {
  qd::gen::PtDraftOptions options = *AnyOptions();
  options.copies = true;
  qd::harness::Rng rng(seed);
  const qd::gen::PtDraft draft = qd::gen::PtRandomDraft(rng, options);
  const Read r = ReadBoth(qd::gen::PtWriteDraft(draft));
  RC_ASSERT(!r.codec.refused && !r.oracle.refused && !r.table.refused);
  std::map<std::string, std::size_t> by_name;
  for (std::size_t i = 0; i < r.oracle_table.size(); ++i) by_name[r.oracle_table[i].name] = i;
  std::map<std::string, const qd::DecodedTensor*> decoded;
  for (const qd::DecodedTensor& t : r.codec.tensors) decoded[t.name] = &t;
  int views = 0;
  for (const qd::gen::PtExpectedTensor& e : draft.tensors) {
    const auto copy = by_name.find(e.name + "_copy");
    const auto self = by_name.find(e.name);
    if (!e.view || copy == by_name.end()) continue;
    ++views;
    RC_ASSERT(self != by_name.end());
    RC_ASSERT(r.oracle_table[self->second].bytes == r.oracle_table[copy->second].bytes);
    RC_ASSERT(qd::codec::PtTensorBytes(r.table.TableTensor(self->second)) ==
              qd::codec::PtTensorBytes(r.table.TableTensor(copy->second)));
    const auto a = decoded.find(e.name), b = decoded.find(e.name + "_copy");
    RC_ASSERT((a == decoded.end()) == (b == decoded.end()));
    if (a != decoded.end()) {
      RC_ASSERT(a->second->shape == b->second->shape);
      RC_ASSERT(a->second->values.size() == b->second->values.size());
      for (std::size_t i = 0; i < a->second->values.size(); ++i) {
        RC_ASSERT(qdtest::SameFloat(a->second->values[i], b->second->values[i]));
      }
    }
  }
  RC_TAG(views > 0 ? "with views" : "no view");
}

// A hostile opcode sequence inserted before opcode k (k >= 1) of a valid
// data.pkl: every opcode before it is the valid file's, so the walk reaches it.
RC_GTEST_PROP(PtProperties, HostileGlobalIsRefusedWithPt011AndNothingElse, (std::uint64_t seed)) {
  const qd::gen::PtDraftOptions options = *AnyOptions();
  qd::harness::Rng rng(seed);
  qd::gen::PtDraft draft = qd::gen::PtRandomDraft(rng, options);
  struct Hostile {
    std::string ops;
    std::size_t opcode_at;  // where PT-011 is, relative to the insertion
  };
  auto unicode = [](const std::string& s) {
    std::string out = "X";
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(s.size() >> (8 * i)));
    return out + s;
  };
  const std::string marker = "/tmp/quantdiff_pt_property_pwned";
  const std::vector<Hostile> hostile = {
      {"cposix\nsystem\n" + unicode("touch " + marker) + "\x85R", 0},
      {"c__builtin__\neval\n", 0},
      {"cbuiltins\nexec\n", 0},
      {"cos\nsystem\n", 0},
      {"ctorch._utils\n_rebuild_tensor\n", 0},
      {"ctorch\nUntypedStorage\n", 0},
      {"ccollections\nCounter\n", 0},
      {"ctorch._tensor\n_rebuild_from_type_v2\n", 0},
      {unicode("posix") + unicode("system") + "\x93", 21},
      {unicode("torch._utils") + unicode("_rebuild_qtensor") + "\x93", 38},
      {"ccollections\nOrderedDict\n)\x81", 26},
      {"(itorch\nSize\n", 1},
      {"(ccollections\nOrderedDict\no", 26},
      {"\x82\x07", 0},
  };
  const Hostile& h = *rc::gen::elementOf(hostile);
  const std::size_t k = *rc::gen::inRange<std::size_t>(1, draft.pickle_ops.size());
  std::vector<std::uint8_t>& pkl = draft.records[0].second;
  RC_ASSERT(draft.records[0].first == "data.pkl");
  const std::size_t at = draft.pickle_ops[k];
  pkl.insert(pkl.begin() + static_cast<std::ptrdiff_t>(at), h.ops.begin(), h.ops.end());
  qd::gen::PtZipLayout layout;
  const std::vector<std::uint8_t> file = qd::gen::PtWriteDraft(draft, &layout);
  const std::int64_t want_offset = static_cast<std::int64_t>(layout.entries[0].data_start + at + h.opcode_at);

  std::filesystem::remove(marker);
  const Read r = ReadBoth(file);
  for (const auto& [who, o] : {std::pair<const char*, const qd::Outcome*>{"codec", &r.codec}, {"oracle", &r.oracle}}) {
    if (!o->refused || o->findings.size() != 1 || o->findings[0].rule != "PT-011" ||
        o->findings[0].byte_offset != want_offset || !o->tensors.empty()) {
      RC_FAIL(std::string(who) + " should refuse with PT-011 at " + std::to_string(want_offset) +
              " and nothing else: " + Findings(*o));
    }
  }
  RC_ASSERT(r.table.refused);
  RC_ASSERT(r.table.findings.size() == 1u);
  RC_ASSERT(r.oracle_table.empty());
  if (auto d = qd::harness::Compare(r.codec, r.oracle, "pt")) RC_FAIL(d->signature + ": " + d->detail);
  RC_ASSERT(!std::filesystem::exists(marker));
}
