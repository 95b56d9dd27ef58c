// pt_file_input.cc: builds the file a pt_file_diff input stands for.
#include "fuzz/common/pt_file_input.h"

#include <algorithm>
#include <utility>

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

}  // namespace

PtFileTail DecodePtFileTail(const std::uint8_t* t) {
  PtFileTail tail;
  tail.raw = (t[0] & 0x0F) == 0x0F;
  const int protocols[] = {0, 2, 4, 5};
  tail.protocol = protocols[(t[0] >> 4) & 3];
  tail.copies = (t[0] & 0x40) != 0;
  tail.allow_big = (t[0] & 0x80) != 0;
  tail.items = 1 + t[1] % 8;
  tail.seed = static_cast<std::uint32_t>(t[4] | t[5] << 8 | t[6] << 16 | static_cast<std::uint32_t>(t[7]) << 24);
  return tail;
}

std::array<std::uint8_t, kPtFileTailSize> EncodePtFileTail(const PtFileTail& tail) {
  std::array<std::uint8_t, kPtFileTailSize> t{};
  const int p = tail.protocol == 2 ? 1 : tail.protocol == 4 ? 2 : tail.protocol == 5 ? 3 : 0;
  t[0] = static_cast<std::uint8_t>((tail.raw ? 0x0F : 0) | p << 4 | (tail.copies ? 0x40 : 0) |
                                   (tail.allow_big ? 0x80 : 0));
  t[1] = static_cast<std::uint8_t>((tail.items - 1) & 7);
  for (int i = 0; i < 4; ++i) t[4 + i] = static_cast<std::uint8_t>(tail.seed >> (8 * i));
  return t;
}

std::uint8_t PtTokenIndex(std::string_view token) { return IndexIn(kPtPickleTokens, token); }
std::uint8_t PtRecordNameIndex(std::string_view name) { return IndexIn(kPtRecordNames, name); }

PtOpWriter& PtOpWriter::Op(PtOp op, std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
  out_.U8(static_cast<std::uint8_t>(op));
  out_.U8(a);
  out_.U8(b);
  out_.U8(c);
  out_.U8(d);
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

  qd::harness::Rng rng(tail.seed);
  qd::gen::PtDraftOptions options;
  options.max_items = tail.items;
  options.copies = tail.copies;
  options.allow_big = tail.allow_big;
  options.protocol = tail.protocol;
  qd::gen::PtDraft draft = qd::gen::PtRandomDraft(rng, options);
  const std::size_t count = body / 5;
  auto is_file_op = [](std::uint8_t op) { return op % static_cast<int>(PtOp::kCount) >= static_cast<int>(PtOp::kLocalField); };
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint8_t* o = data + 5 * i;
    const std::uint8_t op = o[0] % static_cast<int>(PtOp::kCount);
    if (!is_file_op(op)) ApplyDraftOp(op, o[1], o[2], o[3], o[4], &draft);
  }
  qd::gen::PtZipLayout layout;
  Bytes file = qd::gen::PtWriteDraft(draft, &layout);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint8_t* o = data + 5 * i;
    const std::uint8_t op = o[0] % static_cast<int>(PtOp::kCount);
    if (is_file_op(op)) ApplyFileOp(op, o[1], o[2], o[3], o[4], layout, draft, &file);
  }
  return file;
}

}  // namespace qd::fuzz
