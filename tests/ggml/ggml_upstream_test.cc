// ggml_upstream_test.cc: the inputs of corpus/upstream/ggml/ (where ggml
// reads block bytes differently from docs/ggml_blocks.md, section 5).
//   - quantdiff's codec (every kernel) and oracle decode each as the
//     contract says (the expected bits come from the contract, per file);
//   - with QD_TEST_WITH_GGML (the pinned ggml present), ggml still decodes
//     every value differently, as that folder's README records: a ggml that
//     adopts the OCP reading fails here and the finding moves to "fixed".
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codecs/ggml_blocks.h"
#include "codecs/kernels.h"
#include "oracles/ggml_blocks.h"
#ifdef QD_TEST_WITH_GGML
#include "thirdparty/ggml/ggml_library.h"
#endif

namespace {

namespace fs = std::filesystem;

struct Upstream {
  std::string stem;  // the file name up to its -<sha1:8>
  // What the contract decodes every value of the file's block to: NaN
  // (any payload, section 1.3), or these exact bits.
  bool all_nan;
  std::uint32_t bits;
};

// One row per finding of corpus/upstream/ggml/README.md.
const Upstream kFindings[] = {
    {"mxfp4-e8m0-ff", true, 0},
    {"mxfp4-code8-negative-zero", false, 0x80000000u},
};

struct Input {
  const Upstream* finding;
  const qd::codec::GgmlTypeInfo* info;
  std::vector<std::uint8_t> blocks;
  std::string name;
};

std::vector<Input> Inputs() {
  std::vector<Input> inputs;
  for (const fs::directory_entry& e : fs::directory_iterator(QD_UPSTREAM_GGML_DIR)) {
    const std::string name = e.path().filename().string();
    // gguf/ holds the .gguf findings (tests/gguf_test.cc, gguf_ggml_test.cc).
    if (e.is_directory() || name.rfind("README", 0) == 0 || name[0] == '.') continue;
    Input input;
    input.name = name;
    input.finding = nullptr;
    for (const Upstream& f : kFindings) {
      if (name.rfind(f.stem + "-", 0) == 0) input.finding = &f;
    }
    std::ifstream in(e.path(), std::ios::binary);
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
    const auto types = qd::codec::GgmlTypes();
    input.info = bytes.empty() ? nullptr : &types[bytes[0] % types.size()];
    if (!bytes.empty()) input.blocks.assign(bytes.begin() + 1, bytes.end());
    inputs.push_back(std::move(input));
  }
  return inputs;
}

TEST(GgmlUpstream, QuantdiffDecodesEachAsTheContractSays) {
  const std::vector<Input> inputs = Inputs();
  ASSERT_EQ(inputs.size(), std::size(kFindings));
  for (const Input& input : inputs) {
    ASSERT_NE(input.finding, nullptr) << input.name << " has no line in kFindings";
    ASSERT_NE(input.info, nullptr) << input.name;
    ASSERT_EQ(input.blocks.size() % static_cast<std::size_t>(input.info->bytes), 0u) << input.name;
    const std::size_t count = input.blocks.size() / static_cast<std::size_t>(input.info->bytes);
    std::vector<float> oracle;
    ASSERT_TRUE(qd::oracle::DecodeGgmlBlocks(input.info->name, input.blocks, &oracle)) << input.name;
    std::vector<std::vector<float>> decoded = {oracle};
    for (const qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
      std::vector<float> codec(oracle.size());
      qd::codec::GgmlDecode(input.info->type, input.blocks.data(), count, codec.data(), kernel);
      decoded.push_back(codec);
    }
    for (const std::vector<float>& values : decoded) {
      for (const float v : values) {
        if (input.finding->all_nan) {
          EXPECT_TRUE(std::isnan(v)) << input.name;
        } else {
          EXPECT_EQ(std::bit_cast<std::uint32_t>(v), input.finding->bits) << input.name;
        }
      }
    }
  }
}

#ifdef QD_TEST_WITH_GGML
TEST(GgmlUpstream, GgmlStillDecodesEveryValueDifferently) {
  std::string error;
  auto ggml = qd::ggml::Library::Open(qd::ggml::DefaultLibraryPath(), &error);
  ASSERT_TRUE(ggml.has_value()) << error;
  for (const Input& input : Inputs()) {
    ASSERT_NE(input.finding, nullptr) << input.name;
    std::vector<float> theirs(input.blocks.size() / static_cast<std::size_t>(input.info->bytes) *
                              static_cast<std::size_t>(input.info->values));
    ASSERT_TRUE(ggml->Dequantize(input.info->name, input.blocks.data(), theirs.data(),
                                 static_cast<std::int64_t>(theirs.size())))
        << input.name;
    for (const float v : theirs) {
      if (input.finding->all_nan) {
        EXPECT_FALSE(std::isnan(v)) << input.name << ": ggml now reads it as the contract does";
      } else {
        EXPECT_NE(std::bit_cast<std::uint32_t>(v), input.finding->bits)
            << input.name << ": ggml now reads it as the contract does";
      }
    }
  }
}
#endif

}  // namespace
