// ggml_peer_cases.h: the cases of ${QD_PEER_DIR}/gguf/manifest.json as the
// GGUF block tests read them (codec side, oracle side, ggml side): each
// case's type, shape and its three tensors, read with the tests' own
// safetensors reader. Test code only.
#ifndef QUANTDIFF_TESTS_GGML_GGML_PEER_CASES_H_
#define QUANTDIFF_TESTS_GGML_GGML_PEER_CASES_H_

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "property_tests/gen/half.h"
#include "tests/safetensors_by_the_tests.h"

namespace qdtest::ggml_peer {

struct Case {
  std::string file;
  std::string type;  // ggml's name, "q4_0" ... "iq4_nl"
  std::uint64_t rows = 0;
  std::uint64_t cols = 0;
  std::vector<float> input;           // [rows, cols]
  std::vector<std::uint8_t> blocks;   // [rows, bytes per row]
  std::vector<float> dequant;         // ggml's to_float of blocks
  bool ok = false;                    // every tensor found with its size
};

inline std::vector<Case> LoadCases(const std::string& dir) {
  std::vector<Case> cases;
  std::ifstream manifest_in(dir + "/manifest.json");
  const nlohmann::json manifest = nlohmann::json::parse(manifest_in, nullptr, false);
  if (!manifest.is_object() || !manifest.contains("files")) return cases;
  for (const nlohmann::json& f : manifest["files"]) {
    Case c;
    c.file = f["file"].get<std::string>();
    c.type = f["type"].get<std::string>();
    c.rows = f["shape"][0].get<std::uint64_t>();
    c.cols = f["shape"][1].get<std::uint64_t>();
    std::ifstream in(dir + "/" + c.file, std::ios::binary);
    const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
    const RawTensor input = TensorReadByTheTests(bytes, "input");
    const RawTensor blocks = TensorReadByTheTests(bytes, "blocks");
    const RawTensor dequant = TensorReadByTheTests(bytes, "dequant");
    if (input.found && blocks.found && dequant.found) {
      c.input = LittleEndianFloats(input.dtype, input.bytes.data(), input.bytes.size());
      c.blocks = blocks.bytes;
      c.dequant = LittleEndianFloats(dequant.dtype, dequant.bytes.data(), dequant.bytes.size());
      c.ok = c.input.size() == c.rows * c.cols && c.dequant.size() == c.rows * c.cols &&
             c.blocks.size() % c.rows == 0;
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace qdtest::ggml_peer

#endif  // QUANTDIFF_TESTS_GGML_GGML_PEER_CASES_H_
