// ggml_st_peer_test.cc: every ${QD_PEER_DIR}/gguf case of a type GPT-QModel's
// GGUF linear writes (q4_0, q8_0, q4_K, q5_K, q6_K) laid out as a GGUF-family
// safetensors layer (docs/ggml_safetensors.md section 1: its `blocks` as
// `l.qweight`, the config's format the public variant and bits the type's
// width) and read through the registry's "ggml_st" entry: codec and oracle
// both decode `l.weight` to the case's `dequant` (ggml's to_float) bit for
// bit. The peer rows are whole blocks, so Kp is the case's column count.
//
// Then every case of the manifest as it is (section 7, the block-vector
// layout): `quantdiff decode` (the built binary) writes the file's `blocks`
// decoded under the name `blocks`, and the oracle through the registry
// decodes it, both equal to the file's `dequant` bit for bit.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "codecs/safetensors.h"
#include "harness/registry.h"
#include "tests/ggml/ggml_peer_cases.h"
#include "tests/hostile/run_quantdiff.h"
#include "tests/peer/peer_file.h"
#include "tests/safetensors_by_the_tests.h"

namespace {

struct Config {
  const char* variant;
  int bits;
};
// ggml's name -> GPT-QModel's (format, bits): docs/ggml_safetensors.md section 2.
const std::map<std::string, Config> kWritten = {
    {"q4_0", {"q_0", 4}}, {"q8_0", {"q_0", 8}}, {"q4_K", {"q_k_m", 4}}, {"q5_K", {"q_k_s", 5}}, {"q6_K", {"q_k", 6}}};

TEST(GgmlStPeer, EveryWrittenTypeDecodesToGgmlsDequantBitForBit) {
  const std::vector<qdtest::ggml_peer::Case> cases = qdtest::ggml_peer::LoadCases(QD_PEER_GGUF_DIR);
  ASSERT_EQ(cases.size(), 37u);
  const qd::harness::FormatEntry& format = *qd::harness::FindFormat("ggml_st");
  int checked = 0;
  for (const auto& c : cases) {
    const auto written = kWritten.find(c.type);
    if (written == kWritten.end()) continue;
    ASSERT_TRUE(c.ok) << c.file;
    const std::uint64_t row_bytes = c.blocks.size() / c.rows;
    qd::codec::TensorWithBytes qweight;  // the layout only: the values are the peer's
    qweight.spec = {"l.qweight", "U8", {c.rows, row_bytes}, c.blocks.size()};
    qweight.bytes = c.blocks;
    const std::vector<std::uint8_t> file = qd::codec::SerializeSafetensors({qweight}, nullptr);
    const std::string text = std::string("{\"method\": \"gguf\", \"format\": \"") + written->second.variant +
                             "\", \"bits\": " + std::to_string(written->second.bits) + "}";
    const std::vector<qd::SideFile> configs = {{"quantize_config.json", {text.begin(), text.end()}}};
    EXPECT_EQ(qd::harness::DetectFormat({file.data(), file.size()}, {}).name, "ggml_st") << c.file;
    for (const bool oracle : {false, true}) {
      const qd::Outcome o = oracle ? format.oracle_read({file.data(), file.size()}, c.file, configs)
                                   : format.codec_read({file.data(), file.size()}, c.file, configs);
      ASSERT_FALSE(o.refused) << c.file << (oracle ? " oracle" : " codec");
      ASSERT_EQ(o.tensors.size(), 1u) << c.file;
      EXPECT_EQ(o.tensors[0].shape, (std::vector<std::uint64_t>{c.rows, c.cols})) << c.file;
      EXPECT_EQ(qdtest::peer::FirstDifference(o.tensors[0].values, c.dequant), "")
          << c.file << (oracle ? " oracle" : " codec");
    }
    ++checked;
  }
  EXPECT_EQ(checked, 17);  // the manifest: q4_0 4, q8_0 3, q4_K 3, q5_K 3, q6_K 4
}

TEST(GgmlStPeer, DecodeOfEveryPeerFileWritesGgmlsDequantUnderBlocks) {
  const std::vector<qdtest::ggml_peer::Case> cases = qdtest::ggml_peer::LoadCases(QD_PEER_GGUF_DIR);
  ASSERT_EQ(cases.size(), 37u);
  const std::filesystem::path scratch =
      qd::hostile::FreshFolder(std::filesystem::path(QD_TEST_TMPDIR) / "decode") / "scratch";
  const qd::harness::FormatEntry& format = *qd::harness::FindFormat("ggml_st");
  for (const auto& c : cases) {
    ASSERT_TRUE(c.ok) << c.file;
    const std::string in = std::string(QD_PEER_GGUF_DIR) + "/" + c.file;
    const std::string out = (scratch / "out.safetensors").string();
    const qd::hostile::RunResult run = qd::hostile::Quantdiff({"decode", in, "--out", out}, scratch);
    ASSERT_EQ(run.exit_code, 0) << c.file << ": " << run.err;
    const std::string written = qd::hostile::ReadWhole(out);
    const qdtest::RawTensor blocks =
        qdtest::TensorReadByTheTests(std::vector<std::uint8_t>(written.begin(), written.end()), "blocks");
    ASSERT_TRUE(blocks.found) << c.file;
    EXPECT_EQ(blocks.dtype, "F32") << c.file;
    EXPECT_EQ(blocks.shape, (std::vector<std::uint64_t>{c.rows, c.cols})) << c.file;
    EXPECT_EQ(qdtest::peer::FirstDifference(
                  qdtest::LittleEndianFloats(blocks.dtype, blocks.bytes.data(), blocks.bytes.size()), c.dequant),
              "")
        << c.file << " decode";
    const std::vector<std::uint8_t> file = qdtest::peer::ReadBytes(in);
    const qd::Outcome o = format.oracle_read({file.data(), file.size()}, c.file, {});
    ASSERT_FALSE(o.refused) << c.file << " oracle";
    bool seen = false;
    for (const qd::DecodedTensor& t : o.tensors) {
      if (t.name != "blocks") continue;
      seen = true;
      EXPECT_EQ(qdtest::peer::FirstDifference(t.values, c.dequant), "") << c.file << " oracle";
    }
    EXPECT_TRUE(seen) << c.file;
  }
}

}  // namespace
