// pt_peer_test: the torch .pt reader (codecs/pt.h) against files torch.save
// and Python's pickle/zipfile wrote (${QD_PEER_DIR}/pt: README.md,
// manifest.json), one test per manifest case:
//  * accept: no finding; every manifest tensor is in the tensor table with the
//    manifest's dtype and shape (and, for views.pt, stride and storage offset),
//    and the sha256 of its C-order little-endian bytes equals tensor_sha256;
//    bnb_like_mixed.pt's value table holds meta.quant_type, meta.blocksize and
//    meta.shape;
//  * reject: refused with the rule docs/pt.md section 9 assigns to the file,
//    at the byte offset section 12 records; nothing is executed
//    (/tmp/quantdiff_pwned never appears).
#include <gtest/gtest.h>

#include <nettle/sha2.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codecs/bnb_pt_layers.h"
#include "codecs/pt.h"
#include "codecs/safetensors.h"
#include "tests/peer/peer_file.h"
#include "tests/peer/pt_peer_cases.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using qd::codec::Dtype;
using qd::codec::PtKind;
using qd::codec::PtResult;
using qdtest::peer::ReadBytes;

namespace pt_peer = qdtest::pt_peer;
using pt_peer::kDir;
using pt_peer::kRejects;

std::string TorchDtype(Dtype d) {
  switch (d) {
    case Dtype::kF64: return "torch.float64";
    case Dtype::kF32: return "torch.float32";
    case Dtype::kF16: return "torch.float16";
    case Dtype::kBF16: return "torch.bfloat16";
    case Dtype::kI64: return "torch.int64";
    case Dtype::kI32: return "torch.int32";
    case Dtype::kI16: return "torch.int16";
    case Dtype::kI8: return "torch.int8";
    case Dtype::kU8: return "torch.uint8";
    case Dtype::kBool: return "torch.bool";
    default: return "?";
  }
}

const json* FindCase(const json& manifest, const std::string& file) {
  for (const json& c : manifest["cases"]) {
    if (c["file"] == file) return &c;
  }
  return nullptr;
}

TEST(PtPeer, ManifestHasTwelveCases) {
  const json m = pt_peer::Manifest();
  ASSERT_EQ(m["cases"].size(), 12u);
  int accepts = 0, rejects = 0;
  for (const json& c : m["cases"]) {
    if (c["verdict"] == "accept") {
      ++accepts;
    } else {
      ++rejects;
      ASSERT_EQ(kRejects.count(c["file"].get<std::string>()), 1u) << c["file"];
      EXPECT_EQ(c["rule"], kRejects.at(c["file"].get<std::string>()).category) << c["file"];
    }
  }
  EXPECT_EQ(accepts, 5);
  EXPECT_EQ(rejects, 7);
}

class PtPeerAccept : public testing::TestWithParam<std::string> {};

TEST_P(PtPeerAccept, TensorsMatch) {
  const json m = pt_peer::Manifest();
  const json* c = FindCase(m, GetParam());
  ASSERT_NE(c, nullptr);
  ASSERT_EQ((*c)["verdict"], "accept");
  const std::vector<std::uint8_t> bytes = ReadBytes(kDir / GetParam());
  ASSERT_FALSE(bytes.empty());
  const qd::ByteView view{bytes.data(), bytes.size()};
  EXPECT_TRUE(qd::codec::ClaimsPt(view));
  const PtResult r = qd::codec::ReadPt(view, GetParam());
  ASSERT_FALSE(r.refused) << (r.findings.empty() ? "" : r.findings.back().rule + " " +
                                                           r.findings.back().field + " " +
                                                           r.findings.back().message);
  EXPECT_TRUE(r.findings.empty());
  const json& sums = (*c)["tensor_sha256"];
  EXPECT_EQ(r.tensors.size(), sums.size());
  for (auto it = sums.begin(); it != sums.end(); ++it) {
    const qd::codec::PtTensor* t = r.Tensor(it.key());
    ASSERT_NE(t, nullptr) << it.key();
    EXPECT_EQ(pt_peer::Sha256Hex(qd::codec::PtTensorBytes(*t)), it.value().get<std::string>())
        << it.key();
    if (c->contains("tensors")) {
      const json& spec = (*c)["tensors"][it.key()];
      EXPECT_EQ(TorchDtype(t->dtype), spec[0].get<std::string>()) << it.key();
      EXPECT_EQ(t->shape, spec[1].get<std::vector<std::uint64_t>>()) << it.key();
      if (spec.size() >= 4) {
        EXPECT_EQ(t->stride, spec[2].get<std::vector<std::uint64_t>>()) << it.key();
        EXPECT_EQ(t->storage_offset, spec[3].get<std::uint64_t>()) << it.key();
      }
    }
  }
  // Decoding gives every floating tensor, converted exactly (F16/BF16/F32 widen).
  const qd::Outcome o = qd::codec::DecodePtFile(view, GetParam());
  ASSERT_FALSE(o.refused);
  std::size_t floats = 0;
  for (std::size_t i = 0; i < r.tensors.size(); ++i) {
    floats += qd::codec::IsFloatDtype(r.TableTensor(i).dtype) ? 1 : 0;
  }
  EXPECT_EQ(o.tensors.size(), floats);
  for (const qd::DecodedTensor& d : o.tensors) {
    const qd::codec::PtTensor* t = r.Tensor(d.name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(d.shape, t->shape);
    ASSERT_EQ(d.values.size(), t->numel);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, PtPeerAccept,
                         testing::Values("gptq4_sd.pt", "gptq3_sd.pt", "gptq8_bf16_sd.pt",
                                         "views.pt", "bnb_like_mixed.pt"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param.substr(0, info.param.size() - 3);
                           for (char& ch : s) {
                             if (ch == '.') ch = '_';
                           }
                           return s;
                         });

TEST(PtPeer, ViewsShareOneStorage) {
  const std::vector<std::uint8_t> bytes = ReadBytes(kDir / "views.pt");
  const PtResult r = qd::codec::ReadPt({bytes.data(), bytes.size()}, "views.pt");
  ASSERT_FALSE(r.refused);
  ASSERT_EQ(r.tensors.size(), 4u);
  for (std::size_t i = 0; i < r.tensors.size(); ++i) {
    const qd::codec::PtTensor& t = r.TableTensor(i);
    EXPECT_EQ(t.storage_key, r.TableTensor(0).storage_key);
    EXPECT_EQ(t.storage_numel, 64u * 48u);
  }
  // t_slice: storage offset 149, stride (48, 1): element (1, 0) is storage 197.
  const qd::codec::PtTensor* slice = r.Tensor("t_slice");
  ASSERT_NE(slice, nullptr);
  EXPECT_EQ(qd::codec::PtStorageIndex(*slice, 35), 197u);
  EXPECT_EQ(slice->begin, slice->storage_begin + 149u * 4u);
  EXPECT_EQ(slice->end, slice->begin + 7u * 35u * 4u);
  // t_transposed element (0, 1) is t_full element (1, 0).
  const qd::codec::PtTensor* tr = r.Tensor("t_transposed");
  const qd::codec::PtTensor* full = r.Tensor("t_full");
  ASSERT_NE(tr, nullptr);
  ASSERT_NE(full, nullptr);
  const auto tb = qd::codec::PtTensorBytes(*tr);
  const auto fb = qd::codec::PtTensorBytes(*full);
  for (std::uint64_t i = 0; i < 48; ++i) {
    for (std::uint64_t j = 0; j < 64; ++j) {
      ASSERT_EQ(std::memcmp(&tb[(i * 64 + j) * 4], &fb[(j * 48 + i) * 4], 4), 0);
    }
  }
}

TEST(PtPeer, BnbLikeMixedValues) {
  const std::vector<std::uint8_t> bytes = ReadBytes(kDir / "bnb_like_mixed.pt");
  const PtResult r = qd::codec::ReadPt({bytes.data(), bytes.size()}, "bnb_like_mixed.pt");
  ASSERT_FALSE(r.refused);
  const qd::codec::PtNode* qt = r.Value("meta.quant_type");
  ASSERT_NE(qt, nullptr);
  EXPECT_EQ(qt->kind, PtKind::kStr);
  EXPECT_EQ(qt->text, "nf4");
  const qd::codec::PtNode* bs = r.Value("meta.blocksize");
  ASSERT_NE(bs, nullptr);
  EXPECT_EQ(bs->kind, PtKind::kInt);
  EXPECT_EQ(bs->integer, 32);
  const qd::codec::PtNode* shape = r.Value("meta.shape");
  ASSERT_NE(shape, nullptr);
  EXPECT_EQ(shape->kind, PtKind::kTuple);
  ASSERT_EQ(shape->items.size(), 2u);
  EXPECT_EQ(r.Node(shape->items[0]).kind, PtKind::kInt);
  EXPECT_EQ(r.Node(shape->items[0]).integer, 40);
  EXPECT_EQ(r.Node(shape->items[1]).integer, 30);
}

class PtPeerReject : public testing::TestWithParam<std::string> {};

TEST_P(PtPeerReject, RefusedWithTheRule) {
  const json m = pt_peer::Manifest();
  const json* c = FindCase(m, GetParam());
  ASSERT_NE(c, nullptr);
  ASSERT_EQ((*c)["verdict"], "reject");
  const pt_peer::Expected& want = kRejects.at(GetParam());
  const std::vector<std::uint8_t> bytes = ReadBytes(kDir / GetParam());
  ASSERT_FALSE(bytes.empty());
  const qd::ByteView view{bytes.data(), bytes.size()};
  EXPECT_TRUE(qd::codec::ClaimsPt(view));
  const PtResult r = qd::codec::ReadPt(view, GetParam());
  ASSERT_TRUE(r.refused);
  ASSERT_FALSE(r.findings.empty());
  const qd::Finding& f = r.findings.back();
  EXPECT_EQ(f.rule, want.rule);
  EXPECT_EQ(f.severity, qd::Severity::kError);
  EXPECT_EQ(f.field, want.field);
  EXPECT_EQ(f.byte_offset, want.offset);
  EXPECT_EQ(f.file, GetParam());
  EXPECT_TRUE(f.tensor.empty());
  EXPECT_EQ(f.row, -1);
  EXPECT_EQ(f.block, -1);
  EXPECT_EQ(f.element, -1);
  EXPECT_TRUE(r.tensors.empty());
  const qd::Outcome o = qd::codec::DecodePtFile(view, GetParam());
  EXPECT_TRUE(o.refused);
  EXPECT_TRUE(o.tensors.empty());
  EXPECT_FALSE(fs::exists(pt_peer::kPwned));
}

INSTANTIATE_TEST_SUITE_P(Cases, PtPeerReject,
                         testing::Values("legacy_format.pt", "hostile_os_system.pt",
                                         "hostile_stack_global.pt", "hostile_eval.pt",
                                         "hostile_deep_marks.pt", "zip_traversal.pt",
                                         "crc_mismatch.pt"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param.substr(0, info.param.size() - 3);
                         });

TEST(PtPeer, NothingExecuted) {
  for (const auto& [file, want] : kRejects) {
    const std::vector<std::uint8_t> bytes = ReadBytes(kDir / file);
    (void)qd::codec::ReadPt({bytes.data(), bytes.size()}, file);
    (void)qd::codec::DecodePtFile({bytes.data(), bytes.size()}, file);
  }
  EXPECT_FALSE(fs::exists(pt_peer::kPwned));
}

}  // namespace
