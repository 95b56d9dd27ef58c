// pt_file_input.cc: builds the file a pt_file_diff input stands for.
#include "fuzz/common/pt_file_input.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "codecs/float16.h"
#include "generators/generators.h"

namespace qd::fuzz {

using namespace std::string_view_literals;

// Opcodes and short sequences of data.pkl: the subset, its operands at
// their edges, allowed and hostile globals, and opcodes outside the subset.
const std::vector<std::string_view> kPtPickleTokens = {
    "(", ")", "]", "}", "t", "\x85", "\x86", "\x87", "N", "\x88", "\x89", "R", "b", "Q", "s", "u",
    "a", "e", ".", "\x94", "\x93",
    "K\x00"sv, "K\xff", "M\xff\xff", "J\xff\xff\xff\xff", "J\x00\x00\x00\x80"sv,
    "\x8a\x00"sv, "\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f", "\x8a\x09", "\x8a\xff",
    "G\x7f\xf8\x00\x00\x00\x00\x00\x00"sv, "G\x80\x00\x00\x00\x00\x00\x00\x00"sv,
    "X\x00\x00\x00\x00"sv, "X\x01\x00\x00\x00" "a"sv, "X\x01\x00\x10\x00"sv, "X\xff\xff\xff\xff",
    "\x8c\x00"sv, "\x8c\x07storage", "\x8c\x01\xff", "\x8d\x00\x00\x00\x00\x00\x00\x00\x00"sv,
    "\x8d\x01\x00\x10\x00\x00\x00\x00\x00"sv, "X\x02\x00\x00\x00\xed\xa0"sv,
    "q\x00"sv, "q\xff", "r\xff\xff\xff\x7f", "h\x00"sv, "h\x01", "h\x02", "h\x03", "h\xff",
    "j\x00\x00\x00\x00"sv, "j\xff\xff\xff\xff",
    "\x80\x02", "\x80\x04", "\x80\x01", "\x80\x06", "\x95\x00\x00\x00\x00\x00\x00\x00\x00"sv,
    "\x95\xff\xff\xff\xff\xff\xff\xff\xff",
    "ccollections\nOrderedDict\n", "ctorch._utils\n_rebuild_tensor_v2\n",
    "ctorch._utils\n_rebuild_parameter\n", "ctorch\nSize\n", "ctorch\nFloatStorage\n",
    "ctorch\nHalfStorage\n", "ctorch\nBoolStorage\n", "ctorch\nfloat16\n", "ctorch\nbool\n",
    "cposix\nsystem\n", "c__builtin__\neval\n", "cbuiltins\ngetattr\n",
    "ctorch._utils\n_rebuild_tensor\n", "ctorch._utils\n_rebuild_tensor_v3\n",
    "ctorch\nUntypedStorage\n", "ccollections\nCounter\n", "ctorch\nSize",
    "c\n\n", "ctorch\x01\nSize\n",
    "\x8c\x05torch\x8c\x04Size\x93", "\x8c\x05posix\x8c\x06system\x93",
    "\x81", "\x92", "itorch\nSize\n", "o", "\x82\x01", "\x83\x01\x00"sv, "\x84\x01\x00\x00\x00"sv,
    "0", "1", "2", "P", "S", "B", "C", "I", "L", "F", "V", "p", "g", "d", "l", "U", "T", "\x8f",
    "\x90", "\x91", "\x96", "\x97", "\x98", "\xff", "\x00"sv,
    // a persistent ID, a tensor call, an empty OrderedDict
    "(\x8c\x07storage\x8c\x05torch\x8c\x0c""FloatStorage\x93\x8c\x01" "0\x8c\x03" "cpuK\x01tQ",
    "ccollections\nOrderedDict\n)R",
    "K\x00\x85K\x01\x85\x89" "ccollections\nOrderedDict\n)Rt"sv,
    "(((((((((((((((((((((((((((((((((",
    // dtype and storage tokens a QuantState list holds (docs/pt.md 7.3)
    "ctorch\nfloat32\n", "ctorch\nbfloat16\n", "ctorch\nfloat64\n", "ctorch\nint8\n", "ctorch\nuint8\n",
    "ctorch\nByteStorage\n",
};

// Record names (without P/) the draft ops rename to or add.
const std::vector<std::string_view> kPtRecordNames = {
    "data.pkl", "version", ".data/version", "byteorder", "data/0", "data/1", "data/2", "data/7",
    "data/a_b", "data/0/x", "data/", ".data/serialization_id", ".format_version",
    ".storage_alignment", "extra", "../x", "data/../0", "data//0", "constants.pkl", "data/0.5",
    "Data.pkl", "data.pkl/", "\\data.pkl", "version\n",
};

const std::vector<std::string_view> kPtRecordTexts = {
    "", "3", "3\n", "2\n", "4", "03", "3\n\n", "x", "little", "big", "Little", "little\n",
    "99999999999999999999", "123456789012345678901", "18446744073709551619", "-3", " 3",
    "\x80\x02}.", "\x80\x02]." , "\x00\x00\x80\x3f"sv, "1", "64",
};

const std::vector<std::string_view> kPtPrefixes = {
    "archive", "a", "model", "", ".", "..", "a/b", "x\\y", "\xc3\xa9", "P", "data", "data.pkl",
};

// Values the layer ops write: signed zeros, subnormal and normal extremes of
// binary32, max + half an ulp (2^128 - 2^103, which rounds to infinity),
// infinities and NaNs, powers of two around the blocksizes.
const std::vector<double> kPtBnbFloats = {
    0.0, -0.0, 1.0, -1.0, 0.5, 0.1, 1e-45, 1.1754943508222875e-38, 3.4028234663852886e38,
    std::ldexp(1.0, 128) - std::ldexp(1.0, 103), 65504.0, 256.0, 4096.0, 1e300,
    std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
    std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN(),
};

const std::vector<std::string_view> kPtBnbTexts = {
    "nf4", "fp4", "int4", "", "NF4", "float16", "bfloat16", "float32", "None", "quant_state",
};

// The allow-listed torch globals of docs/pt.md 4.3 a list item can be.
const std::vector<std::string_view> kPtBnbTokens = {
    "float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
    "FloatStorage", "HalfStorage", "ByteStorage", "Size",
};

const std::vector<std::string_view> kPtDtypeCodes = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"};

// Where a second state for one W comes from (docs/pt.md 7.2, docs/bnb.md "Layers").
const std::vector<std::string_view> kPtBnbNames = {
    "W", "W.quant_state", "W.quant_state.bitsandbytes__nf4", "W.quant_state.bitsandbytes__fp4",
    "W.absmax", "W.quant_map", "W.nested_absmax", "W.nested_quant_map", "M.weight_quant_state",
    "M.weight_absmax", "M.SCB", "M.weight_scb", "M.weight_format", "W.quant_state.x",
    "W.quant_state.bitsandbytes__", "M",
};

namespace {

using Bytes = std::vector<std::uint8_t>;

std::uint8_t IndexIn(const std::vector<std::string_view>& list, std::string_view s) {
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (list[i] == s) return static_cast<std::uint8_t>(i);
  }
  return 0;
}

std::uint64_t Read(const Bytes& f, std::uint64_t at, int width) {
  std::uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | (at + i < f.size() ? f[at + i] : 0);
  return v;
}

void Write(Bytes* f, std::uint64_t at, int width, std::uint64_t v) {
  for (int i = 0; i < width; ++i) {
    if (at + i < f->size()) (*f)[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
}

// A field's new value from its old one: c selects how, d is the argument.
std::uint64_t FieldValue(std::uint64_t old, int width, std::uint8_t c, std::uint8_t d) {
  const std::uint64_t all = width == 8 ? ~0ull : (1ull << (8 * width)) - 1;
  switch (c % 8) {
    case 0: return d;
    case 1: return (old + static_cast<std::int8_t>(d)) & all;
    case 2: return all;           // saturated
    case 3: return all - d;
    case 4: return old ^ (1ull << (d % (8 * width)));
    case 5: return 0;
    case 6: return (old << (d % 8)) & all;
    default: return (0x0101010101010101ull * d) & all;
  }
}

struct Field {
  int offset;
  int width;
};
// Local header: signature, version, flags, method, time, date, CRC, sizes, name and extra lengths.
const Field kLocalFields[] = {{0, 4}, {4, 2}, {6, 2}, {8, 2}, {10, 2}, {12, 2}, {14, 4},
                              {18, 4}, {22, 4}, {26, 2}, {28, 2}, {30, 1}, {32, 2}, {34, 2}};
// Central entry: signature .. local header offset, and the first name byte.
const Field kCentralFields[] = {{0, 4},  {4, 2},  {6, 2},  {8, 2},  {10, 2}, {12, 2},
                                {14, 2}, {16, 4}, {20, 4}, {24, 4}, {28, 2}, {30, 2},
                                {32, 2}, {34, 2}, {36, 2}, {38, 4}, {42, 4}, {46, 1}};

void ApplyDraftOp(std::uint8_t op, std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d,
                  qd::gen::PtDraft* draft) {
  auto& records = draft->records;
  auto pickle = [&]() -> Bytes* {
    for (auto& r : records) {
      if (r.first == "data.pkl") return &r.second;
    }
    return nullptr;
  };
  // The opcode offsets are kept in step with edits (an insertion shifts the rest).
  auto& ops = draft->pickle_ops;
  auto op_range = [&](std::size_t k, const Bytes& p) {
    const std::size_t begin = std::min(ops[k], p.size());
    const std::size_t end = k + 1 < ops.size() ? std::min(ops[k + 1], p.size()) : p.size();
    return std::pair<std::size_t, std::size_t>(begin, std::max(begin, end));
  };
  switch (static_cast<PtOp>(op)) {
    case PtOp::kPickleByte: {
      Bytes* p = pickle();
      if (!p || ops.empty()) return;
      const auto [begin, end] = op_range((a | b << 8) % ops.size(), *p);
      if (end > begin) (*p)[begin + c % (end - begin)] = d;
      return;
    }
    case PtOp::kPickleInsert: {
      Bytes* p = pickle();
      if (!p) return;
      const std::string_view token = kPtPickleTokens[a % kPtPickleTokens.size()];
      const std::size_t k = ops.empty() ? 0 : (b | c << 8) % (ops.size() + 1);
      const std::size_t at = k < ops.size() ? std::min(ops[k], p->size()) : p->size();
      p->insert(p->begin() + static_cast<std::ptrdiff_t>(at), token.begin(), token.end());
      for (std::size_t i = k; i < ops.size(); ++i) ops[i] += token.size();
      ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(k), at);
      return;
    }
    case PtOp::kPickleDelete: {
      Bytes* p = pickle();
      if (!p || ops.empty()) return;
      const std::size_t k = (a | b << 8) % ops.size();
      const auto [begin, end] = op_range(k, *p);
      p->erase(p->begin() + static_cast<std::ptrdiff_t>(begin), p->begin() + static_cast<std::ptrdiff_t>(end));
      for (std::size_t i = k + 1; i < ops.size(); ++i) ops[i] -= end - begin;
      ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(k));
      return;
    }
    case PtOp::kPickleOperand: {
      Bytes* p = pickle();
      if (!p || ops.empty()) return;
      const auto [begin, end] = op_range((a | b << 8) % ops.size(), *p);
      if (end <= begin + 1) return;
      const int width = static_cast<int>(std::min<std::size_t>(8, end - begin - 1));
      Write(p, begin + 1, width, FieldValue(Read(*p, begin + 1, width), width, c, d));
      return;
    }
    case PtOp::kPickleTruncate: {
      Bytes* p = pickle();
      if (!p || p->empty()) return;
      p->resize((a | b << 8) % p->size());
      return;
    }
    case PtOp::kRecordByte: {
      if (records.empty()) return;
      Bytes& r = records[a % records.size()].second;
      if (!r.empty()) r[(b | c << 8) % r.size()] = d;
      return;
    }
    case PtOp::kRecordResize: {
      if (records.empty()) return;
      Bytes& r = records[a % records.size()].second;
      const int delta = static_cast<std::int8_t>(b);
      if (delta >= 0) {
        r.insert(r.end(), static_cast<std::size_t>(delta), c);
      } else {
        r.resize(r.size() > static_cast<std::size_t>(-delta) ? r.size() + delta : 0);
      }
      return;
    }
    case PtOp::kRecordRename:
      if (records.empty()) return;
      records[a % records.size()].first = std::string(kPtRecordNames[b % kPtRecordNames.size()]);
      return;
    case PtOp::kRecordDrop:
      if (records.empty()) return;
      records.erase(records.begin() + a % records.size());
      return;
    case PtOp::kRecordAdd: {
      const std::string_view text = kPtRecordTexts[b % kPtRecordTexts.size()];
      const std::size_t at = c % (records.size() + 1);
      records.insert(records.begin() + static_cast<std::ptrdiff_t>(at),
                     {std::string(kPtRecordNames[a % kPtRecordNames.size()]), Bytes(text.begin(), text.end())});
      return;
    }
    case PtOp::kRecordSwap:
      if (records.empty()) return;
      std::swap(records[a % records.size()], records[b % records.size()]);
      return;
    case PtOp::kStyle:
      draft->torch_style = a & 1;
      draft->zip64_end = (a & 2) != 0;
      if (a & 4) draft->prefix = std::string(kPtPrefixes[b % kPtPrefixes.size()]);
      return;
    default:
      return;
  }
}

void ApplyFileOp(std::uint8_t op, std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d,
                 const qd::gen::PtZipLayout& l, const qd::gen::PtDraft& draft, Bytes* f) {
  const std::size_t n = l.entries.size();
  switch (static_cast<PtOp>(op)) {
    case PtOp::kLocalField: {
      if (n == 0) return;
      const Field fl = kLocalFields[b % std::size(kLocalFields)];
      const std::uint64_t at = l.entries[a % n].local + fl.offset;
      Write(f, at, fl.width, FieldValue(Read(*f, at, fl.width), fl.width, c, d));
      return;
    }
    case PtOp::kCentralField: {
      if (n == 0) return;
      const Field fl = kCentralFields[b % std::size(kCentralFields)];
      const std::uint64_t at = l.entries[a % n].central + fl.offset;
      Write(f, at, fl.width, FieldValue(Read(*f, at, fl.width), fl.width, c, d));
      return;
    }
    case PtOp::kEndField: {
      // End record fields, then zip64 record fields, then locator fields.
      static const Field kEnd[] = {{0, 4}, {4, 2}, {6, 2}, {8, 2}, {10, 2}, {12, 4}, {16, 4}, {20, 2}};
      static const Field kZip64[] = {{0, 4}, {4, 8}, {12, 2}, {14, 2}, {16, 4}, {20, 4},
                                     {24, 8}, {32, 8}, {40, 8}, {48, 8}};
      static const Field kLocator[] = {{0, 4}, {4, 4}, {8, 8}, {16, 4}};
      const std::size_t total = std::size(kEnd) + (l.zip64 ? std::size(kZip64) + std::size(kLocator) : 0);
      std::size_t k = b % total;
      std::uint64_t base = l.eocd;
      Field fl{};
      if (k < std::size(kEnd)) {
        fl = kEnd[k];
      } else if ((k -= std::size(kEnd)) < std::size(kZip64)) {
        fl = kZip64[k];
        base = l.zip64_record;
      } else {
        fl = kLocator[k - std::size(kZip64)];
        base = l.locator;
      }
      Write(f, base + fl.offset, fl.width, FieldValue(Read(*f, base + fl.offset, fl.width), fl.width, c, d));
      return;
    }
    case PtOp::kDescriptor: {
      if (n == 0) return;
      const std::size_t e = a % n;
      if (!draft.torch_style || l.entries[e].end < 16) return;
      const std::uint64_t at = l.entries[e].end - 16 + 4 * (b % 4);
      Write(f, at, 4, FieldValue(Read(*f, at, 4), 4, c, d));
      return;
    }
    case PtOp::kFileByte:
      if (!f->empty()) (*f)[(a | b << 8 | c << 16) % f->size()] = d;
      return;
    case PtOp::kTruncate:
      f->resize(f->size() - (a | b << 8) % (f->size() + 1));
      return;
    case PtOp::kAppend:
      f->insert(f->end(), a % 64, d);
      return;
    case PtOp::kFixCrc: {
      if (n == 0) return;
      const std::size_t e = a % n;
      const auto& le = l.entries[e];
      const std::uint64_t size = Read(*f, le.central + 24, 4);
      if (le.data_start > f->size() || size > f->size() - le.data_start) return;
      const std::uint32_t crc = qd::gen::PtCrc32(f->data() + le.data_start, size);
      Write(f, le.central + 16, 4, crc);
      if (draft.torch_style && le.end >= 12) {
        Write(f, le.end - 12, 4, crc);
      } else {
        Write(f, le.local + 14, 4, crc);
      }
      return;
    }
    default:
      return;
  }
}

// ---- the tail's bitsandbytes layer -------------------------------------------------------

using gen::PtObject;

// The layer the tail asks for, flat names (nesting comes last), with its own
// generator so that the random content around it is the file it is without it.
gen::PtStateDict BuildLayer(const PtFileTail& tail) {
  gen::PtStateDict dict;
  if (tail.bnb == PtBnbKind::kNone) return dict;
  qd::gen::Rng rng(tail.seed ^ 0x9e3779b97f4a7c15ull);
  if (tail.bnb == PtBnbKind::kMix) return gen::RandomPtBnbLayers(rng);
  if (tail.bnb == PtBnbKind::kInt8Hf || tail.bnb == PtBnbKind::kInt8GptqModel) {
    gen::PtPutTensors(&dict, gen::BnbInt8Tensors("model.layers.0.mlp.up_proj",
                                                 tail.bnb == PtBnbKind::kInt8GptqModel, rng));
  } else {
    const int nested = tail.bnb == PtBnbKind::kListFlat ? 0 : tail.bnb == PtBnbKind::kListNested ? 1 : -1;
    const gen::Bnb4bitLayer layer = gen::RandomBnb4bitLayer(rng, nested);
    const char* const storages[] = {"U8", "F16", "BF16", "F32"};
    std::string storage = storages[tail.storage & 3];
    if (layer.q.packed.size() % gen::PtItemSize(storage) != 0) storage = "U8";
    if (nested >= 0) {
      gen::BnbListOptions o;
      o.tuple = tail.list_tuple;
      o.shape_as = tail.shape_as;
      o.with_table = !tail.no_table;
      o.offset_as_float = tail.offset_float;
      o.pair_tuple = o.state2_tuple = tail.inner_tuples;
      o.w_storage = storage;
      o.w_flat = tail.w_flat;
      gen::PtPutBnbListLayer(&dict, layer, o);
    } else {
      gen::PtPutTensors(&dict, gen::Bnb4bitTensors(layer, tail.bnb == PtBnbKind::kGptqModel4bit, storage));
    }
  }
  // W (the first entry of every layout above) gets the tail's layout.
  if (!dict.empty() && dict[0].second.kind == PtObject::Kind::kTensor) {
    dict[0].second.tensor.layout = static_cast<gen::PtTensorData::Layout>(tail.layout & 3);
  }
  return dict;
}

// A value of the layer, where it is: depth-first over every entry's value.
struct Node {
  PtObject* value;
  PtObject* parent;   // null for an entry's value
  std::size_t index;  // in the parent's items / entries, or the entry's index
};

void Walk(PtObject* v, PtObject* parent, std::size_t index, std::vector<Node>* out) {
  out->push_back({v, parent, index});
  for (std::size_t i = 0; i < v->items.size(); ++i) Walk(&v->items[i], v, i, out);
  for (std::size_t i = 0; i < v->entries.size(); ++i) Walk(&v->entries[i].second, v, i, out);
}

std::vector<Node> Nodes(gen::PtStateDict* dict) {
  std::vector<Node> out;
  for (std::size_t e = 0; e < dict->size(); ++e) Walk(&(*dict)[e].second, nullptr, e, &out);
  return out;
}

bool IsSequence(const PtObject& o) {
  return o.kind == PtObject::Kind::kList || o.kind == PtObject::Kind::kTuple || o.kind == PtObject::Kind::kSize;
}

PtObject MakeValue(std::uint8_t kind, std::uint8_t x, std::uint8_t y, const std::vector<Node>& nodes) {
  switch (static_cast<PtBnbValue>(kind % static_cast<int>(PtBnbValue::kCount))) {
    case PtBnbValue::kNone: return PtObject::None();
    case PtBnbValue::kTrue: return PtObject::Bool(true);
    case PtBnbValue::kFalse: return PtObject::Bool(false);
    case PtBnbValue::kInt: return PtObject::Int(x | y << 8);
    case PtBnbValue::kNegative: return PtObject::Int(-1 - static_cast<std::int64_t>(x));
    case PtBnbValue::kPower: return PtObject::Int(static_cast<std::int64_t>(1) << (x % 63));
    case PtBnbValue::kFloat: return PtObject::Float(kPtBnbFloats[x % kPtBnbFloats.size()]);
    case PtBnbValue::kText: return PtObject::Str(std::string(kPtBnbTexts[x % kPtBnbTexts.size()]));
    case PtBnbValue::kToken: return PtObject::Token(std::string(kPtBnbTokens[x % kPtBnbTokens.size()]));
    case PtBnbValue::kEmptyList: return PtObject::List({});
    case PtBnbValue::kEmptyTuple: return PtObject::Tuple({});
    case PtBnbValue::kSize: return PtObject::Size({x, y});
    case PtBnbValue::kDict: return PtObject::Dict();
    case PtBnbValue::kScalar: {
      gen::PtTensorData t;
      const float f = static_cast<float>(kPtBnbFloats[x % kPtBnbFloats.size()]);
      t.bytes.resize(4);
      std::memcpy(t.bytes.data(), &f, 4);
      return PtObject::Tensor(std::move(t));
    }
    case PtBnbValue::kZeros: {
      gen::PtTensorData t;
      t.dtype = std::string(kPtDtypeCodes[x % kPtDtypeCodes.size()]);
      t.shape = {y};
      t.bytes.assign(y * gen::PtItemSize(t.dtype), 0);
      return PtObject::Tensor(std::move(t));
    }
    default:
      if (nodes.empty()) return PtObject::None();
      return *nodes[(x | y << 8) % nodes.size()].value;
  }
}

void SetElement(gen::PtTensorData* t, std::uint64_t i, double v) {
  std::uint64_t bits = 0;
  const std::uint64_t isz = gen::PtItemSize(t->dtype);
  const float f = static_cast<float>(v);
  if (t->dtype == "F64") {
    bits = std::bit_cast<std::uint64_t>(v);
  } else if (t->dtype == "F32") {
    bits = std::bit_cast<std::uint32_t>(f);
  } else if (t->dtype == "F16") {
    bits = codec::F32ToF16(f);
  } else if (t->dtype == "BF16") {
    bits = std::bit_cast<std::uint32_t>(f) >> 16;
  } else {
    bits = static_cast<std::uint64_t>(static_cast<std::int64_t>(std::isfinite(v) ? std::fmod(v, 256.0) : 0.0));
  }
  for (std::uint64_t k = 0; k < isz; ++k) t->bytes[i * isz + k] = static_cast<std::uint8_t>(bits >> (8 * k));
}

void ApplyLayerOp(std::uint8_t op, std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d,
                  gen::PtStateDict* dict) {
  switch (static_cast<PtOp>(op)) {
    case PtOp::kBnbValue: {
      const std::vector<Node> nodes = Nodes(dict);
      if (nodes.empty()) return;
      PtObject v = MakeValue(b, c, d, nodes);
      *nodes[a % nodes.size()].value = std::move(v);
      return;
    }
    case PtOp::kBnbDelete: {
      const std::vector<Node> nodes = Nodes(dict);
      if (nodes.empty()) return;
      const Node& n = nodes[a % nodes.size()];
      if (n.parent == nullptr) {
        dict->erase(dict->begin() + static_cast<std::ptrdiff_t>(n.index));
      } else if (IsSequence(*n.parent)) {
        n.parent->items.erase(n.parent->items.begin() + static_cast<std::ptrdiff_t>(n.index));
      } else {
        n.parent->entries.erase(n.parent->entries.begin() + static_cast<std::ptrdiff_t>(n.index));
      }
      return;
    }
    case PtOp::kBnbInsert: {
      const std::vector<Node> nodes = Nodes(dict);
      if (nodes.empty()) return;
      const Node& n = nodes[a % nodes.size()];
      PtObject* target = IsSequence(*n.value) || n.value->kind == PtObject::Kind::kDict ? n.value : n.parent;
      if (target == nullptr) return;
      PtObject v = MakeValue(b, c, 0, nodes);
      if (target->kind == PtObject::Kind::kDict) {
        target->entries.emplace_back("k" + std::to_string(d), std::move(v));
      } else {
        target->items.insert(target->items.begin() + static_cast<std::ptrdiff_t>(d % (target->items.size() + 1)),
                             std::move(v));
      }
      return;
    }
    case PtOp::kBnbTensorByte: {
      const std::vector<gen::PtTensorData*> tensors = gen::PtTensorsIn(dict);
      if (tensors.empty()) return;
      std::vector<std::uint8_t>& bytes = tensors[a % tensors.size()]->bytes;
      if (!bytes.empty()) bytes[(b | c << 8) % bytes.size()] = d;
      return;
    }
    case PtOp::kBnbTensorFloat: {
      const std::vector<gen::PtTensorData*> tensors = gen::PtTensorsIn(dict);
      if (tensors.empty()) return;
      gen::PtTensorData* t = tensors[a % tensors.size()];
      const std::uint64_t count = t->bytes.size() / gen::PtItemSize(t->dtype);
      if (count > 0) SetElement(t, (b | c << 8) % count, kPtBnbFloats[d % kPtBnbFloats.size()]);
      return;
    }
    case PtOp::kBnbTensorShape: {
      const std::vector<gen::PtTensorData*> tensors = gen::PtTensorsIn(dict);
      if (tensors.empty()) return;
      gen::PtTensorData* t = tensors[a % tensors.size()];
      std::uint64_t isz = gen::PtItemSize(t->dtype);
      std::uint64_t count = t->bytes.size() / isz;
      switch (b % 6) {
        case 0: t->bytes.resize((++count) * isz, 0); t->shape = {count}; break;
        case 1: if (count > 0) t->bytes.resize((--count) * isz); t->shape = {count}; break;
        case 2:
          t->dtype = std::string(kPtDtypeCodes[c % kPtDtypeCodes.size()]);
          isz = gen::PtItemSize(t->dtype);
          t->bytes.resize(t->bytes.size() / isz * isz);
          t->shape = {t->bytes.size() / isz};
          break;
        case 3: t->layout = static_cast<gen::PtTensorData::Layout>(c % 4); break;
        case 4: t->shape = {count}; break;
        default:
          if (c % 3 == 0) {
            t->shape = {1, count};
          } else if (c % 3 == 1) {
            t->shape = {count, 1};
          } else {
            t->shape = count == 1 ? std::vector<std::uint64_t>{} : std::vector<std::uint64_t>{count};
          }
      }
      return;
    }
    case PtOp::kBnbRename: {
      if (dict->empty()) return;
      // W: the first tensor entry named *.weight (else the first entry); M: W without ".weight".
      std::string w = (*dict)[0].first;
      for (const auto& [name, v] : *dict) {
        if (v.kind == PtObject::Kind::kTensor && name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0) {
          w = name;
          break;
        }
      }
      const std::string m = w.size() > 7 && w.compare(w.size() - 7, 7, ".weight") == 0 ? w.substr(0, w.size() - 7) : w;
      const std::string_view rule = kPtBnbNames[b % kPtBnbNames.size()];
      const std::string name = (rule[0] == 'W' ? w : m) + std::string(rule.substr(1));
      const std::size_t e = a % dict->size();
      if (c & 1) {
        dict->emplace_back(name, (*dict)[e].second);
      } else {
        (*dict)[e].first = name;
      }
      return;
    }
    default:
      return;
  }
}

bool IsLayerOp(std::uint8_t op) { return op >= static_cast<int>(PtOp::kBnbValue) && op < static_cast<int>(PtOp::kCount); }
bool IsFileOp(std::uint8_t op) {
  return op >= static_cast<int>(PtOp::kLocalField) && op <= static_cast<int>(PtOp::kFixCrc);
}

// The layer a tail stands for, before any op, and the item at entry / path in it.
PtObject* Find(gen::PtStateDict* dict, std::size_t entry, const std::vector<std::size_t>& path) {
  if (entry >= dict->size()) return nullptr;
  PtObject* v = &(*dict)[entry].second;
  for (std::size_t i : path) {
    if (i < v->items.size()) {
      v = &v->items[i];
    } else if (i < v->entries.size()) {
      v = &v->entries[i].second;
    } else {
      return nullptr;
    }
  }
  return v;
}

}  // namespace

PtFileTail DecodePtFileTail(const std::uint8_t* t) {
  PtFileTail tail;
  tail.raw = (t[0] & 0x0F) == 0x0F;
  const int protocols[] = {0, 2, 4, 5};
  tail.protocol = protocols[(t[0] >> 4) & 3];
  tail.copies = (t[0] & 0x40) != 0;
  tail.allow_big = (t[0] & 0x80) != 0;
  tail.items = 1 + t[1] % 8;
  tail.bnb = static_cast<PtBnbKind>(t[2] & 7);
  tail.list_tuple = (t[2] & 0x08) != 0;
  tail.shape_as = (t[2] >> 4) & 3;
  if (tail.shape_as == 3) tail.shape_as = 0;
  tail.no_table = (t[2] & 0x40) != 0;
  tail.offset_float = (t[2] & 0x80) != 0;
  tail.storage = t[3] & 3;
  tail.w_flat = (t[3] & 0x04) != 0;
  tail.layout = (t[3] >> 3) & 3;
  tail.nest = (t[3] >> 5) & 3;
  tail.inner_tuples = (t[3] & 0x80) != 0;
  tail.seed = static_cast<std::uint32_t>(t[4] | t[5] << 8 | t[6] << 16 | static_cast<std::uint32_t>(t[7]) << 24);
  return tail;
}

std::array<std::uint8_t, kPtFileTailSize> EncodePtFileTail(const PtFileTail& tail) {
  std::array<std::uint8_t, kPtFileTailSize> t{};
  const int p = tail.protocol == 2 ? 1 : tail.protocol == 4 ? 2 : tail.protocol == 5 ? 3 : 0;
  t[0] = static_cast<std::uint8_t>((tail.raw ? 0x0F : 0) | p << 4 | (tail.copies ? 0x40 : 0) |
                                   (tail.allow_big ? 0x80 : 0));
  t[1] = static_cast<std::uint8_t>((tail.items - 1) & 7);
  t[2] = static_cast<std::uint8_t>((static_cast<int>(tail.bnb) & 7) | (tail.list_tuple ? 0x08 : 0) |
                                   (tail.shape_as & 3) << 4 | (tail.no_table ? 0x40 : 0) |
                                   (tail.offset_float ? 0x80 : 0));
  t[3] = static_cast<std::uint8_t>((tail.storage & 3) | (tail.w_flat ? 0x04 : 0) | (tail.layout & 3) << 3 |
                                   (tail.nest & 3) << 5 | (tail.inner_tuples ? 0x80 : 0));
  for (int i = 0; i < 4; ++i) t[4 + i] = static_cast<std::uint8_t>(tail.seed >> (8 * i));
  return t;
}

std::uint8_t PtTokenIndex(std::string_view token) { return IndexIn(kPtPickleTokens, token); }
std::uint8_t PtRecordNameIndex(std::string_view name) { return IndexIn(kPtRecordNames, name); }
std::uint8_t PtBnbTextIndex(std::string_view text) { return IndexIn(kPtBnbTexts, text); }
std::uint8_t PtBnbTokenIndex(std::string_view name) { return IndexIn(kPtBnbTokens, name); }
std::uint8_t PtBnbNameIndex(std::string_view name) { return IndexIn(kPtBnbNames, name); }

std::uint8_t PtBnbFloatIndex(double value) {
  for (std::size_t i = 0; i < kPtBnbFloats.size(); ++i) {
    if (std::bit_cast<std::uint64_t>(kPtBnbFloats[i]) == std::bit_cast<std::uint64_t>(value)) {
      return static_cast<std::uint8_t>(i);
    }
  }
  return 0;
}

std::uint8_t PtBnbNode(const PtFileTail& tail, std::size_t entry, const std::vector<std::size_t>& path) {
  gen::PtStateDict dict = BuildLayer(tail);
  const PtObject* target = Find(&dict, entry, path);
  const std::vector<Node> nodes = Nodes(&dict);
  for (std::size_t i = 0; i < nodes.size() && i < 255; ++i) {
    if (nodes[i].value == target) return static_cast<std::uint8_t>(i);
  }
  return 255;
}

std::uint8_t PtBnbTensor(const PtFileTail& tail, std::size_t entry, const std::vector<std::size_t>& path) {
  gen::PtStateDict dict = BuildLayer(tail);
  const PtObject* target = Find(&dict, entry, path);
  const std::vector<gen::PtTensorData*> tensors = gen::PtTensorsIn(&dict);
  for (std::size_t i = 0; i < tensors.size() && i < 255; ++i) {
    if (target != nullptr && tensors[i] == &target->tensor) return static_cast<std::uint8_t>(i);
  }
  return 255;
}

PtOpWriter& PtOpWriter::Op(PtOp op, std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
  out_.Record(static_cast<std::uint8_t>(op), a, b, c, d);
  return *this;
}

PtOpWriter& PtOpWriter::InsertToken(std::uint8_t token, std::uint16_t before_opcode) {
  return Op(PtOp::kPickleInsert, token, static_cast<std::uint8_t>(before_opcode & 0xff),
            static_cast<std::uint8_t>(before_opcode >> 8));
}

std::vector<std::uint8_t> PtOpWriter::Finish(const PtFileTail& tail) const {
  return out_.Finish(EncodePtFileTail(tail));
}

std::vector<std::uint8_t> PtRawInput(const std::vector<std::uint8_t>& file) {
  PtFileTail tail;
  tail.raw = true;
  std::vector<std::uint8_t> input = file;
  const auto t = EncodePtFileTail(tail);
  input.insert(input.end(), t.begin(), t.end());
  return input;
}

std::vector<std::uint8_t> PtFileFromInput(const std::uint8_t* data, std::size_t size) {
  if (size < kPtFileTailSize) return Bytes(data, data + size);
  const std::uint8_t* tail_bytes = data + size - kPtFileTailSize;
  const PtFileTail tail = DecodePtFileTail(tail_bytes);
  const std::size_t body = size - kPtFileTailSize;
  if (tail.raw) return Bytes(data, data + body);

  qd::gen::Rng rng(tail.seed);
  qd::gen::PtDraftOptions options;
  options.max_items = tail.items;
  options.copies = tail.copies;
  options.allow_big = tail.allow_big;
  options.protocol = tail.protocol;
  const std::size_t count = body / 5;
  if (tail.bnb != PtBnbKind::kNone) {
    gen::PtStateDict layer = BuildLayer(tail);
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint8_t* o = data + 5 * i;
      const std::uint8_t op = o[0] % static_cast<int>(PtOp::kCount);
      if (IsLayerOp(op)) ApplyLayerOp(op, o[1], o[2], o[3], o[4], &layer);
    }
    for (auto& [name, value] : layer) gen::PtPut(&options.extra, name, std::move(value), tail.nest);
  }
  qd::gen::PtDraft draft = qd::gen::PtRandomDraft(rng, options);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint8_t* o = data + 5 * i;
    const std::uint8_t op = o[0] % static_cast<int>(PtOp::kCount);
    if (!IsFileOp(op) && !IsLayerOp(op)) ApplyDraftOp(op, o[1], o[2], o[3], o[4], &draft);
  }
  qd::gen::PtZipLayout layout;
  Bytes file = qd::gen::PtWriteDraft(draft, &layout);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint8_t* o = data + 5 * i;
    const std::uint8_t op = o[0] % static_cast<int>(PtOp::kCount);
    if (IsFileOp(op)) ApplyFileOp(op, o[1], o[2], o[3], o[4], layout, draft, &file);
  }
  return file;
}

}  // namespace qd::fuzz
