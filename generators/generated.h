// generated.h: what a generator hands back and the random source it draws
// from. It lives in the generators layer so that generators sit below the
// format registry (harness/registry.h includes this header and re-exports
// the names as qd::Rng and qd::Generated; nothing under
// generators/ includes harness/).
#ifndef QUANTDIFF_GENERATORS_GENERATED_H_
#define QUANTDIFF_GENERATORS_GENERATED_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "quantdiff/plain_data.h"

namespace qd::gen {

// Every generator draws from one std::mt19937_64 in a fixed order, so a seed
// names one instance (corpus/seeds and corpus/vectors depend on it).
using Rng = std::mt19937_64;

// A generated instance: file bytes and the rule it was built to violate
// ("" for a valid instance, which both readers must accept).
struct Generated {
  std::vector<std::uint8_t> bytes;
  std::string expected_rule;
  std::string description;
  // Files the readers are given beside bytes (a GPTQ quantize config), in
  // priority order; empty for formats that need none.
  std::vector<qd::SideFile> side_files;
};

// One entry of a generated model directory (docs/model_dir.md section 1).
struct GeneratedDirFile {
  std::string name;
  qd::DirEntryKind kind = qd::DirEntryKind::kRegular;
  std::vector<std::uint8_t> bytes;  // regular entries only
};

// A generated model directory and the rule it was built to break ("" for a
// valid one, which both directory readers must accept).
struct GeneratedDir {
  std::vector<GeneratedDirFile> files;
  std::string expected_rule;
  std::string description;
  // The listing both readers get: dir as given, prefix dir + "/", entries
  // sorted by name bytes, views into files (valid while *this lives and is
  // not modified). Defined in generators/model_dir.cc.
  qd::ModelDirListing Listing(const std::string& dir = "generated") const;
};

}  // namespace qd::gen

#endif  // QUANTDIFF_GENERATORS_GENERATED_H_
