// make_seeds.cc: writes the deterministic seed corpus of every fuzz target
// (each family's seeds in its own unit beside this file).
//
//   qd_make_seeds [--replace] OUTDIR
//
// writes OUTDIR/<target>/<rule-or-valid>-<sha1:8> for the targets
// safetensors_header_diff, rbq_file_diff, rbq_roundtrip, rbq_matvec,
// bnb_file_diff, bnb_roundtrip, gptq_file_diff, gptq_config_diff,
// gptq_roundtrip, pt_file_diff, recognised_file_diff, model_dir_diff, awq_file_diff,
// fp8_file_diff (its seeds: fuzz/common/fp8_file_input.cc), fp8_roundtrip,
// ggml_blocks_diff, gguf_file_diff and ggml_st_file_diff.
// <rule-or-valid> is what the oracle makes of the seed (its error rule, else
// its first warning, else "valid"); <sha1:8> is the first 8 hex digits of
// the file's SHA-1 (fuzz/common/sha1.cc), as `sha1sum` prints them.
// --replace first deletes the inputs already in those folders (hidden
// files and README files are kept). Every seed comes from a fixed generator
// seed, so two runs write the same files.
#include <array>
#include <cstdio>
#include <string>

#include "fuzz/common/gguf_seeds.h"
#include "fuzz/seeds/seed_writer.h"

int main(int argc, char** argv) {
  using namespace qd::fuzz::seeds;
  bool replace = false;
  std::string out;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--replace") {
      replace = true;
    } else if (out.empty()) {
      out = arg;
    } else {
      out.clear();
      break;
    }
  }
  if (out.empty()) {
    std::fprintf(stderr, "usage: %s [--replace] OUTDIR\n", argv[0]);
    return 1;
  }
  SeedWriter writer(out, replace);
  SafetensorsSeeds(writer);
  RbqFileSeeds(writer);
  RoundtripSeeds(writer);
  MatvecSeeds(writer);
  BnbFileSeeds(writer);
  BnbRoundtripSeeds(writer);
  GptqFileSeeds(writer);
  GptqConfigSeeds(writer);
  GptqRoundtripSeeds(writer);
  PtFileSeeds(writer);
  GeneratedFileSeeds(writer, "recognised", "recognised_file_diff");
  ModelDirSeeds(writer);
  AwqFileSeeds(writer);
  Fp8FileSeeds(writer);
  Fp8RoundtripSeeds(writer);
  GgmlBlocksSeeds(writer);
  for (const qd::fuzz::GgufSeed& s : qd::fuzz::GgufFileSeeds()) {
    writer.Write("gguf_file_diff", Verdict(s.oracle), s.input);
  }
  GeneratedFileSeeds(writer, "ggml_st", "ggml_st_file_diff");
  writer.Summary();
  return 0;
}
