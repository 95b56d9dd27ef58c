// vector_set.h: the test vectors of one format, built in memory.
//
// What `export-vectors` writes to a folder and what `test-impl` runs another
// implementation on: the generators' valid instances, then one group per
// rule they can break, then the upstream findings of the format
// (cli/upstream_vectors.h), each file read by the ORACLE (never the codec),
// which gives the expected verdict, the flags and the expected decoded
// tensors. The same seed builds the same vectors (the export is committed
// and diffed).
//
//   std::vector<qd::cli::TestVector> vectors;
//   if (!qd::cli::BuildVectors(format, 4, 1, &vectors, &error)) ...
#ifndef QUANTDIFF_CLI_VECTOR_SET_H_
#define QUANTDIFF_CLI_VECTOR_SET_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/vector_bundle.h"
#include "harness/registry.h"
#include "quantdiff/plain_data.h"

namespace qd::cli {

// What an implementation may do with a vector when it decodes it, as
// `quantdiff decode` does: refuse it with refusal_rule, or (refusal_rule
// empty) write tensors, whose file is exactly decoded_file.
struct Expectation {
  std::string refusal_rule;
  std::vector<qd::DecodedTensor> tensors;
  std::string decoded_file;  // the F32 safetensors bytes of tensors
  std::string_view reader;   // the format whose oracle read it (a registry name)
};

struct TestVector {
  std::uint64_t tc_id = 0;  // 1, 2, ... within the format
  std::string rule;         // the group's rule; "" for the valid group
  // Relative to the vector folder: FORMAT/ID.ext, or FORMAT/ID/STEM.safetensors
  // when side files (configs) come with it, under FORMAT/ID/ by their names,
  // in the order config discovery beside the file finds them.
  std::string file;
  std::vector<std::uint8_t> bytes;
  qd::harness::SideFiles side_files;  // names relative to the vector folder
  std::string comment;
  bool relabelled = false;  // the oracle reads it otherwise than generated
  qd::Outcome oracle;       // verdict, findings and decoded tensors
  std::vector<qd::harness::VariantFlag> variants;  // of an accepted file
  // Set for an upstream finding: what the upstream reader does with the file
  // (flag and note), the group "UpstreamFinding" of the export.
  std::vector<qd::harness::VariantFlag> upstream;
  // Read from an exported folder (cli/vector_folder.h): the decode the
  // export recorded, which stands in for ExpectationOf(oracle).
  std::optional<Expectation> exported;
  // A model-directory vector (format model_dir, docs/model_dir.md): file is
  // its folder, model_dir/ID, bytes and side_files are empty, and these are
  // its entries as the oracle read them (FilesOf lays them out on disk).
  bool directory = false;
  std::vector<qd::gen::GeneratedDirFile> dir_entries;
};

// The name model-directory vectors go under, as a format: "model_dir".
std::string_view DirVectorFormat();

// What the folder of an export holds for V, relative to it: its file and
// configs; for a directory vector, every entry under model_dir/ID/: a
// regular entry as a file, an entry that is neither regular nor a link out
// (a subdirectory) as the folder model_dir/ID/NAME holding an empty file
// "placeholder" (git keeps no empty folder), a link out of the folder as a
// symbolic link to ../ID.outside, a file written beside the folder.
std::vector<BundleMember> FilesOf(const TestVector& v);

// The reading ORACLE (READER's oracle on V) as a decode: a refused file is
// refused with its rule; a format quantdiff only recognises is refused by
// `decode` even where `check` accepts it (rules.json REC-001); tensors a
// safetensors header cannot hold are decode's refusal (ST-004/005/006,
// cli/decoded_output.h); else the tensors and the file decode writes.
Expectation ExpectationOf(const qd::harness::FormatEntry& reader, const qd::Outcome& oracle,
                          const TestVector& v);

// A directory vector's decode: refused with the oracle's rule, or its
// tensors as `quantdiff decode DIR` writes them (ST-004..006 as for a file).
Expectation DirExpectationOf(const qd::Outcome& oracle);

// V's decode as its own reader gives it: DirExpectationOf for a directory
// vector, else ExpectationOf(FORMAT) (FORMAT may be null for a directory).
Expectation VectorExpectation(const qd::harness::FormatEntry* format, const TestVector& v);

// "invalid" (refused), "acceptable" (accepted with warnings) or "valid".
std::string ResultOf(const qd::Outcome& oracle);

// The first error finding's rule of a refused outcome, else "".
std::string RefusingRule(const qd::Outcome& oracle);

// COUNT vectors per group for FORMAT from SEED. False with *error when the
// oracle throws on a generated file (a bug of quantdiff, not of the file).
bool BuildVectors(const qd::harness::FormatEntry& format, std::uint64_t count, std::uint64_t seed,
                  std::vector<TestVector>* out, std::string* error);

// COUNT directory vectors per group (valid directories, then one group per
// IDX rule the generators break) from SEED, read by the directory oracle.
bool BuildDirVectors(std::uint64_t count, std::uint64_t seed, std::vector<TestVector>* out, std::string* error);

}  // namespace qd::cli

#endif  // QUANTDIFF_CLI_VECTOR_SET_H_
