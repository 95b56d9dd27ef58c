// Generators for native .gguf files (rules GGUF-*, docs/gguf.md). A valid
// file holds typed metadata and one to four tensors of the decoded ggml
// types; every violation breaks one thing of a valid file, chosen so that
// no earlier rule of the check order (section 3) fires.
#include "generators/gguf.h"

#include <algorithm>
#include <cstring>

#include "codecs/float16.h"
#include "codecs/ggml_blocks.h"
#include "codecs/gguf.h"
#include "generators/generators.h"

namespace qd::gen {
namespace {

constexpr std::uint32_t kDecodedTypes[] = {0, 1, 2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 20, 28, 30, 39};
constexpr std::uint32_t kRecognisedTypes[] = {9, 15, 16, 24, 26, 40, 41, 42};
constexpr std::uint64_t kAlignments[] = {16, 32, 32, 64, 128};

void PutU32(std::vector<std::uint8_t>* out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void PutU64(std::vector<std::uint8_t>* out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void PutString(std::vector<std::uint8_t>* out, const std::string& s) {
  PutU64(out, s.size());
  out->insert(out->end(), s.begin(), s.end());
}
std::uint64_t AlignUp(std::uint64_t x, std::uint64_t a) { return (x + a - 1) / a * a; }

GgufKv Kv(const std::string& key, std::uint32_t type, std::vector<std::uint8_t> value) {
  return GgufKv{key, type, std::move(value)};
}

// An array value: element type, count, then the elements' bytes.
std::vector<std::uint8_t> ArrayValue(std::uint32_t element_type, std::uint64_t count,
                                     const std::vector<std::uint8_t>& elements) {
  std::vector<std::uint8_t> v;
  PutU32(&v, element_type);
  PutU64(&v, count);
  v.insert(v.end(), elements.begin(), elements.end());
  return v;
}

// A value of DEPTH nested arrays (depth 1: an array of u8) holding one
// element each level and two u8 at the bottom.
std::vector<std::uint8_t> NestedArray(int depth) {
  std::vector<std::uint8_t> v = ArrayValue(0, 2, {7, 9});
  for (int d = 1; d < depth; ++d) v = ArrayValue(9, 1, v);
  return v;
}

std::vector<GgufKv> RandomMetadata(Rng& rng, bool allow_nested_arrays) {
  std::vector<GgufKv> kvs;
  kvs.push_back(GgufString("general.architecture", Coin(rng) ? "llama" : "qwen2"));
  kvs.push_back(GgufU32("general.quantization_version", 2));
  const int extra = static_cast<int>(Pick(rng, 5));
  for (int i = 0; i < extra; ++i) {
    const std::string key = "quantdiff.k" + std::to_string(i);
    std::vector<std::uint8_t> v;
    switch (Pick(rng, 8)) {
      case 0: kvs.push_back(Kv(key, 7, {static_cast<std::uint8_t>(Pick(rng, 2))})); break;
      case 1: PutU64(&v, rng()); kvs.push_back(Kv(key, static_cast<std::uint32_t>(10 + Pick(rng, 3)), v)); break;
      case 2: PutU32(&v, static_cast<std::uint32_t>(rng())); kvs.push_back(Kv(key, static_cast<std::uint32_t>(4 + Pick(rng, 3)), v)); break;
      case 3: v = {static_cast<std::uint8_t>(rng()), static_cast<std::uint8_t>(rng())}; kvs.push_back(Kv(key, static_cast<std::uint32_t>(2 + Pick(rng, 2)), v)); break;
      case 4: {
        // Two draws in sequence, never as two arguments of one call (their
        // order would be the compiler's: GCC and clang would write other files).
        const auto byte = static_cast<std::uint8_t>(rng());
        const auto type = static_cast<std::uint32_t>(Pick(rng, 2));
        kvs.push_back(Kv(key, type, {byte}));
        break;
      }
      case 5: {
        std::vector<std::uint8_t> strings;
        const std::uint64_t n = Pick(rng, 4);
        for (std::uint64_t j = 0; j < n; ++j) PutString(&strings, "tok" + std::to_string(j));
        kvs.push_back(Kv(key, 9, ArrayValue(8, n, strings)));
        break;
      }
      case 6: {
        std::vector<std::uint8_t> ints;
        const std::uint64_t n = Pick(rng, 6);
        for (std::uint64_t j = 0; j < n; ++j) PutU32(&ints, static_cast<std::uint32_t>(rng()));
        kvs.push_back(Kv(key, 9, ArrayValue(5, n, ints)));
        break;
      }
      default:
        if (allow_nested_arrays) {
          kvs.push_back(Kv(key, 9, NestedArray(2 + static_cast<int>(Pick(rng, 7)))));
        } else {
          kvs.push_back(GgufString(key, std::string(Pick(rng, 20), 'x')));
        }
        break;
    }
  }
  return kvs;
}

GgufTensorSpec RandomTensor(const std::string& name, std::uint32_t type, Rng& rng) {
  const codec::GgufTypeRow& row = *codec::FindGgufType(type);
  GgufTensorSpec t;
  t.name = name;
  t.type = type;
  const std::uint64_t ne0 = row.block_values == 1 ? 1 + Pick(rng, 8) : row.block_values * (1 + Pick(rng, 2));
  const int n_dims = 1 + static_cast<int>(Pick(rng, 3));
  t.ne.push_back(ne0);
  if (n_dims >= 2) t.ne.push_back(1 + Pick(rng, 3));
  if (n_dims >= 3) t.ne.push_back(1 + Pick(rng, 2));
  std::uint64_t count = 1;
  for (std::uint64_t d : t.ne) count *= d;
  t.data = GgufTensorBytes(type, count, rng);
  return t;
}

Generated Make(const GgufSpec& spec, std::string rule, std::string what) {
  return Generated{WriteGguf(spec).bytes, std::move(rule), std::move(what), {}};
}

GgufSpec ValidSpec(Rng& rng) { return RandomGgufSpec(rng, true); }

}  // namespace

GgufKv GgufString(const std::string& key, const std::string& value) {
  std::vector<std::uint8_t> v;
  PutString(&v, value);
  return Kv(key, 8, v);
}

GgufKv GgufU32(const std::string& key, std::uint32_t value) {
  std::vector<std::uint8_t> v;
  PutU32(&v, value);
  return Kv(key, 4, v);
}

std::vector<std::uint8_t> GgufTensorBytes(std::uint32_t type, std::uint64_t count, Rng& rng) {
  const codec::GgufTypeRow& row = *codec::FindGgufType(type);
  const std::vector<float> w = RandomWeights(count, 1.0f, rng);
  std::vector<std::uint8_t> bytes(count / row.block_values * row.block_bytes);
  const std::size_t blocks = count / row.block_values;
  if (type == 0) {
    std::memcpy(bytes.data(), w.data(), bytes.size());
    return bytes;
  }
  if (type == 1 || type == 30) {
    for (std::uint64_t i = 0; i < count; ++i) {
      std::uint32_t bits;
      std::memcpy(&bits, &w[i], 4);
      const std::uint16_t h = type == 1 ? codec::F32ToF16(w[i]) : static_cast<std::uint16_t>(bits >> 16);
      bytes[2 * i] = static_cast<std::uint8_t>(h);
      bytes[2 * i + 1] = static_cast<std::uint8_t>(h >> 8);
    }
    return bytes;
  }
  if (type == 28) {
    for (std::uint64_t i = 0; i < count; ++i) {
      const double d = static_cast<double>(w[i]) * (1.0 + 1e-9);
      std::memcpy(bytes.data() + 8 * i, &d, 8);
    }
    return bytes;
  }
  for (const codec::GgmlTypeInfo& info : codec::GgmlTypes()) {
    if (static_cast<std::uint32_t>(info.ggml_id) != type || info.type == codec::GgmlType::kMxfp4) continue;
    if (info.legacy_encoder) {
      codec::GgmlEncode(info.type, w.data(), blocks, bytes.data());
    } else {
      codec::GgmlEncodeWithinBound(info.type, w.data(), blocks, bytes.data());
    }
    return bytes;
  }
  // MXFP4 and the recognised types: random bytes; MXFP4's E8M0 scale (each
  // block's first byte) near 2^0.
  for (std::uint8_t& b : bytes) b = static_cast<std::uint8_t>(rng());
  if (type == 39) {
    for (std::size_t b = 0; b < blocks; ++b) bytes[b * 17] = static_cast<std::uint8_t>(120 + Pick(rng, 16));
  }
  return bytes;
}

GgufWritten WriteGguf(const GgufSpec& spec) {
  GgufWritten w;
  std::vector<std::uint8_t>& out = w.bytes;
  out = {'G', 'G', 'U', 'F'};
  PutU32(&out, spec.version);
  PutU64(&out, spec.tensor_count.value_or(spec.tensors.size()));
  PutU64(&out, spec.kv_count.value_or(spec.kvs.size()));
  for (const GgufKv& kv : spec.kvs) {
    PutString(&out, kv.key);
    PutU32(&out, kv.type);
    out.insert(out.end(), kv.value.begin(), kv.value.end());
  }
  std::uint64_t packed = 0;
  for (const GgufTensorSpec& t : spec.tensors) {
    const std::uint64_t offset = t.offset.value_or(packed);
    w.offsets.push_back(offset);
    packed = AlignUp(offset + t.data.size(), spec.alignment);
    PutString(&out, t.name);
    PutU32(&out, static_cast<std::uint32_t>(t.ne.size()));
    for (std::uint64_t d : t.ne) PutU64(&out, d);
    PutU32(&out, t.type);
    PutU64(&out, offset);
  }
  w.infos_end = out.size();
  w.data_start = AlignUp(out.size(), spec.alignment);
  constexpr std::uint64_t kWrittenLimit = std::uint64_t{1} << 24;
  std::uint64_t data_end = 0;
  for (std::size_t i = 0; i < spec.tensors.size(); ++i) {
    if (w.offsets[i] > kWrittenLimit) continue;
    data_end = std::max(data_end, w.offsets[i] + spec.tensors[i].data.size());
  }
  if (spec.tensors.empty()) return w;
  out.resize(w.data_start + AlignUp(data_end, spec.alignment), 0);
  for (std::size_t i = 0; i < spec.tensors.size(); ++i) {
    if (w.offsets[i] > kWrittenLimit) continue;
    std::copy(spec.tensors[i].data.begin(), spec.tensors[i].data.end(),
              out.begin() + static_cast<std::ptrdiff_t>(w.data_start + w.offsets[i]));
  }
  return w;
}

GgufSpec RandomGgufSpec(Rng& rng, bool allow_nested_arrays) {
  GgufSpec spec;
  spec.version = Coin(rng) ? 3 : 2;
  spec.kvs = RandomMetadata(rng, allow_nested_arrays);
  if (Coin(rng, 3)) {
    spec.alignment = kAlignments[Pick(rng, std::size(kAlignments))];
    spec.kvs.push_back(GgufU32("general.alignment", static_cast<std::uint32_t>(spec.alignment)));
  }
  const int n = 1 + static_cast<int>(Pick(rng, 4));
  for (int i = 0; i < n; ++i) {
    const std::uint32_t type = kDecodedTypes[Pick(rng, std::size(kDecodedTypes))];
    spec.tensors.push_back(RandomTensor("blk." + std::to_string(i) + ".weight", type, rng));
  }
  return spec;
}

Generated GgufValid(Rng& rng) { return Make(ValidSpec(rng), "", "valid .gguf file"); }

std::vector<std::string> GgufViolableRules() {
  return {"GGUF-001", "GGUF-002", "GGUF-003", "GGUF-004", "GGUF-005", "GGUF-006", "GGUF-007",
          "GGUF-008", "GGUF-009", "GGUF-010", "GGUF-011", "GGUF-012", "GGUF-013", "GGUF-014",
          "GGUF-015", "GGUF-016", "GGUF-017", "GGUF-018", "GGUF-019", "GGUF-101", "GGUF-102",
          // Last: a rule added later draws after the others, so their seeds
          // and vectors stay as they were.
          "GGUF-020"};
}

Generated GgufViolation(std::string_view rule, Rng& rng) {
  GgufSpec spec = ValidSpec(rng);
  const std::string r(rule);
  GgufTensorSpec& last = spec.tensors.back();
  if (r == "GGUF-001") {
    GgufWritten w = WriteGguf(spec);
    w.bytes[Pick(rng, 4)] ^= static_cast<std::uint8_t>(1 + Pick(rng, 255));
    return Generated{w.bytes, r, "wrong magic", {}};
  }
  if (r == "GGUF-002") {
    const std::uint32_t versions[] = {0, 1, 4, 5, 0x00010003u, 0xFFFFFFFFu};
    spec.version = versions[Pick(rng, std::size(versions))];
    return Make(spec, r, "unsupported version");
  }
  if (r == "GGUF-003") {
    spec.version = Coin(rng) ? 0x02000000u : 0x03000000u;
    return Make(spec, r, "big-endian version field");
  }
  if (r == "GGUF-004") {
    if (Coin(rng)) {
      spec.kv_count = std::uint64_t{1} << (20 + Pick(rng, 40));
    } else {
      spec.tensor_count = std::uint64_t{1} << (20 + Pick(rng, 40));
    }
    return Make(spec, r, "a count larger than the file can hold");
  }
  if (r == "GGUF-005") {
    GgufWritten w = WriteGguf(spec);
    if (Coin(rng)) {
      // The first key's length (at 24) beyond the bytes left.
      const std::uint64_t huge = w.bytes.size() + 1 + Pick(rng, 1u << 30);
      for (int i = 0; i < 8; ++i) w.bytes[24 + i] = static_cast<std::uint8_t>(huge >> (8 * i));
      return Generated{w.bytes, r, "a key length beyond the end", {}};
    }
    w.bytes.resize(w.infos_end - 1 - Pick(rng, 8));  // inside the last info's offset field
    return Generated{w.bytes, r, "the file ends inside a tensor info", {}};
  }
  if (r == "GGUF-006") {
    spec.kvs.push_back(Kv("quantdiff.bad", static_cast<std::uint32_t>(13 + Pick(rng, 1000)), {1, 2, 3, 4}));
    return Make(spec, r, "unknown metadata value type");
  }
  if (r == "GGUF-007") {
    spec.kvs.push_back(Kv("quantdiff.deep", 9, NestedArray(9 + static_cast<int>(Pick(rng, 3)))));
    return Make(spec, r, "arrays nested deeper than 8");
  }
  if (r == "GGUF-008") {
    spec.kvs.push_back(GgufU32(spec.kvs[Pick(rng, spec.kvs.size())].key, 1));
    return Make(spec, r, "duplicate metadata key");
  }
  if (r == "GGUF-009") {
    std::vector<std::uint8_t> v;
    switch (Pick(rng, 3)) {
      case 0: PutU64(&v, 32); spec.kvs.push_back(Kv("general.alignment", 10, v)); break;
      case 1: spec.kvs.push_back(GgufU32("general.alignment", 0)); break;
      default: spec.kvs.push_back(GgufU32("general.alignment", 48)); break;
    }
    // Drop an earlier general.alignment so this one is not a duplicate.
    spec.kvs.erase(std::remove_if(spec.kvs.begin(), spec.kvs.end() - 1,
                                  [](const GgufKv& kv) { return kv.key == "general.alignment"; }),
                   spec.kvs.end() - 1);
    spec.alignment = 32;
    return Make(spec, r, "general.alignment not a UINT32 power of two");
  }
  if (r == "GGUF-010") {
    spec.kvs.insert(spec.kvs.begin() + static_cast<std::ptrdiff_t>(Pick(rng, spec.kvs.size() + 1)), GgufU32("", 1));
    return Make(spec, r, "empty metadata key");
  }
  if (r == "GGUF-011") {
    GgufTensorSpec copy = spec.tensors[Pick(rng, spec.tensors.size())];
    copy.offset.reset();
    spec.tensors.push_back(copy);
    return Make(spec, r, "duplicate tensor name");
  }
  if (r == "GGUF-012") {
    if (Coin(rng, 4)) {
      last.name = "";
      return Make(spec, r, "empty tensor name");
    }
    last.name = std::string(64 + Pick(rng, 30), 'n');
    return Make(spec, r, "tensor name longer than 63 bytes");
  }
  if (r == "GGUF-013") {
    while (last.ne.size() < 5 + Pick(rng, 3)) last.ne.push_back(1);
    return Make(spec, r, "more than 4 dimensions");
  }
  if (r == "GGUF-014") {
    last.ne = {last.ne[0], std::uint64_t{1} << (62 - Pick(rng, 3)), 8 + Pick(rng, 8)};
    if (Coin(rng)) {
      last.ne[1] = (std::uint64_t{1} << 63) + Pick(rng, 100);
      return Make(spec, r, "a dimension of 2^63 or more");
    }
    return Make(spec, r, "element count beyond 2^63 - 1");
  }
  if (r == "GGUF-015") {
    const std::uint32_t unknown[] = {4, 5, 31, 33, 36, 38, 43, 1000, 0xFFFFFFFFu};
    last.type = unknown[Pick(rng, std::size(unknown))];
    return Make(spec, r, "unknown ggml type");
  }
  if (r == "GGUF-016") {
    last.type = Coin(rng) ? 2 : 12;  // q4_0 (QK 32) or q4_K (QK 256)
    const std::uint64_t partial = 1 + Pick(rng, 31);  // two draws in sequence (see above)
    last.ne[0] = partial + (last.type == 2 ? 32 : 256) * Pick(rng, 2);
    return Make(spec, r, "a row that is not a whole number of blocks");
  }
  if (r == "GGUF-017") {
    GgufWritten w = WriteGguf(spec);
    last.offset = w.offsets.back() + spec.alignment / 2;
    return Make(spec, r, "offset not a multiple of the alignment");
  }
  if (r == "GGUF-018") {
    if (Coin(rng)) {
      last.offset = spec.alignment << (30 + Pick(rng, 20));
      return Make(spec, r, "a tensor far past the end");
    }
    GgufWritten w = WriteGguf(spec);
    // Cut into the data of the tensor ending last.
    std::uint64_t end = 0;
    for (std::size_t i = 0; i < spec.tensors.size(); ++i) end = std::max(end, w.offsets[i] + spec.tensors[i].data.size());
    w.bytes.resize(w.data_start + end - 1 - Pick(rng, 2));
    return Generated{w.bytes, r, "the file ends inside a tensor's data", {}};
  }
  if (r == "GGUF-019") {
    GgufTensorSpec extra = RandomTensor("overlap.weight", kDecodedTypes[Pick(rng, std::size(kDecodedTypes))], rng);
    GgufWritten w = WriteGguf(spec);
    extra.offset = w.offsets[Pick(rng, w.offsets.size())];
    spec.tensors.push_back(extra);
    return Make(spec, r, "two tensors share bytes");
  }
  if (r == "GGUF-101") {
    spec.tensors.push_back(RandomTensor("recognised.weight", kRecognisedTypes[Pick(rng, std::size(kRecognisedTypes))], rng));
    return Make(spec, r, "a tensor of a recognised, not decoded type");
  }
  if (r == "GGUF-102") {
    GgufWritten w = WriteGguf(spec);
    last.offset = w.offsets.back() + spec.alignment * (1 + Pick(rng, 3));
    return Make(spec, r, "a gap before the last tensor (not ggml's packing)");
  }
  if (r == "GGUF-020") {
    // A BOOL byte other than 0 or 1, a pair's own value or in a BOOL array.
    const auto byte = static_cast<std::uint8_t>(2 + Pick(rng, 254));
    if (Coin(rng)) {
      spec.kvs.push_back(Kv("quantdiff.flag", 7, {byte}));
    } else {
      spec.kvs.push_back(Kv("quantdiff.flags", 9, ArrayValue(7, 3, {1, byte, 0})));
    }
    return Make(spec, r, "a BOOL value byte other than 0 or 1");
  }
  return Make(spec, "", "valid .gguf file");
}

}  // namespace qd::gen
