// replay_main.cc: the default fuzzing engine. Linked into every fuzz target
// when the build is not a libFuzzer build, it runs LLVMFuzzerTestOneInput on
// each file named on the command line and on every file in each directory
// named there (hidden files such as .gitkeep and README files skipped), one
// line per file, then a summary:
//
//   $ rbq_file_diff corpus/seeds/rbq_file_diff corpus/regressions/rbq_file_diff
//   PASS corpus/seeds/rbq_file_diff/valid-1a2b3c4d (412 bytes)
//   ...
//   17 passed, 0 failed
//
// A divergence aborts inside the target (so the test fails with the target's
// signature on stderr). A path that cannot be read, a directory without a
// single input and an empty command line are errors: exit status 1. An
// unnoticed empty corpus is how a fuzzer goes blind.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

namespace fs = std::filesystem;

bool IsInput(const fs::path& path) {
  const std::string name = path.filename().string();
  return !name.empty() && name[0] != '.' && name.rfind("README", 0) != 0;
}

bool ReadFile(const fs::path& path, std::vector<std::uint8_t>* bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  bytes->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 1;
  }
  std::vector<fs::path> files;
  int errors = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg(argv[i]);
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<fs::path> found;
      for (const fs::directory_entry& e : fs::directory_iterator(arg, ec)) {
        if (e.is_regular_file() && IsInput(e.path())) found.push_back(e.path());
      }
      if (ec) {
        std::fprintf(stderr, "ERROR cannot list %s: %s\n", argv[i], ec.message().c_str());
        ++errors;
        continue;
      }
      if (found.empty()) {
        std::fprintf(stderr, "ERROR %s holds no inputs (empty corpus)\n", argv[i]);
        ++errors;
        continue;
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(arg, ec)) {
      files.push_back(arg);
    } else {
      std::fprintf(stderr, "ERROR %s is not a file or directory\n", argv[i]);
      ++errors;
    }
  }
  int passed = 0;
  for (const fs::path& file : files) {
    std::vector<std::uint8_t> bytes;
    if (!ReadFile(file, &bytes)) {
      std::fprintf(stderr, "ERROR cannot read %s\n", file.string().c_str());
      ++errors;
      continue;
    }
    std::fprintf(stderr, "RUN  %s (%zu bytes)\n", file.string().c_str(), bytes.size());
    // An exact-size heap copy (never null, as with libFuzzer), so ASan sees
    // a read one byte past the input.
    std::unique_ptr<std::uint8_t[]> exact(new std::uint8_t[bytes.size()]);
    std::copy(bytes.begin(), bytes.end(), exact.get());
    LLVMFuzzerTestOneInput(exact.get(), bytes.size());
    std::printf("PASS %s (%zu bytes)\n", file.string().c_str(), bytes.size());
    ++passed;
  }
  std::printf("%d passed, %d failed\n", passed, errors);
  return errors == 0 ? 0 : 1;
}
