// pt.cc: the torch.save zip reader (docs/pt.md). See pt.h; the sections are
// implemented in pt_zip.cc (2), pt_pickle.cc (4, 5.1), pt_flatten.cc (6) and
// pt_views.cc (5.3), around the Reader of pt_reader.h.
#include "codecs/pt.h"

#include <cstring>

#include "codecs/pt_reader.h"

namespace qd::codec {
namespace pt_internal {

void Reader::Run() {
  if (!ReadEnd() || !ReadCentral() || !ReadLocals() || !CheckRecords() || !Walk()) return;
  // What only the opcode walk needs (the key sets of 4.2's duplicate check,
  // the memo, the stack) is freed before the tables are built.
  dict_keys_ = {};
  memo_ = {};
  built_ = {};
  stack_ = {};
  r_.nodes.shrink_to_fit();  // kept with the result: no growth slack
  output_limit_ = static_cast<u128>(n_) + (u128{1} << 26);
  if (!Flatten(r_.root, "", 1)) return;
  for (std::size_t k = 0; k < r_.values.size(); ++k) {
    if (!WalkValue(r_.values[k].second, value_depths_[k])) return;
  }
  for (const Entry& en : entries_) {
    if (!IsStorageRecordName(en.record)) continue;
    if (storages_.count(std::string(en.record.substr(5))) == 0) {
      Warn("PT-102", "storage", en.h,
           "storage record not referenced by any persistent ID: " + std::string(en.record));
    }
  }
}

}  // namespace pt_internal

using pt_internal::Rd32;
using pt_internal::u64;

PtResult ReadPt(qd::ByteView file, const std::string& file_name) {
  PtResult result;
  pt_internal::Reader reader(file, file_name, &result);
  reader.Run();
  if (result.refused) {
    // Keep the findings only: a refused result offers no tables.
    result.tensors.clear();
    result.values.clear();
    result.nodes.clear();
    result.all_tensors.clear();
    result.root = kPtNoNode;
  }
  return result;
}

bool ClaimsPt(qd::ByteView file) {
  const std::uint8_t* d = file.data;
  const u64 n = file.size;
  if (n >= 9 && d[8] == '{') return false;  // a safetensors header
  // docs/pt.md 1.1: an archive opens with a local header, or with the end
  // record when it has no entry.
  if (n >= 4 && (Rd32(d) == 0x04034b50u || Rd32(d) == 0x06054b50u)) return true;
  static const std::uint8_t kLegacy[14] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                           0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  if (n >= 14 && std::memcmp(d, kLegacy, 14) == 0) return true;
  return n >= 262 && std::memcmp(d + 257, "ustar", 5) == 0;
}

}  // namespace qd::codec
