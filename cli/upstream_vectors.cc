#include "cli/upstream_vectors.h"

#include "cli/embedded_files.h"
#include "generators/gguf.h"

namespace qd::cli {
namespace {

// ggml's type id of MXFP4 (docs/gguf.md section 2.4) and its block: one
// E8M0 scale byte and 16 bytes of E2M1 codes for 32 values
// (docs/ggml_blocks.md 3.12).
constexpr std::uint32_t kGgmlMxfp4 = 39;
constexpr std::size_t kMxfp4BlockBytes = 17;
constexpr std::uint64_t kMxfp4BlockValues = 32;

}  // namespace

std::vector<std::uint8_t> UpstreamVector::Bytes() const {
  const EmbeddedFile* file = FindEmbeddedFile(source);
  if (file == nullptr) return {};  // cli/CMakeLists.txt embeds every source listed below
  std::vector<std::uint8_t> bytes = file->Bytes();
  if (!mxfp4_blocks) return bytes;
  // Drop the selector byte; the blocks become the data of tensor "blocks".
  qd::gen::GgufSpec spec;
  qd::gen::GgufTensorSpec tensor;
  tensor.name = "blocks";
  tensor.type = kGgmlMxfp4;
  tensor.data.assign(bytes.begin() + 1, bytes.end());
  tensor.ne = {tensor.data.size() / kMxfp4BlockBytes * kMxfp4BlockValues};
  spec.tensors.push_back(std::move(tensor));
  return qd::gen::WriteGguf(spec).bytes;
}

// The facts are corpus/upstream/ggml/README.md's; ggml is the pinned
// libggml-base.so of README "ggml, the third reader" (llama.cpp v0.4.0).
const std::vector<UpstreamVector>& UpstreamVectors() {
  static const std::vector<UpstreamVector> kVectors = {
      {"gguf", "corpus/upstream/ggml/gguf/count-wraps-2e64-4e021271.gguf", false, "GGUF-014",
       "upstream-ggml-count-wraps",
       "upstream finding (corpus/upstream/ggml/gguf/count-wraps-2e64-4e021271.gguf): one f32 tensor "
       "with ne = [4, 2^62, 8], 2^67 elements, over 2^63 - 1",
       "ggml's gguf_init_from_file_ptr checks the element count by multiplying ne[0] * ne[1] in "
       "int64, which wraps to 0: it accepts the file and reports a wrapped byte size. A reader "
       "must refuse it (GGUF-014, docs/gguf.md section 3)."},
      {"gguf", "corpus/upstream/ggml/gguf/data-alloc-abort-285f32ac.gguf", false, "GGUF-018",
       "upstream-ggml-alloc-abort",
       "upstream finding (corpus/upstream/ggml/gguf/data-alloc-abort-285f32ac.gguf): one f32 "
       "tensor of 2^40 elements and 32 data bytes, its data past the end of the file",
       "ggml's gguf_init_from_file_ptr with no_alloc = false sizes its buffer from the dimensions "
       "before reading the data, fails to allocate 4 TiB and aborts the process "
       "(GGML_ASSERT(ctx->mem_buffer != NULL)) instead of refusing the file. A reader must "
       "refuse it (GGUF-018) without allocating what the header claims."},
      {"gguf", "corpus/upstream/ggml/mxfp4-e8m0-ff-c82cd445", true, "",
       "upstream-ggml-mxfp4-e8m0-ff",
       "upstream finding (corpus/upstream/ggml/mxfp4-e8m0-ff-c82cd445's block as an mxfp4 "
       "tensor): E8M0 scale byte 0xFF, codes 0..15; OCP MX v1.0 makes the scale NaN, so all 32 "
       "values decode to NaN (docs/ggml_blocks.md 2.2, 5.1)",
       "ggml's ggml_e8m0_to_fp32_half reads 0xFF as 2^127 and decodes v * 2^128: +0, +-2^127 "
       "and +-infinity, never NaN, so its output differs from the expected tensor."},
      {"gguf", "corpus/upstream/ggml/mxfp4-code8-negative-zero-b54d304f", true, "",
       "upstream-ggml-mxfp4-code8-positive-zero",
       "upstream finding (corpus/upstream/ggml/mxfp4-code8-negative-zero-b54d304f's block as an "
       "mxfp4 tensor): scale 2^0 and every code 8 (E2M1 1000b, -0 in OCP), so all 32 values "
       "decode to -0.0, 0x80000000 (docs/ggml_blocks.md 3.12, 5.2)",
       "ggml's MXFP4 value table holds integer 0 for code 8 and decodes +0.0: its output differs "
       "from the expected tensor in the sign of zero only (test-impl: signed-zero)."},
  };
  return kVectors;
}

}  // namespace qd::cli
