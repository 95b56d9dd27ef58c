// vector_folder.h: the vectors of an exported folder, read back for
// `quantdiff test-impl --vectors DIR` (issue 13 item 2).
//
// DIR is what `export-vectors --out DIR` wrote (or a bundle extracted with
// `tar -xzf`): DIR/FORMAT.json and the files it lists. Each test becomes a
// TestVector whose expectation is the export's (TestVector::exported): an
// invalid test is refused with its last flag, a decodeRefusal test with that
// rule, any other decodes to the tensors of its expectedOutput file. Every
// input's and expected output's SHA-256 is checked against the JSON, so a
// folder that changed since the export is an error, not a verdict.
#ifndef QUANTDIFF_CLI_VECTOR_FOLDER_H_
#define QUANTDIFF_CLI_VECTOR_FOLDER_H_

#include <string>
#include <vector>

#include "cli/vector_set.h"
#include "harness/registry.h"

namespace qd::cli {

// Appends FORMAT's vectors from DIR/FORMAT.json in file order. False with
// *error when the JSON is missing or malformed, a listed file is missing or
// its SHA-256 differs, or an expected output is not an F32 safetensors file.
// FORMAT is a registry name or model_dir (directory vectors: each regular
// entry's SHA-256 is checked the same way).
bool LoadExportedVectors(const std::string& dir, std::string_view format, std::vector<TestVector>* out,
                         std::string* error);

}  // namespace qd::cli

#endif  // QUANTDIFF_CLI_VECTOR_FOLDER_H_
