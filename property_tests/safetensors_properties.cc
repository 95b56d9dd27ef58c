// safetensors_properties.cc: the container writer and both readers.
//
//  * Round trip: what codec::SerializeSafetensors writes, codec::ReadContainer
//    and oracle::CheckContainer / ReadSafetensors read back with the names,
//    dtypes, shapes, offsets, metadata and values the test put in (values
//    decoded by the test itself), and the header is padded to a multiple of 8
//    (never ST-102).
//  * Differential: codec and oracle agree (harness::Compare) on generated
//    valid files, on every registry violation generator and on arbitrary
//    byte mutations of the header.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "codecs/safetensors.h"
#include "generators/generators.h"
#include "harness/differ.h"
#include "harness/registry.h"
#include "oracles/safetensors.h"
#include "property_tests/gen/half.h"
#include "property_tests/gen/rc_gen.h"

namespace {

constexpr char kFile[] = "property.safetensors";

// Non-block dtypes and their element widths in bits (rules.json, ST-007).
struct DtypeWidth {
  const char* name;
  std::uint64_t bits;
};
constexpr DtypeWidth kDtypes[] = {
    {"BOOL", 8},    {"F4", 4},      {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"U8", 8},
    {"I8", 8},      {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"I16", 16},
    {"U16", 16},    {"F16", 16},    {"BF16", 16},   {"I32", 32},    {"U32", 32},
    {"F32", 32},    {"C64", 64},    {"F64", 64},    {"I64", 64},    {"U64", 64},
};

struct TensorSpec {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::vector<std::uint8_t> bytes;
};

struct FileSpec {
  std::vector<TensorSpec> tensors;  // in write order
  bool with_metadata = false;
  qd::codec::MetadataList metadata;
};

std::string Utf8(std::uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xe0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xf0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

// Text with the characters a JSON writer must escape and multi-byte UTF-8.
rc::Gen<std::string> Text() {
  return rc::gen::map(
      rc::gen::container<std::vector<std::uint32_t>>(rc::gen::elementOf(std::vector<std::uint32_t>{
          'a', 'b', 'z', 'A', '0', '9', '.', '_', '-', '/', ' ', '"', '\\', '\n', '\t', 0x01,
          0x1f, 0x7f, 0xe9, 0x4e2d, 0xfeff, 0x1f600, 0x10ffff})),
      [](const std::vector<std::uint32_t>& cps) {
        std::string s;
        for (std::uint32_t cp : cps) s += Utf8(cp);
        return s;
      });
}

rc::Gen<TensorSpec> ATensor() {
  return rc::gen::exec([] {
    TensorSpec t;
    const DtypeWidth& d = *rc::gen::elementOf(std::vector<DtypeWidth>(std::begin(kDtypes), std::end(kDtypes)));
    t.dtype = d.name;
    t.shape = *rc::gen::container<std::vector<std::uint64_t>>(
        *rc::gen::inRange<std::size_t>(0, 4), rc::gen::inRange<std::uint64_t>(0, 6));
    std::uint64_t count = 1;
    for (std::uint64_t dim : t.shape) count *= dim;
    if ((count * d.bits) % 8 != 0) {  // sub-byte dtypes must fill whole bytes
      t.shape.push_back(4);
      count *= 4;
    }
    t.bytes = *rc::gen::container<std::vector<std::uint8_t>>(count * d.bits / 8,
                                                             rc::gen::arbitrary<std::uint8_t>());
    return t;
  });
}

rc::Gen<FileSpec> AFileSpec() {
  return rc::gen::exec([] {
    FileSpec f;
    const auto count = *rc::gen::inRange<std::size_t>(0, 7);
    for (std::size_t i = 0; i < count; ++i) {
      TensorSpec t = *ATensor();
      t.name = *Text() + "#" + std::to_string(i);  // unique, never "__metadata__"
      f.tensors.push_back(std::move(t));
    }
    f.with_metadata = *rc::gen::arbitrary<bool>();
    if (f.with_metadata) {
      const auto entries = *rc::gen::inRange<std::size_t>(0, 4);
      for (std::size_t i = 0; i < entries; ++i) {
        f.metadata.emplace_back(*Text() + "=" + std::to_string(i), *Text());
      }
    }
    return f;
  });
}

std::vector<std::uint8_t> Write(const FileSpec& f) {
  std::vector<qd::codec::TensorWithBytes> tensors;
  for (const TensorSpec& t : f.tensors) {
    tensors.push_back({qd::codec::TensorToWrite{t.name, t.dtype, t.shape, 0}, t.bytes});
  }
  return qd::codec::SerializeSafetensors(tensors, f.with_metadata ? &f.metadata : nullptr);
}

// What a reader must report for a tensor: (begin, end, name, dtype, shape).
struct Expected {
  std::uint64_t begin, end;
  std::string name, dtype;
  std::vector<std::uint64_t> shape;
  std::vector<std::uint8_t> bytes;
};

std::vector<Expected> ExpectedTensors(const FileSpec& f) {
  std::vector<Expected> out;
  std::uint64_t offset = 0;
  for (const TensorSpec& t : f.tensors) {
    out.push_back({offset, offset + t.bytes.size(), t.name, t.dtype, t.shape, t.bytes});
    offset += t.bytes.size();
  }
  std::sort(out.begin(), out.end(), [](const Expected& a, const Expected& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  return out;
}

bool IsFloat(const std::string& dtype) {
  return dtype == "F32" || dtype == "F16" || dtype == "BF16" || dtype == "F64";
}

// The test's own little-endian decoding of a floating tensor to binary32.
std::vector<float> DecodeExpected(const Expected& t) {
  return qdtest::LittleEndianFloats(t.dtype, t.bytes.data(), t.bytes.size());
}

void AssertValues(const std::vector<Expected>& expected, const std::vector<qd::DecodedTensor>& got,
                  const std::string& who) {
  std::size_t next = 0;
  for (const Expected& e : expected) {
    if (!IsFloat(e.dtype)) continue;
    if (next >= got.size()) RC_FAIL(who + ": tensor " + e.name + " was not decoded");
    const qd::DecodedTensor& d = got[next++];
    RC_ASSERT(d.name == e.name);
    RC_ASSERT(d.shape == e.shape);
    const std::vector<float> want = DecodeExpected(e);
    RC_ASSERT(d.values.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (!qdtest::SameFloat(d.values[i], want[i])) {
        RC_FAIL(who + ": " + e.dtype + " tensor " + e.name + " element " + std::to_string(i) +
                " is " + std::to_string(qdtest::FloatBits(d.values[i])) + ", expected bits " +
                std::to_string(qdtest::FloatBits(want[i])));
      }
    }
  }
  RC_ASSERT(next == got.size());
}

std::string Findings(const qd::Outcome& o) {
  std::string s = o.refused ? "refused" : "accepted";
  for (const qd::Finding& f : o.findings) s += " | " + qd::harness::Describe(f);
  return s;
}

void AssertAgree(const std::vector<std::uint8_t>& file, const std::string& context) {
  const qd::ByteView view{file.data(), file.size()};
  for (const qd::harness::FormatEntry& format : qd::harness::Formats()) {
    const qd::Outcome codec = format.codec_read(view, kFile, {});
    const qd::Outcome oracle = format.oracle_read(view, kFile, {});
    if (format.name == "safetensors") {  // how deep the inputs reach
      RC_TAG(codec.refused ? codec.findings.back().rule : std::string("accepted"));
    }
    if (auto d = qd::harness::Compare(codec, oracle, format.name)) {
      RC_FAIL(d->signature + "\n" + d->detail + "\n" + context + "\nheader: " +
              qdtest::gen::ShowBytes(file) + "\ncodec:  " + Findings(codec) +
              "\noracle: " + Findings(oracle));
    }
  }
}

}  // namespace

// The writer's output is read back by both readers exactly as written, with
// no finding at all: in particular the header is space-padded to a multiple
// of 8 (ST-102 never fires) and does not start with whitespace (ST-101).
RC_GTEST_PROP(SafetensorsProperties, WriterOutputReadBackByBothReaders, ()) {
  const FileSpec spec = *AFileSpec();
  const std::vector<std::uint8_t> file = Write(spec);
  const std::vector<Expected> expected = ExpectedTensors(spec);

  // Layout: 8-byte little-endian N, N % 8 == 0, the JSON object then spaces.
  RC_ASSERT(file.size() >= 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n * 256 + file[i];
  RC_ASSERT(n % 8 == 0);
  RC_ASSERT(8 + n <= file.size());
  std::uint64_t last = 8 + n - 1;
  while (last > 8 && file[last] == ' ') --last;
  RC_ASSERT(file[8] == '{');
  RC_ASSERT(file[last] == '}');
  RC_ASSERT(8 + n - 1 - last < 8);  // at most 7 padding spaces
  std::uint64_t data = 0;
  for (const TensorSpec& t : spec.tensors) data += t.bytes.size();
  RC_ASSERT(file.size() == 8 + n + data);

  // BuildHeader writes the same length prefix and header.
  std::vector<qd::codec::TensorToWrite> specs;
  for (const TensorSpec& t : spec.tensors) specs.push_back({t.name, t.dtype, t.shape, t.bytes.size()});
  const std::string header = qd::codec::BuildHeader(specs, spec.with_metadata ? &spec.metadata : nullptr);
  RC_ASSERT(header.size() == 8 + n);
  RC_ASSERT(std::equal(header.begin(), header.end(), file.begin(),
                       [](char a, std::uint8_t b) { return static_cast<std::uint8_t>(a) == b; }));

  const qd::ByteView view{file.data(), file.size()};
  qd::codec::MetadataList sorted_metadata = spec.metadata;
  std::sort(sorted_metadata.begin(), sorted_metadata.end());

  // Codec reader.
  const qd::codec::ContainerResult codec = qd::codec::ReadContainer(view, kFile);
  if (codec.refused || !codec.findings.empty()) {
    RC_FAIL("codec: " + qd::harness::Describe(codec.findings.front()));
  }
  RC_ASSERT(codec.container.header_length == n);
  RC_ASSERT(codec.container.data_start == 8 + n);
  RC_ASSERT(codec.container.has_metadata == spec.with_metadata);
  const std::vector<std::pair<std::string, std::string>> codec_metadata(codec.container.metadata.begin(),
                                                                        codec.container.metadata.end());
  RC_ASSERT(codec_metadata == sorted_metadata);
  RC_ASSERT(codec.container.tensors.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const qd::codec::TensorEntry& t = codec.container.tensors[i];
    RC_ASSERT(t.name == expected[i].name);
    RC_ASSERT(std::string(qd::codec::InfoOf(t.dtype).name) == expected[i].dtype);
    RC_ASSERT(t.shape == expected[i].shape);
    RC_ASSERT(t.begin == expected[i].begin);
    RC_ASSERT(t.end == expected[i].end);
    RC_ASSERT(std::equal(expected[i].bytes.begin(), expected[i].bytes.end(), codec.container.Data(t)));
  }
  std::vector<qd::DecodedTensor> codec_values;
  qd::codec::AppendFloatTensors(codec.container, &codec_values);
  AssertValues(expected, codec_values, "codec");

  // Oracle reader.
  qd::Outcome oracle_outcome;
  qd::oracle::Container oracle;
  const bool accepted = qd::oracle::CheckContainer(view, kFile, &oracle_outcome, &oracle);
  if (!accepted || !oracle_outcome.findings.empty()) RC_FAIL("oracle: " + Findings(oracle_outcome));
  RC_ASSERT(oracle.header_size == n);
  RC_ASSERT(oracle.data_start == 8 + n);
  RC_ASSERT(oracle.has_metadata == spec.with_metadata);
  auto oracle_metadata = oracle.metadata;
  std::sort(oracle_metadata.begin(), oracle_metadata.end());
  RC_ASSERT(oracle_metadata == sorted_metadata);
  RC_ASSERT(oracle.tensors.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const qd::oracle::ContainerTensor& t = oracle.tensors[i];
    RC_ASSERT(t.name == expected[i].name);
    RC_ASSERT(t.dtype == expected[i].dtype);
    RC_ASSERT(t.shape == expected[i].shape);
    RC_ASSERT(t.begin == expected[i].begin);
    RC_ASSERT(t.end == expected[i].end);
  }
  const qd::Outcome oracle_read = qd::oracle::ReadSafetensors(view, kFile);
  RC_ASSERT(!oracle_read.refused);
  AssertValues(expected, oracle_read.tensors, "oracle");
}

// Codec and oracle agree on valid files: the test's generator above and the
// registry's.
RC_GTEST_PROP(SafetensorsProperties, CodecAgreesWithOracleOnValidFiles, (std::uint64_t seed)) {
  AssertAgree(Write(*AFileSpec()), "valid file from the property generator");
  qd::harness::Rng rng(seed);
  const qd::harness::Generated g = qd::gen::SafetensorsValid(rng);
  AssertAgree(g.bytes, "gen::SafetensorsValid seed " + std::to_string(seed));
}

// Codec and oracle agree on every violation the registry can generate.
RC_GTEST_PROP(SafetensorsProperties, CodecAgreesWithOracleOnEveryViolation, (std::uint64_t seed)) {
  const qd::harness::FormatEntry* format = qd::harness::FindFormat("safetensors");
  RC_ASSERT(format != nullptr);
  for (const std::string& rule : format->violable_rules()) {
    qd::harness::Rng rng(seed);
    const qd::harness::Generated g = format->generate_violation(rule, rng);
    AssertAgree(g.bytes, "violation of " + rule + " (" + g.description + "), seed " +
                             std::to_string(seed));
  }
}

// Codec and oracle agree on valid files whose header had bytes flipped,
// overwritten, inserted (raw or JSON tokens) or deleted, with the length
// prefix left alone or following the header's new size.
RC_GTEST_PROP(SafetensorsProperties, CodecAgreesWithOracleOnHeaderMutations, ()) {
  const std::vector<std::uint8_t> base = Write(*AFileSpec());
  const auto mutations = *qdtest::gen::Mutations(4);
  const bool fix_length = *rc::gen::weightedElement<bool>({{4, true}, {1, false}});
  AssertAgree(qdtest::gen::MutateHeader(base, mutations, fix_length),
              fix_length ? "mutated header, length prefix fixed" : "mutated header");
}
