// Generators for the safetensors container (rules ST-*). Valid files come
// from the codec writer; each violation rewrites one part of a valid file so
// that exactly the named rule, and no earlier one, applies.
#include <algorithm>
#include <cstring>

#include "codecs/safetensors.h"
#include "generators/generators.h"
#include "generators/raw_file.h"

namespace qd::gen {
namespace {


// Non-block dtypes with their bit widths (the writer must fill whole bytes).
struct PlainDtype {
  const char* name;
  std::uint64_t bits;
};
constexpr PlainDtype kPlainDtypes[] = {
    {"BOOL", 8}, {"F4", 4},    {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"U8", 8},
    {"I8", 8},   {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"I16", 16},
    {"U16", 16}, {"F16", 16},  {"BF16", 16},  {"I32", 32},    {"U32", 32},
    {"F32", 32}, {"C64", 64},  {"F64", 64},   {"I64", 64},    {"U64", 64},
};


codec::TensorWithBytes RandomTensor(Rng& rng, int index) {
  const PlainDtype& d = kPlainDtypes[Pick(rng, std::size(kPlainDtypes))];
  codec::TensorWithBytes t;
  t.spec.name = "tensor." + std::to_string(index);
  t.spec.dtype = d.name;
  const std::uint64_t rank = Pick(rng, 4);
  std::uint64_t count = 1;
  for (std::uint64_t r = 0; r < rank; ++r) {
    t.spec.shape.push_back(Pick(rng, 6));
    count *= t.spec.shape.back();
  }
  // Sub-byte dtypes must fill whole bytes: make the last dimension even (or
  // a multiple of 4 for 6-bit types).
  if ((count * d.bits) % 8 != 0) {
    t.spec.shape.push_back(d.bits == 4 ? 2 : 4);
    count *= t.spec.shape.back();
  }
  t.bytes.resize(count * d.bits / 8);
  for (auto& b : t.bytes) b = static_cast<std::uint8_t>(rng());
  return t;
}

std::vector<codec::TensorWithBytes> RandomTensors(Rng& rng, int at_least) {
  std::vector<codec::TensorWithBytes> tensors;
  const int count = at_least + static_cast<int>(Pick(rng, 4));
  for (int i = 0; i < count; ++i) tensors.push_back(RandomTensor(rng, i));
  return tensors;
}

Generated Make(std::vector<std::uint8_t> bytes, std::string rule, std::string what) {
  return Generated{std::move(bytes), std::move(rule), std::move(what), {}};
}

void SetHeaderLength(std::vector<std::uint8_t>* file, std::uint64_t n) {
  for (int i = 0; i < 8; ++i) (*file)[i] = static_cast<std::uint8_t>(n >> (8 * i));
}

// One tensor entry as JSON text, with the fields given verbatim.
std::string Entry(const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "{\"dtype\":" + dtype + ",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}

}  // namespace

Generated SafetensorsValid(Rng& rng) {
  auto tensors = RandomTensors(rng, 0);
  codec::MetadataList metadata = {{"format", "pt"}};
  const bool with_metadata = Pick(rng, 2) == 0;
  return Make(codec::SerializeSafetensors(tensors, with_metadata ? &metadata : nullptr),
              "", "valid container with " + std::to_string(tensors.size()) + " tensors");
}

std::vector<std::string> SafetensorsViolableRules() {
  return {"ST-001", "ST-002", "ST-003", "ST-004", "ST-005", "ST-006", "ST-007",
          "ST-008", "ST-009", "ST-010", "ST-011", "ST-012", "ST-013", "ST-101",
          "ST-102"};
}

Generated SafetensorsViolation(std::string_view rule, Rng& rng) {
  std::vector<std::uint8_t> file = SafetensorsValid(rng).bytes;
  const std::string r(rule);
  const std::string u8 = "\"U8\"";
  if (r == "ST-001") {
    file.resize(Pick(rng, 8));
    return Make(file, r, "file shorter than 8 bytes");
  }
  if (r == "ST-002") {
    SetHeaderLength(&file, 100'000'001 + Pick(rng, 1'000'000'000'000ull));
    return Make(file, r, "header length above 100,000,000");
  }
  if (r == "ST-003") {
    const std::uint64_t past = file.size() - 8 + 1 + Pick(rng, 1000);
    SetHeaderLength(&file, past);
    return Make(file, r, "header runs past the end of the file");
  }
  if (r == "ST-004") {
    static const char* const kBad[] = {
        "[]", "{\"a\":1", "{\"a\":\"\xff\"}", "{\"a\":\"\\ud800\"}", "{} x",
        "{\"a\":1e400}", "\xef\xbb\xbf{}", "{\"a\":01}", "{\"a\":\"\x01\"}",
        "{\"a\":\"\xc0\x80\"}", "{'a':1}", "{\"a\":tru}", "{}\0",
    };
    const std::size_t pick = Pick(rng, std::size(kBad) + 1);
    std::string header;
    if (pick == std::size(kBad)) {  // 65 nested containers
      header = "{\"x\":" + std::string(64, '[') + std::string(64, ']') + "}";
    } else {
      header = kBad[pick];
      if (pick == 12) header.push_back('\0');
    }
    return Make(RawFile(header, {}), r, "header is not a JSON object");
  }
  if (r == "ST-005") {
    const bool nested = Pick(rng, 2) == 0;
    const std::string header =
        nested ? "{\"t\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}"
               : "{\"t\":" + Entry(u8, "[1]", "[0,1]") + ",\"t\":" + Entry(u8, "[1]", "[0,1]") + "}";
    return Make(RawFile(header, {7}), r, "duplicate key");
  }
  if (r == "ST-006") {
    static const char* const kBad[] = {"{\"k\":1}", "[]", "null", "\"x\"", "{\"k\":{}}"};
    const std::string header = std::string("{\"__metadata__\":") + kBad[Pick(rng, 5)] +
                               ",\"t\":" + Entry(u8, "[1]", "[0,1]") + "}";
    return Make(RawFile(header, {7}), r, "__metadata__ is not an object of strings");
  }
  if (r == "ST-007") {
    static const char* const kBad[] = {
        "{\"shape\":[1],\"data_offsets\":[0,1]}",
        "{\"dtype\":\"U8\",\"data_offsets\":[0,1]}",
        "{\"dtype\":\"U8\",\"shape\":[1]}",
        "{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,1]}",
        "{\"dtype\":8,\"shape\":[1],\"data_offsets\":[0,1]}",
        "{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}",
        "{\"dtype\":\"U8\",\"shape\":[1.0],\"data_offsets\":[0,1]}",
        "{\"dtype\":\"U8\",\"shape\":[18446744073709551616],\"data_offsets\":[0,1]}",
        "{\"dtype\":\"U8\",\"shape\":1,\"data_offsets\":[0,1]}",
        "[1]",
    };
    const std::string header = std::string("{\"t\":") + kBad[Pick(rng, std::size(kBad))] + "}";
    return Make(RawFile(header, {7}), r, "malformed tensor entry");
  }
  if (r == "ST-008") {
    const bool by_bits = Pick(rng, 2) == 0;
    const std::string header =
        by_bits ? "{\"t\":" + Entry("\"F64\"", "[2305843009213693952,2]", "[0,0]") + "}"
                : "{\"t\":" + Entry(u8, "[4294967296,4294967296,2]", "[0,0]") + "}";
    return Make(RawFile(header, {}), r, "element count overflows 64 bits");
  }
  if (r == "ST-009") {
    static const char* const kBad[] = {"[1,0]", "[0]", "[0,1,1]", "[\"0\",1]", "{}", "[0,-1]"};
    const std::string header = "{\"t\":" + Entry(u8, "[1]", kBad[Pick(rng, std::size(kBad))]) + "}";
    return Make(RawFile(header, {7}), r, "bad data_offsets");
  }
  if (r == "ST-010") {
    const bool sub_byte = Pick(rng, 2) == 0;
    const std::string header = sub_byte
        ? "{\"t\":" + Entry("\"F4\"", "[3]", "[0,2]") + "}"
        : "{\"t\":" + Entry("\"F32\"", "[2]", "[0,4]") + "}";
    return Make(RawFile(header, std::vector<std::uint8_t>(sub_byte ? 2 : 4, 0)), r,
                "byte length disagrees with shape and dtype");
  }
  if (r == "ST-011") {
    const bool hole = Pick(rng, 2) == 0;
    const std::string header = hole
        ? "{\"a\":" + Entry(u8, "[2]", "[0,2]") + ",\"b\":" + Entry(u8, "[2]", "[3,5]") + "}"
        : "{\"a\":" + Entry(u8, "[2]", "[0,2]") + ",\"b\":" + Entry(u8, "[2]", "[1,3]") + "}";
    return Make(RawFile(header, std::vector<std::uint8_t>(hole ? 5 : 3, 1)), r,
                hole ? "hole between tensors" : "overlapping tensors");
  }
  if (r == "ST-012") {
    file.resize(file.size() + 1 + Pick(rng, 16), 0xaa);
    return Make(file, r, "trailing bytes after the last tensor");
  }
  if (r == "ST-013") {
    const std::string header = "{\"t\":" + Entry(u8, "[4]", "[0,4]") + "}";
    return Make(RawFile(header, std::vector<std::uint8_t>(Pick(rng, 4), 1)), r,
                "tensor runs past the end of the file");
  }
  if (r == "ST-101") {
    const std::string header = "  {\"t\":" + Entry(u8, "[1]", "[0,1]") + "}";
    return Make(RawFile(header, {7}), r, "leading whitespace (warning)");
  }
  if (r == "ST-102") {
    std::string header = "{\"t\":" + Entry(u8, "[1]", "[0,1]") + "}";
    while (header.size() % 8 == 0) header += ' ';
    return Make(RawFile(header, {7}, /*pad=*/false), r, "unpadded header (warning)");
  }
  return Make(file, "", "unknown rule " + r + ": valid file");
}

}  // namespace qd::gen
