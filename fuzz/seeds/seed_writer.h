// seed_writer.h: how qd_make_seeds (fuzz/seeds/) writes a seed: the file
// name is what the oracle makes of it and the start of its SHA-1, so two
// runs write the same files. Shared by the per-format seed units.
#ifndef QUANTDIFF_FUZZ_SEEDS_SEED_WRITER_H_
#define QUANTDIFF_FUZZ_SEEDS_SEED_WRITER_H_

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "fuzz/common/sha1.h"
#include "quantdiff/plain_data.h"

namespace qd::fuzz::seeds {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

// What the oracle says of an outcome: error rule, else first warning, else valid.
inline std::string Verdict(const qd::Outcome& o) {
  for (const qd::Finding& f : o.findings) {
    if (f.severity == qd::Severity::kError) return f.rule;
  }
  return o.findings.empty() ? "valid" : o.findings.front().rule;
}

// A binary32 value appended little-endian.
inline void PutF32(Bytes* b, float v) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(v);
  for (int i = 0; i < 4; ++i) b->push_back(static_cast<std::uint8_t>(x >> (8 * i)));
}

class SeedWriter {
 public:
  SeedWriter(fs::path root, bool replace) : root_(std::move(root)), replace_(replace) {}

  void Write(const std::string& target, const std::string& label, const Bytes& bytes) {
    const fs::path dir = root_ / target;
    if (!prepared_[target]) {
      fs::create_directories(dir);
      if (replace_) {
        for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
          const std::string name = e.path().filename().string();
          if (e.is_regular_file() && name[0] != '.' && name.rfind("README", 0) != 0) {
            fs::remove(e.path());
          }
        }
      }
      prepared_[target] = true;
    }
    const std::string name = label + "-" + Sha1Hex(bytes).substr(0, 8);
    std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", (dir / name).c_str());
      std::exit(1);
    }
    ++count_[target];
    total_bytes_ += bytes.size();
  }

  void Summary() const {
    for (const auto& [target, n] : count_) std::printf("%-24s %d seeds\n", target.c_str(), n);
    std::printf("total %zu bytes\n", total_bytes_);
  }

 private:
  fs::path root_;
  bool replace_;
  std::map<std::string, bool> prepared_;
  std::map<std::string, int> count_;
  std::size_t total_bytes_ = 0;
};

// The seeds of each target family, in the order qd_make_seeds writes them.
void SafetensorsSeeds(SeedWriter& w);
void RbqFileSeeds(SeedWriter& w);
void RoundtripSeeds(SeedWriter& w);
void MatvecSeeds(SeedWriter& w);
void BnbFileSeeds(SeedWriter& w);
void BnbRoundtripSeeds(SeedWriter& w);
void GptqFileSeeds(SeedWriter& w);
void GptqConfigSeeds(SeedWriter& w);
void GptqRoundtripSeeds(SeedWriter& w);
void PtFileSeeds(SeedWriter& w);
void ModelDirSeeds(SeedWriter& w);
void GeneratedFileSeeds(SeedWriter& w, const char* format, const char* target);
void AwqFileSeeds(SeedWriter& w);
void Fp8FileSeeds(SeedWriter& w);
void Fp8RoundtripSeeds(SeedWriter& w);
void GgmlBlocksSeeds(SeedWriter& w);

}  // namespace qd::fuzz::seeds

#endif  // QUANTDIFF_FUZZ_SEEDS_SEED_WRITER_H_
