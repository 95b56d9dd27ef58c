// pt_reader.h: the internal reader behind codecs/pt.h's ReadPt, shared by the
// units that implement it along docs/pt.md's sections: pt_zip.cc (section 2,
// the ZIP container and its records), pt_pickle.cc (section 4, the opcode
// walk of data.pkl through an opcode -> handler table, and 5.1) and
// pt_flatten.cc (section 6, the state dict). pt_views.cc (5.3) needs none of
// it. Not part of the codec's interface: include codecs/pt.h instead.
#ifndef QUANTDIFF_CODECS_PT_READER_H_
#define QUANTDIFF_CODECS_PT_READER_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "codecs/finding.h"
#include "codecs/pt.h"

namespace qd::codec::pt_internal {

using u64 = std::uint64_t;
using u128 = unsigned __int128;

// Section 4.4.
constexpr u64 kMaxMarks = 256;
constexpr u64 kMaxStack = 1048576;
constexpr u64 kMaxMemo = 1048576;
constexpr u64 kMaxString = 1048576;
constexpr u64 kMaxLong1 = 8;
constexpr u64 kMaxItems = 1048576;
constexpr u64 kMaxRank = 64;
constexpr u64 kMaxDepth = 64;
constexpr u64 kMaxVisits = 1048576;
constexpr u64 kMaxCreated = 2097152;  // values made by opcodes (4.4)

constexpr u64 kSat32 = 0xffffffffu;

inline u64 Rd16(const std::uint8_t* p) { return u64(p[0]) | (u64(p[1]) << 8); }
inline u64 Rd32(const std::uint8_t* p) {
  return u64(p[0]) | (u64(p[1]) << 8) | (u64(p[2]) << 16) | (u64(p[3]) << 24);
}
inline u64 Rd64(const std::uint8_t* p) { return Rd32(p) | (Rd32(p + 4) << 32); }

inline bool Add(u64 a, u64 b, u64* r) { return !__builtin_add_overflow(a, b, r); }

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF
// (entry names, 2.3; pickle strings, 4.2).
bool ValidUtf8(const std::uint8_t* p, u64 n);

// A record name data/<key> (2.5), without the archive prefix.
bool IsStorageRecordName(std::string_view r);

// One ZIP entry (section 2).
struct Entry {
  u64 central = 0;  // c
  u64 index = 0;    // position in the central directory
  std::string_view name;
  std::string_view record;  // name without "P/"
  u64 flags = 0, crc = 0, size = 0, h = 0;
  u64 ds = 0, de = 0, end = 0;
};

// A storage named by a persistent ID (4.5).
struct Storage {
  Dtype dtype;
  u64 numel;
  std::size_t entry;  // index into the entries
};

class Reader {
 public:
  Reader(qd::ByteView file, const std::string& file_name, PtResult* out)
      : d_(file.data), n_(file.size), file_name_(file_name), r_(*out) {}

  void Run();

 private:
  // An opcode's handler (section 4.1): the opcode byte is read, pos_ is at
  // its operand. False after a finding.
  using OpHandler = bool (Reader::*)(std::uint8_t op);
  using OpTable = std::array<OpHandler, 256>;
  static const OpTable& Opcodes();

  // Findings.
  void Error(const char* rule, const char* field, u64 offset, std::string message,
             std::string tensor = {}) {
    r_.findings.push_back(MakeFinding(rule, qd::Severity::kError, file_name_, std::move(tensor),
                                      field, static_cast<std::int64_t>(offset),
                                      std::move(message)));
    r_.refused = true;
  }
  void Warn(const char* rule, const char* field, u64 offset, std::string message) {
    r_.findings.push_back(MakeFinding(rule, qd::Severity::kWarning, file_name_, {}, field,
                                      static_cast<std::int64_t>(offset), std::move(message)));
  }

  // Section 2 (pt_zip.cc).
  bool ReadEnd();
  bool ReadCentral();
  bool ReadLocals();
  bool CheckRecords();
  // Section 4 (pt_pickle.cc).
  bool Walk();
  // Section 6 (pt_flatten.cc).
  bool Flatten(std::uint32_t dict, const std::string& prefix, u64 depth);
  bool WalkValue(std::uint32_t node, u64 depth);

  // Pickle helpers.
  std::uint32_t NewNode(PtKind kind) {
    r_.nodes.emplace_back();
    r_.nodes.back().kind = kind;
    return static_cast<std::uint32_t>(r_.nodes.size() - 1);
  }
  PtNode& N(std::uint32_t i) { return r_.nodes[i]; }
  u64 Avail() const { return stack_.size() - (marks_.empty() ? 0 : marks_.back()); }
  // Operand bytes left after pos_.
  bool Need(u64 k) const { return pk_size_ - pos_ >= k; }
  // made: the value is new (every push but BINGET's), counted against the
  // created-values budget after the stack limit (docs/pt.md 4.4).
  bool Push(std::uint32_t node, bool made = true) {
    if (stack_.size() >= kMaxStack) {
      Error("PT-012", "stack", op_at_, "more than 1048576 stack items");
      return false;
    }
    if (made && !CountMade()) return false;
    stack_.push_back(node);
    return true;
  }
  bool CountMade() {
    if (++made_ > kMaxCreated) {
      Error("PT-012", "container", op_at_, "more than 2097152 values created");
      return false;
    }
    return true;
  }
  bool PushGlobal(std::string_view module, std::string_view name);

  bool Malformed(const char* what) {
    Error("PT-013", "opcode", op_at_, what);
    return false;
  }
  bool IsEmptyDict(std::uint32_t i) {
    const PtNode& x = N(i);
    return x.kind == PtKind::kDict && x.items.empty() && x.attributes == kPtNoNode;
  }
  bool IsIntSeq(std::uint32_t i) {
    const PtNode& x = N(i);
    if (x.kind != PtKind::kTuple && x.kind != PtKind::kSize) return false;
    for (std::uint32_t k : x.items) {
      if (N(k).kind != PtKind::kInt) return false;
    }
    return true;
  }
  bool SetItem(std::uint32_t dict, std::uint32_t key, std::uint32_t value);
  bool Reduce();
  bool RebuildTensor(std::uint32_t args, std::uint32_t* out);
  bool PersistentId();

  // The opcode handlers (pt_pickle.cc).
  bool OpProto(std::uint8_t op);
  bool OpFrame(std::uint8_t op);
  bool OpMark(std::uint8_t op);
  bool OpEmpty(std::uint8_t op);
  bool OpTuple(std::uint8_t op);
  bool OpTupleN(std::uint8_t op);
  bool OpSingleton(std::uint8_t op);
  bool OpBinInt(std::uint8_t op);
  bool OpLong1(std::uint8_t op);
  bool OpBinFloat(std::uint8_t op);
  bool OpUnicode(std::uint8_t op);
  bool OpPut(std::uint8_t op);
  bool OpGet(std::uint8_t op);
  bool OpGlobal(std::uint8_t op);
  bool OpStackGlobal(std::uint8_t op);
  bool OpReduce(std::uint8_t op);
  bool OpBuild(std::uint8_t op);
  bool OpBinPersId(std::uint8_t op);
  bool OpSetItem(std::uint8_t op);
  bool OpSetItems(std::uint8_t op);
  bool OpAppend(std::uint8_t op);
  bool OpAppends(std::uint8_t op);
  bool OpConstructs(std::uint8_t op);
  bool OpStop(std::uint8_t op);

  const std::uint8_t* d_;
  u64 n_;
  const std::string& file_name_;
  PtResult& r_;

  // ZIP.
  u64 e_ = 0, cd_off_ = 0, cd_size_ = 0, cd_end_ = 0, count_ = 0;
  std::vector<Entry> entries_;
  std::unordered_map<std::string_view, std::size_t> by_record_;
  std::size_t pkl_ = 0;

  // Pickle walk.
  const std::uint8_t* pk_ = nullptr;  // data.pkl's bytes
  u64 pk_ds_ = 0, pk_size_ = 0;       // its ds and size
  u64 pos_ = 0;                       // relative to pk_ds_
  u64 op_at_ = 0;  // absolute offset of the current opcode
  bool stopped_ = false;  // STOP accepted
  std::uint32_t none_ = 0, false_ = 0, true_ = 0;  // the singletons' nodes
  std::vector<std::uint32_t> stack_;
  std::vector<u64> marks_;
  std::unordered_map<std::uint32_t, std::uint32_t> memo_;
  std::unordered_map<std::uint32_t, std::unordered_set<std::string>> dict_keys_;
  std::unordered_map<std::string, Storage> storages_;
  std::unordered_set<std::uint32_t> built_;
  u64 visits_ = 0;
  u64 size_items_ = 0;  // ints copied into torch.Size values so far (4.4)
  u64 made_ = 0;        // values created so far (4.4)
  std::unordered_set<std::string> names_;
  std::vector<u64> value_depths_;
  u128 output_ = 0;
  u128 output_limit_ = 0;  // n + 2^26 (section 3)
};

}  // namespace qd::codec::pt_internal

#endif  // QUANTDIFF_CODECS_PT_READER_H_
