// pt_oracle_test_files.h: what the oracle torch.save tests share: the usual
// archive, reading it as dir/model.pt, the one-error check with all fields,
// and the simple state dict. Used by pt_oracle_test.cc (the ZIP container)
// and pt_pickle_oracle_test.cc (the opcode walk).
//
//
// The archives are built by pt_test_support.h's tiny ZIP writer in Python zipfile's
// style (version 20, flags 0, no descriptor, no extra field) unless a test
// says otherwise, so the layout is plain arithmetic. With prefix "a" and the
// entries in the order given, entry i of name length L_i and data size D_i
// has its local header at h_i = sum_{j<i} (30 + L_j + D_j), its data at
// h_i + 30 + L_i, the directory starts at cd_off = sum_j (30 + L_j + D_j),
// central entry i at cd_off + sum_{j<i} (46 + L_j), and the end record at
// n - 22. The usual state dict is
//   a/data.pkl (L 10, D = P)   h 0,          data at 40
//   a/data/0   (L 8,  D = S)   h 40 + P,     data at 78 + P
//   a/version  (L 9,  D = 2)   h 78 + P + S, data at 117 + P + S
//   cd_off = 119 + P + S; central entries at cd_off, cd_off + 56, cd_off + 110.
// so a pickle opcode at pos has byte_offset 40 + pos.
#ifndef QUANTDIFF_ORACLES_PT_ORACLE_TEST_FILES_H_
#define QUANTDIFF_ORACLES_PT_ORACLE_TEST_FILES_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "oracles/bnb_pt_layers.h"
#include "oracles/pt.h"
#include "oracles/pt_test_support.h"

namespace qd::oracle::pt_test_files {

using pt_test::Bytes;
using pt_test::F32s;
using pt_test::Pkl;
using pt_test::Put16;
using pt_test::Put32;
using pt_test::Put64;
using pt_test::Set16;
using pt_test::Set32;
using pt_test::TestCrc;
using pt_test::Text;
using pt_test::Zip;
using pt_test::ZipEntry;
using pt_test::ZipStyle;

inline const std::string kFile = "dir/model.pt";
inline constexpr std::int64_t kPkl = 40;  // data start of a/data.pkl when it is first

// The usual archive: a/data.pkl, a/data/0, a/version "3\n".
inline Bytes StateDict(const Bytes& pickle, const Bytes& storage, const std::string& version = "3\n") {
  return Zip({{"a/data.pkl", pickle}, {"a/data/0", storage}, {"a/version", Text(version)}});
}

inline qd::Outcome Read(const Bytes& file, std::vector<PtTensorBytes>* t = nullptr,
                 std::vector<PtValueEntry>* v = nullptr) {
  return ReadPtFile(qd::ByteView{file.data(), file.size()}, kFile, t, v);
}

// The one error of a refused outcome, all fields.
inline void ExpectError(const qd::Outcome& o, const char* rule, const char* field, std::int64_t offset,
                 const std::string& tensor = "") {
  ASSERT_TRUE(o.refused);
  ASSERT_FALSE(o.findings.empty());
  const qd::Finding& f = o.findings.back();
  EXPECT_EQ(f.rule, rule);
  EXPECT_EQ(f.severity, qd::Severity::kError);
  EXPECT_EQ(f.file, kFile);
  EXPECT_EQ(f.tensor, tensor);
  EXPECT_EQ(f.field, field);
  EXPECT_EQ(f.byte_offset, offset);
  EXPECT_EQ(f.row, -1);
  EXPECT_EQ(f.block, -1);
  EXPECT_EQ(f.element, -1);
  for (std::size_t i = 0; i + 1 < o.findings.size(); ++i) EXPECT_EQ(o.findings[i].severity, qd::Severity::kWarning);
  EXPECT_TRUE(o.tensors.empty());
}

// {"w": tensor F32 [2, 3] of storage "0" (numel 6)}.
inline Pkl SimplePickle() {
  Pkl p;
  p.proto().dict().mark().str("w").tensor("FloatStorage", "0", 6, 0, {2, 3}, {3, 1}).setitems().stop();
  return p;
}
inline const Bytes kSix = F32s({1, 2, 3, 4, 5, 6});

}  // namespace qd::oracle::pt_test_files

#endif  // QUANTDIFF_ORACLES_PT_ORACLE_TEST_FILES_H_
