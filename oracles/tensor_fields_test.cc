// Tests for tensor_fields.h: DtypeName and Dims read like the std::string
// and std::vector<std::uint64_t> they replace in the oracle's records, and
// own their items (copies are deep, moves leave an empty shape).
#include "oracles/tensor_fields.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace qd::oracle {
namespace {

TEST(DtypeNameField, EveryTableNameReadsBackAndOtherTextIsEmpty) {
  for (const SafetensorsDtype& known : kSafetensorsDtypes) {
    const char* name = known.name;
    const DtypeName dtype{std::string(name)};  // from a copy: the table's text is kept, not the copy
    EXPECT_EQ(dtype.view(), name);
    EXPECT_EQ(dtype.view().data(), name);
    EXPECT_FALSE(dtype.empty());
  }
  EXPECT_TRUE(DtypeName("F33").empty());
  EXPECT_TRUE(DtypeName("f32").empty());
  EXPECT_TRUE(DtypeName().empty());
  EXPECT_EQ(DtypeName("F33").view(), "");
}

TEST(DtypeNameField, ComparesAndJoinsLikeAString) {
  const DtypeName bf16("BF16");
  EXPECT_TRUE(bf16 == "BF16");
  EXPECT_TRUE("BF16" == bf16);
  EXPECT_TRUE(bf16 != "F16");
  EXPECT_TRUE(bf16 == std::string("BF16"));
  EXPECT_TRUE(bf16 == DtypeName("BF16"));
  EXPECT_FALSE(bf16 == DtypeName("F16"));
  EXPECT_EQ("w is " + bf16 + ", not F32", "w is BF16, not F32");
  EXPECT_EQ(std::string("a ") + bf16, "a BF16");
  const std::string copy = bf16;
  EXPECT_EQ(copy, "BF16");
}

TEST(DimsField, HoldsRanksZeroToSixtyFour) {
  EXPECT_TRUE(Dims().empty());
  EXPECT_EQ(Dims().size(), 0u);
  const Dims one = std::vector<std::uint64_t>{7};
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], 7u);
  EXPECT_EQ(one.back(), 7u);
  std::vector<std::uint64_t> items;
  for (std::uint64_t i = 0; i < 64; ++i) items.push_back(1000 + i);
  const Dims long_shape = items;
  ASSERT_EQ(long_shape.size(), 64u);
  EXPECT_EQ(long_shape.front(), 1000u);
  EXPECT_EQ(long_shape.back(), 1063u);
  EXPECT_EQ(std::vector<std::uint64_t>(long_shape), items);
  EXPECT_TRUE(long_shape == items);
  EXPECT_FALSE(Dims({1000, 1001}) == items);
}

TEST(DimsField, CopiesAreDeepAndMovesEmptyTheSource) {
  Dims a = {2, 3, 4};
  Dims b = a;
  EXPECT_NE(a.data(), b.data());  // two arrays, not one shared
  EXPECT_TRUE(a == b);
  b = Dims{5};
  EXPECT_TRUE(a == std::vector<std::uint64_t>({2, 3, 4}));
  EXPECT_TRUE(b == std::vector<std::uint64_t>({5}));
  const std::uint64_t* items = a.data();
  Dims c = std::move(a);
  EXPECT_EQ(c.data(), items);  // the array moved, not copied
  EXPECT_TRUE(a.empty());      // NOLINT(bugprone-use-after-move): the contract under test
  const Dims& same = c;
  c = same;  // assignment to itself keeps the items
  EXPECT_TRUE(c == std::vector<std::uint64_t>({2, 3, 4}));
  Dims d = {9, 9};
  d = std::move(c);
  EXPECT_TRUE(d == std::vector<std::uint64_t>({2, 3, 4}));
}

}  // namespace
}  // namespace qd::oracle
