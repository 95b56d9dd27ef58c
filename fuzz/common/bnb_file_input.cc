// bnb_file_input.cc: builds the file a bnb_file_diff input stands for.
#include "fuzz/common/bnb_file_input.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "codecs/bnb.h"
#include "codecs/safetensors.h"
#include "fuzz/common/bnb_file_draft.h"
#include "fuzz/common/fuzz_support.h"
#include "generators/generators.h"
#include "harness/registry.h"

namespace qd::fuzz {

// The name EntryIndex gives a missing entry under.
constexpr char kWho[] = "bnb_file_input";

const std::vector<std::string_view> kBnbStateKeys = {
    "quant_type", "blocksize", "dtype", "shape", "nested_blocksize", "nested_dtype",
    "nested_offset", "nested_x", "quant_map",
};

const std::vector<std::string_view> kBnbJsonValues = {
    // strings: quant types, dtypes, near misses
    "\"nf4\"", "\"fp4\"", "\"NF4\"", "\"int4\"", "\"\"", "\"float16\"", "\"bfloat16\"",
    "\"float32\"", "\"float64\"", "\"half\"", "\"64\"", "\"nf4\\u0000\"",
    // integers: blocksizes in and out of range, extremes
    "0", "1", "16", "31", "32", "48", "64", "100", "128", "256", "4096", "8192",
    "18446744073709551615", "9223372036854775808",
    // numbers that are not integers (blocksize) but are numbers (nested_offset)
    "-64", "-0", "64.0", "6.4e1", "0.5", "-0.0", "1e-45", "1e-46", "3.4028235e38",
    "3.5e38", "1e300", "-1e300", "1.1754943e-38",
    // other JSON types
    "null", "true", "[]", "{}", "[0]", "[1]", "[2,3]", "[1.5]", "[-1]", "[\"1\"]",
    "[18446744073709551615,2]", "[4294967296,4294967296]", "[0,7]", "[1,1,1,1]",
};

const std::vector<std::string_view> kBnbTokens = {
    // JSON structure and encoding corners
    "{", "}", "[", "]", ",", ":", "\"", " ", "\t", "\\", "\\u0000", "\\ud800", "\\u0066",
    std::string_view("\0", 1), "\xef\xbb\xbf", "\xff", "\xc0\x80", "[[[[[[[[[[[[[[[[",
    // keys and whole members
    "\"quant_type\"", "\"blocksize\"", "\"dtype\"", "\"shape\"", "\"nested_blocksize\"",
    "\"nested_dtype\"", "\"nested_offset\"", "\"nested_\"", "\"quant_map\"",
    ",\"nested_offset\":0", ",\"nested_blocksize\":256", ",\"nested_dtype\":\"float32\"",
    ",\"blocksize\":64", ",\"quant_type\":\"nf4\"", ",\"quant_type\":\"fp4\"", ",\"x\":1",
    ",\"dtype\":\"float16\"",
    // values
    "\"nf4\"", "\"fp4\"", "\"float16\"", "\"bfloat16\"", "\"float32\"", "\"float64\"", "null",
    "true", "0", "-0", "1", "01", "1.0", "1e2", "-64", "64", "4096", "8192", "1e400", "-1e400",
    "1e39", "18446744073709551615", "18446744073709551616", "[1,2]", "[]",
    // tensor names and header pieces
    "bitsandbytes__nf4", "bitsandbytes__fp4", ".quant_state.bitsandbytes__", "weight_quant_state",
    ".SCB", "weight_scb", ".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map",
    "weight_format", "bnb_blockwise8_quant_state", "\"U8\"", "\"F32\"", "\"I8\"", "\"F16\"",
    "\"BF16\"", "[1,", "[0,", "\"__metadata__\"",
};

const std::vector<std::string_view> kBnbDtypes = {
    "U8", "I8", "F32", "F16", "BF16", "F64", "I32", "U16", "BOOL", "F8_E4M3", "I64", "Q4B32",
};

const std::vector<std::uint32_t> kBnbFloatSpecials = {
    0x7f800000u,  // +inf
    0xff800000u,  // -inf
    0x7fc00000u,  // quiet NaN
    0x7f800001u,  // signalling NaN
    0xffc00000u,  // negative NaN
    0x80000000u,  // -0
    0x00000000u,  // +0
    0x00000001u,  // smallest subnormal
    0x007fffffu,  // largest subnormal
    0x00800000u,  // smallest normal
    0x006ce3eeu,  // 1e-38, the quantizers' absmax floor
    0x7f7fffffu,  // largest finite
    0xff7fffffu,  // lowest finite
    0x3f800000u,  // 1
    0xbf800000u,  // -1
    0x3f000000u,  // 0.5
    0x477fe000u,  // 65504, largest binary16
    0x477ff000u,  // 65520, rounds to binary16 infinity
    0x7f7f8000u,  // rounds to bfloat16 infinity
    0x33800000u,  // 2^-24, smallest binary16 subnormal
    0x33000000u,  // 2^-25, the binary16 tie to zero
    0x4b800000u,  // 2^24
    0x3f7e3333u,  // 0.99296875, the dynamic map's top
    0x7effffffu,  // FLT_MAX / 2 (products overflow)
};

namespace {

using namespace bnb_draft;  // NOLINT(google-build-using-namespace): the layer the ops edit

// ---- draft ops -------------------------------------------------------------------

void AddTensor(BnbAdd what, Draft* d) {
  const std::string state_text = d->StateText(false);
  const std::vector<std::uint8_t> state_bytes(state_text.begin(), state_text.end());
  const std::string sibling = d->kind == BnbFileKind::k4bitGptq ? d->module_dot + "weight_"
                                                                : d->weight + ".";
  switch (what) {
    case BnbAdd::kSecondHfState:
      d->Add(d->weight + ".quant_state.bitsandbytes__" + (d->type_text == "nf4" ? "fp4" : "nf4"),
             "U8", {state_bytes.size()}, state_bytes, -1);
      break;
    case BnbAdd::kGptqState:
      d->Add(d->module_dot + "weight_quant_state", "U8", {state_bytes.size()}, state_bytes, -1);
      break;
    case BnbAdd::kScb: {
      const DraftTensor* w = d->Role(BnbRole::kWeight);
      const std::uint64_t rows = w != nullptr && !w->shape.empty() ? std::min<std::uint64_t>(w->shape[0], 4096) : 1;
      d->Add(d->module_dot + "SCB", "F32", {rows}, AsBytes(std::vector<float>(rows, 127.0f)), -1);
      break;
    }
    case BnbAdd::kNestedAbsmax:
      d->Add(sibling + "nested_absmax", "F32", {1}, AsBytes(std::vector<float>{1.0f}),
             BnbRole::kNestedAbsmax);
      break;
    case BnbAdd::kNestedQuantMap:
      d->Add(sibling + "nested_quant_map", "F32", {256}, AsBytes(codec::CreateDynamicMap()),
             BnbRole::kNestedQuantMap);
      break;
    case BnbAdd::kQuantMap: {
      const auto& table = codec::Bnb4bitTable(codec::Bnb4bitType::kNf4);
      if (d->kind == BnbFileKind::kBlockwise8) {
        d->Add(sibling + "quant_map", "F32", {256}, AsBytes(codec::CreateDynamicMap()), -1);
      } else {
        d->Add(sibling + "quant_map", "F32", {16},
               AsBytes(std::vector<float>(table.begin(), table.end())), -1);
      }
      break;
    }
    case BnbAdd::kWeightFormat:
      d->Add(d->module_dot + "weight_format", "U8", {}, {0}, BnbRole::kWeightFormat);
      break;
    case BnbAdd::kBlockwise8Key:
      d->metadata.emplace_back("bnb_blockwise8_quant_state", "{\"blocksize\":64,\"dtype\":\"float32\"}");
      break;
    case BnbAdd::kOrphanState:
      d->Add("ghost.quant_state.bitsandbytes__nf4", "U8", {state_bytes.size()}, state_bytes, -1);
      break;
    case BnbAdd::kPlainF16:
      d->Add("plain.f16", "F16", {3}, {0x00, 0x3c, 0x01, 0x00, 0x00, 0x7c}, -1);
      break;
    case BnbAdd::kPlainBF16:
      d->Add("plain.bf16", "BF16", {2}, {0x80, 0x3f, 0xc0, 0x7f}, -1);
      break;
    case BnbAdd::kPlainF64:
      d->Add("plain.f64", "F64", {1}, {0, 0, 0, 0, 0, 0, 0xf0, 0x3f}, -1);
      break;
    case BnbAdd::kCount:
      break;
  }
}

void Rename(DraftTensor* t, std::uint8_t variant) {
  static const char* const kSuffixes[] = {".weight_quant_state", ".SCB", ".weight_scb",
                                          ".absmax", ".quant_map", "_"};
  static const char* const kTypes[] = {"nf4", "fp4", "NF4", "", "nf4.SCB", "int4"};
  constexpr std::string_view kMarker = ".quant_state.bitsandbytes__";
  const int v = variant % 12;
  if (v < 6) {
    t->name += kSuffixes[v];
    return;
  }
  const std::size_t at = t->name.find(kMarker);
  if (at != std::string::npos) {
    t->name = t->name.substr(0, at + kMarker.size()) + kTypes[v - 6];
  } else {
    t->name = "x." + t->name;  // out of its layer
  }
}

void SetKey(Draft* d, std::string_view key, const Json& value) {
  if (d->state.is_object()) d->state[std::string(key)] = value;
}

void NumberDelta(Draft* d, std::string_view key, std::int8_t delta) {
  if (!d->state.is_object() || !d->state.contains(std::string(key))) return;
  Json& v = d->state[std::string(key)];
  if (v.is_number_unsigned()) {
    const std::uint64_t u = v.get<std::uint64_t>();
    if (delta < 0 && u < static_cast<std::uint64_t>(-delta)) {
      v = static_cast<std::int64_t>(u) + delta;
    } else {
      v = u + static_cast<std::uint64_t>(static_cast<std::int64_t>(delta));
    }
  } else if (v.is_number_integer()) {
    v = v.get<std::int64_t>() + delta;
  } else if (v.is_number_float()) {
    v = v.get<double>() + delta;
  }
}

void ShapeEdit(Draft* d, std::uint8_t mode, std::uint8_t index, std::uint8_t value) {
  if (!d->state.is_object()) return;
  if (!d->state.contains("shape") || !d->state["shape"].is_array()) {
    if (mode % 4 == 1) d->state["shape"] = Json::array({value});
    return;
  }
  Json& shape = d->state["shape"];
  const std::size_t size = shape.size();
  switch (mode % 4) {
    case 0:
      if (size != 0) shape[index % size] = value;
      break;
    case 1:
      shape.push_back(value);
      break;
    case 2:
      if (size != 0) shape.erase(index % size);
      break;
    default: {  // [.., a, b, ..] -> [.., 2a, b/2, ..]: the same n, another shape
      if (size < 2) break;
      const std::size_t j = index % (size - 1);
      if (!shape[j].is_number_unsigned() || !shape[j + 1].is_number_unsigned()) break;
      const std::uint64_t a = shape[j].get<std::uint64_t>(), b = shape[j + 1].get<std::uint64_t>();
      if (b % 2 == 0 && a < (1ull << 62)) {
        shape[j] = a * 2;
        shape[j + 1] = b / 2;
      }
    }
  }
}

// ---- writing and file ops ------------------------------------------------------------

std::vector<std::uint8_t> Write(const Draft& d, bool with_edits) {
  std::vector<codec::TensorWithBytes> all;
  const std::string text = d.StateText(with_edits);
  for (const DraftTensor& t : d.tensors) {
    DraftTensor copy = t;
    if (t.json) {
      copy.bytes.assign(text.begin(), text.end());
      copy.refit = true;
    }
    all.push_back({{copy.name, copy.dtype, copy.refit ? Refit(copy) : copy.shape, 0},
                   std::move(copy.bytes)});
  }
  codec::MetadataList metadata = d.metadata;
  if (d.state_in_metadata) metadata.emplace_back("bnb_blockwise8_quant_state", text);
  return codec::SerializeSafetensors(all, &metadata);
}


// One parsed op with its arguments (read up front: draft ops run before the
// file exists, file ops after).
struct ParsedOp {
  BnbOp op = BnbOp::kCount;
  std::uint8_t a = 0, b = 0, c = 0;
  std::uint16_t position = 0;
  std::uint64_t wide = 0;
};

bool IsFileOp(BnbOp op) { return op >= BnbOp::kHeaderByte; }

std::vector<ParsedOp> ParseOps(InputReader& in) {
  constexpr int kMaxOps = 32;
  std::vector<ParsedOp> ops;
  for (int n = 0; n < kMaxOps && !in.empty(); ++n) {
    ParsedOp p;
    p.op = static_cast<BnbOp>(in.U8() % static_cast<std::uint8_t>(BnbOp::kCount));
    switch (p.op) {
      case BnbOp::kDropKey:
      case BnbOp::kDropTensor:
      case BnbOp::kAddTensor:
        p.a = in.U8();
        break;
      case BnbOp::kFlipBit:
        p.wide = in.U32();
        break;
      case BnbOp::kSetKey:
      case BnbOp::kNumberDelta:
      case BnbOp::kResize:
      case BnbOp::kTensorShape:
      case BnbOp::kRename:
      case BnbOp::kSwap:
        p.a = in.U8();
        p.b = in.U8();
        break;
      case BnbOp::kShapeEdit:
      case BnbOp::kTensorDtype:
        p.a = in.U8();
        p.b = in.U8();
        p.c = in.U8();
        break;
      case BnbOp::kStateSplice:
      case BnbOp::kHeaderSplice:
        p.a = in.U8();
        p.position = in.U16();
        p.b = in.U8();
        break;
      case BnbOp::kSetFloat:
      case BnbOp::kSetByte:
        p.a = in.U8();
        p.position = in.U16();
        p.b = in.U8();
        break;
      case BnbOp::kHeaderByte:
      case BnbOp::kDataByte:
        p.position = in.U16();
        p.a = in.U8();
        break;
      case BnbOp::kTruncate:
        p.position = in.U16();
        break;
      case BnbOp::kLengthPrefix:
        p.a = in.U8();
        p.wide = (p.a & 1) == 0 ? in.U8() : in.U64();
        break;
      case BnbOp::kCount:
        break;
    }
    ops.push_back(p);
  }
  return ops;
}

DraftTensor* RoleTensor(Draft* d, std::uint8_t role) {
  return d->Role(static_cast<BnbRole>(role % static_cast<std::uint8_t>(BnbRole::kCount)));
}

void ApplyDraftOp(const ParsedOp& p, Draft* d) {
  const auto key = [&](std::uint8_t k) { return kBnbStateKeys[k % kBnbStateKeys.size()]; };
  switch (p.op) {
    case BnbOp::kDropKey:
      if (d->state.is_object()) d->state.erase(std::string(key(p.a)));
      break;
    case BnbOp::kSetKey:
      SetKey(d, key(p.a), ParsedJsonValues()[p.b % ParsedJsonValues().size()]);
      break;
    case BnbOp::kNumberDelta:
      NumberDelta(d, key(p.a), static_cast<std::int8_t>(p.b));
      break;
    case BnbOp::kShapeEdit:
      ShapeEdit(d, p.a, p.b, p.c);
      break;
    case BnbOp::kStateSplice:
      d->text_edits.push_back({kBnbTokens[p.a % kBnbTokens.size()], p.position,
                               static_cast<std::uint8_t>(p.b % 8)});
      break;
    case BnbOp::kDropTensor: {
      const DraftTensor* t = RoleTensor(d, p.a);
      if (t != nullptr) {
        d->tensors.erase(d->tensors.begin() + (t - d->tensors.data()));
      }
      break;
    }
    case BnbOp::kTensorDtype:
      if (DraftTensor* t = RoleTensor(d, p.a)) {
        t->dtype = kBnbDtypes[p.b % kBnbDtypes.size()];
        t->refit = t->refit || (p.c & 1) != 0;
      }
      break;
    case BnbOp::kResize:
      if (DraftTensor* t = RoleTensor(d, p.a); t != nullptr && !t->json) {
        const std::uint64_t item = ItemSize(t->dtype);
        const std::int64_t count = static_cast<std::int64_t>(t->bytes.size() / item);
        const std::int64_t want = std::max<std::int64_t>(0, count + static_cast<std::int8_t>(p.b));
        // New elements repeat the last one (a plausible value), or are zero.
        std::vector<std::uint8_t> last(item, 0);
        if (count > 0) std::copy(t->bytes.end() - item, t->bytes.end(), last.begin());
        t->bytes.resize(static_cast<std::size_t>(std::min(count, want)) * item);
        for (std::int64_t i = count; i < want; ++i) t->bytes.insert(t->bytes.end(), last.begin(), last.end());
        t->refit = true;
      }
      break;
    case BnbOp::kTensorShape:
      if (DraftTensor* t = RoleTensor(d, p.a)) {
        t->shape_mode = p.b % 6;
        t->refit = true;
      }
      break;
    case BnbOp::kSetFloat:
      if (DraftTensor* t = RoleTensor(d, p.a); t != nullptr && !t->json && t->bytes.size() >= 4) {
        const std::uint32_t bits = kBnbFloatSpecials[p.b % kBnbFloatSpecials.size()];
        const std::size_t at = 4 * (p.position % (t->bytes.size() / 4));
        std::memcpy(t->bytes.data() + at, &bits, 4);
      }
      break;
    case BnbOp::kSetByte:
      if (DraftTensor* t = RoleTensor(d, p.a); t != nullptr && !t->json && !t->bytes.empty()) {
        t->bytes[p.position % t->bytes.size()] = p.b;
      }
      break;
    case BnbOp::kAddTensor:
      AddTensor(static_cast<BnbAdd>(p.a % static_cast<std::uint8_t>(BnbAdd::kCount)), d);
      break;
    case BnbOp::kRename:
      if (DraftTensor* t = RoleTensor(d, p.a)) Rename(t, p.b);
      break;
    case BnbOp::kSwap:
      if (!d->tensors.empty()) {
        std::swap(d->tensors[p.a % d->tensors.size()], d->tensors[p.b % d->tensors.size()]);
      }
      break;
    default:
      break;
  }
}

void ApplyFileOp(const ParsedOp& p, std::vector<std::uint8_t>* file, std::size_t* header_length) {
  const auto text_length = [&]() -> std::size_t {
    return file->size() < 8 ? 0 : std::min(*header_length, file->size() - 8);
  };
  switch (p.op) {
    case BnbOp::kHeaderByte:
      if (const std::size_t text = text_length(); text > 0) (*file)[8 + p.position % text] = p.a;
      break;
    case BnbOp::kDataByte: {
      const std::size_t start = 8 + *header_length;
      if (file->size() > start) (*file)[start + p.position % (file->size() - start)] = p.a;
      break;
    }
    case BnbOp::kTruncate:
      file->resize(file->size() - p.position % (file->size() + 1));
      break;
    case BnbOp::kLengthPrefix:
      if ((p.a & 1) == 0) {
        WritePrefix(file, ReadPrefix(*file) + static_cast<std::uint64_t>(static_cast<std::int64_t>(
                                                  static_cast<std::int8_t>(p.wide))));
      } else {
        WritePrefix(file, p.wide);
      }
      break;
    case BnbOp::kHeaderSplice: {
      if (file->size() < 8) break;
      const std::string_view token = kBnbTokens[p.a % kBnbTokens.size()];
      const std::size_t text = text_length();
      const std::size_t at = p.position % (text + 1);
      const std::size_t removed = std::min<std::size_t>(p.b % 8, text - at);
      file->erase(file->begin() + 8 + at, file->begin() + 8 + at + removed);
      file->insert(file->begin() + 8 + at, token.begin(), token.end());
      *header_length = text - removed + token.size();
      WritePrefix(file, *header_length);
      break;
    }
    case BnbOp::kFlipBit:
      if (!file->empty()) {
        (*file)[(p.wide / 8) % file->size()] ^= static_cast<std::uint8_t>(1u << (p.wide % 8));
      }
      break;
    default:
      break;
  }
}

}  // namespace

std::uint8_t BnbKeyIndex(std::string_view key) { return EntryIndex(kBnbStateKeys, key, kWho); }
std::uint8_t BnbJsonValueIndex(std::string_view value) { return EntryIndex(kBnbJsonValues, value, kWho); }
std::uint8_t BnbTokenIndex(std::string_view token) { return EntryIndex(kBnbTokens, token, kWho); }
std::uint8_t BnbDtypeIndex(std::string_view dtype) { return EntryIndex(kBnbDtypes, dtype, kWho); }
std::uint8_t BnbFloatSpecialIndex(std::uint32_t bits) {
  for (std::size_t i = 0; i < kBnbFloatSpecials.size(); ++i) {
    if (kBnbFloatSpecials[i] == bits) return static_cast<std::uint8_t>(i);
  }
  std::fprintf(stderr, "bnb_file_input: no such float special: 0x%08x\n", bits);
  std::abort();
}

BnbFileTail DecodeBnbFileTail(const std::uint8_t* t) {
  BnbFileTail tail;
  tail.kind = static_cast<BnbFileKind>((t[0] & 7) % 5);
  tail.fp4 = (t[0] & 8) != 0;
  tail.nested = (t[0] & 16) != 0;
  tail.dtype = ((t[0] >> 5) & 3) % 3;
  tail.extra_tensor = (t[0] & 128) != 0;
  tail.blocksize_log2 = 5 + (t[1] & 7);
  tail.nested_blocksize_log2 = 5 + ((t[1] >> 3) & 7);
  tail.storage = (t[1] >> 6) & 3;
  tail.rank = 1 + (t[2] & 3) % 3;
  tail.packed_layout = ((t[2] >> 2) & 3) % 3;
  tail.order = ((t[2] >> 4) & 3) % 3;
  tail.shape_key = ((t[2] >> 6) & 3) % 3;
  tail.dim_a = t[3];
  tail.dim_b = t[4];
  tail.magnitude_exponent = t[5] % 48 - 30;
  tail.raw = (t[6] & 0x0F) == 0x0F;
  tail.zero_dim = (t[6] & 0x10) != 0;
  tail.quant_map = ((t[6] >> 5) & 3) % 3;
  tail.weight_format = (t[6] & 0x80) != 0;
  tail.module = t[7] & 3;
  tail.seed = 0;
  for (int i = 0; i < 4; ++i) tail.seed |= static_cast<std::uint32_t>(t[8 + i]) << (8 * i);
  return tail;
}

std::array<std::uint8_t, kBnbFileTailSize> EncodeBnbFileTail(const BnbFileTail& tail) {
  std::array<std::uint8_t, kBnbFileTailSize> t{};
  t[0] = static_cast<std::uint8_t>(static_cast<int>(tail.kind) | (tail.fp4 ? 8 : 0) |
                                   (tail.nested ? 16 : 0) | (tail.dtype << 5) |
                                   (tail.extra_tensor ? 128 : 0));
  t[1] = static_cast<std::uint8_t>((tail.blocksize_log2 - 5) | ((tail.nested_blocksize_log2 - 5) << 3) |
                                   (tail.storage << 6));
  t[2] = static_cast<std::uint8_t>((tail.rank - 1) | (tail.packed_layout << 2) | (tail.order << 4) |
                                   (tail.shape_key << 6));
  t[3] = tail.dim_a;
  t[4] = tail.dim_b;
  t[5] = static_cast<std::uint8_t>(tail.magnitude_exponent + 30);
  // The raw flag is 0xF in the low nibble; a non-raw tail keeps it at 0.
  t[6] = static_cast<std::uint8_t>((tail.raw ? 0x0F : 0) | (tail.zero_dim ? 0x10 : 0) |
                                   (tail.quant_map << 5) | (tail.weight_format ? 0x80 : 0));
  t[7] = static_cast<std::uint8_t>(tail.module & 3);
  for (int i = 0; i < 4; ++i) t[8 + i] = static_cast<std::uint8_t>(tail.seed >> (8 * i));
  return t;
}

// ---- BnbOpWriter -----------------------------------------------------------------------

BnbOpWriter& BnbOpWriter::DropKey(std::string_view key) {
  Op(BnbOp::kDropKey); U8(BnbKeyIndex(key));
  return *this;
}
BnbOpWriter& BnbOpWriter::SetKey(std::string_view key, std::string_view json_value) {
  Op(BnbOp::kSetKey); U8(BnbKeyIndex(key)); U8(BnbJsonValueIndex(json_value));
  return *this;
}
BnbOpWriter& BnbOpWriter::NumberDelta(std::string_view key, std::int8_t delta) {
  Op(BnbOp::kNumberDelta); U8(BnbKeyIndex(key)); U8(static_cast<std::uint8_t>(delta));
  return *this;
}
BnbOpWriter& BnbOpWriter::ShapeEdit(std::uint8_t mode, std::uint8_t index, std::uint8_t value) {
  Op(BnbOp::kShapeEdit); U8(mode); U8(index); U8(value);
  return *this;
}
BnbOpWriter& BnbOpWriter::StateSplice(std::string_view token, std::uint16_t position,
                                      std::uint8_t removed) {
  Op(BnbOp::kStateSplice); U8(BnbTokenIndex(token)); U16(position); U8(removed);
  return *this;
}
BnbOpWriter& BnbOpWriter::DropTensor(BnbRole role) {
  Op(BnbOp::kDropTensor); U8(static_cast<std::uint8_t>(role));
  return *this;
}
BnbOpWriter& BnbOpWriter::TensorDtype(BnbRole role, std::string_view dtype, bool refit) {
  Op(BnbOp::kTensorDtype); U8(static_cast<std::uint8_t>(role)); U8(BnbDtypeIndex(dtype));
  U8(refit ? 1 : 0);
  return *this;
}
BnbOpWriter& BnbOpWriter::Resize(BnbRole role, std::int8_t delta) {
  Op(BnbOp::kResize); U8(static_cast<std::uint8_t>(role)); U8(static_cast<std::uint8_t>(delta));
  return *this;
}
BnbOpWriter& BnbOpWriter::TensorShape(BnbRole role, std::uint8_t mode) {
  Op(BnbOp::kTensorShape); U8(static_cast<std::uint8_t>(role)); U8(mode);
  return *this;
}
BnbOpWriter& BnbOpWriter::SetFloat(BnbRole role, std::uint16_t element, std::uint32_t special_bits) {
  Op(BnbOp::kSetFloat); U8(static_cast<std::uint8_t>(role)); U16(element);
  U8(BnbFloatSpecialIndex(special_bits));
  return *this;
}
BnbOpWriter& BnbOpWriter::SetByte(BnbRole role, std::uint16_t position, std::uint8_t value) {
  Op(BnbOp::kSetByte); U8(static_cast<std::uint8_t>(role)); U16(position); U8(value);
  return *this;
}
BnbOpWriter& BnbOpWriter::AddTensor(BnbAdd what) {
  Op(BnbOp::kAddTensor); U8(static_cast<std::uint8_t>(what));
  return *this;
}
BnbOpWriter& BnbOpWriter::Rename(BnbRole role, std::uint8_t variant) {
  Op(BnbOp::kRename); U8(static_cast<std::uint8_t>(role)); U8(variant);
  return *this;
}
BnbOpWriter& BnbOpWriter::Swap(std::uint8_t a, std::uint8_t b) {
  Op(BnbOp::kSwap); U8(a); U8(b);
  return *this;
}
BnbOpWriter& BnbOpWriter::HeaderByte(std::uint16_t position, std::uint8_t value) {
  Op(BnbOp::kHeaderByte); U16(position); U8(value);
  return *this;
}
BnbOpWriter& BnbOpWriter::DataByte(std::uint16_t position, std::uint8_t value) {
  Op(BnbOp::kDataByte); U16(position); U8(value);
  return *this;
}
BnbOpWriter& BnbOpWriter::Truncate(std::uint16_t count) {
  Op(BnbOp::kTruncate); U16(count);
  return *this;
}
BnbOpWriter& BnbOpWriter::LengthDelta(std::int8_t delta) {
  Op(BnbOp::kLengthPrefix); U8(0); U8(static_cast<std::uint8_t>(delta));
  return *this;
}
BnbOpWriter& BnbOpWriter::HeaderSplice(std::string_view token, std::uint16_t position,
                                       std::uint8_t removed) {
  Op(BnbOp::kHeaderSplice); U8(BnbTokenIndex(token)); U16(position); U8(removed);
  return *this;
}
BnbOpWriter& BnbOpWriter::FlipBit(std::uint32_t bit) {
  Op(BnbOp::kFlipBit);
  U32(bit);
  return *this;
}
std::vector<std::uint8_t> BnbOpWriter::Finish(const BnbFileTail& tail) const {
  return out_.Finish(EncodeBnbFileTail(tail));
}

std::vector<std::uint8_t> BnbFileFromInput(const std::uint8_t* data, std::size_t size) {
  if (size < kBnbFileTailSize) return std::vector<std::uint8_t>(data, data + size);
  const std::size_t body = size - kBnbFileTailSize;
  const BnbFileTail tail = DecodeBnbFileTail(data + body);
  if (tail.raw) return std::vector<std::uint8_t>(data, data + body);

  Draft draft = BuildDraft(tail);
  InputReader in(data, body);
  const std::vector<ParsedOp> ops = ParseOps(in);
  for (const ParsedOp& p : ops) {
    if (!IsFileOp(p.op)) ApplyDraftOp(p, &draft);
  }
  std::vector<std::uint8_t> file;
  try {
    file = Write(draft, true);
  } catch (const std::exception&) {
    // nlohmann refuses to write a header string that is not UTF-8 (a
    // blockwise8 state text after a byte splice): write it unspliced.
    try {
      file = Write(draft, false);
    } catch (const std::exception&) {
      file.clear();
    }
  }
  std::size_t header_length = static_cast<std::size_t>(ReadPrefix(file));
  for (const ParsedOp& p : ops) {
    if (IsFileOp(p.op)) ApplyFileOp(p, &file, &header_length);
  }
  return file;
}

}  // namespace qd::fuzz
