// pt_peer_cases.h: what the .pt peer tests share about ${QD_PEER_DIR}/pt:
// the manifest, the rule docs/pt.md assigns to each reject case (the
// manifest names only a category such as PT-global), and SHA-256 (Nettle) of
// a tensor's bytes as the manifest's tensor_sha256 gives it.
#ifndef QUANTDIFF_TESTS_PEER_PT_PEER_CASES_H_
#define QUANTDIFF_TESTS_PEER_PT_PEER_CASES_H_

#include <nettle/sha2.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qdtest::pt_peer {

inline const std::filesystem::path kDir = QD_PEER_PT_DIR;
// What the hostile pickles would create if anything ran them.
inline constexpr char kPwned[] = "/tmp/quantdiff_pwned";

inline std::string Sha256Hex(const std::vector<std::uint8_t>& bytes) {
  sha256_ctx ctx;
  sha256_init(&ctx);
  sha256_update(&ctx, bytes.size(), bytes.data());
  std::uint8_t digest[SHA256_DIGEST_SIZE];
  sha256_digest(&ctx, SHA256_DIGEST_SIZE, digest);
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::uint8_t b : digest) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

inline nlohmann::json Manifest() {
  std::ifstream in(kDir / "manifest.json");
  return nlohmann::json::parse(in);
}

// docs/pt.md section 9 (peer case column) and section 12 (offsets, fields).
//
// crc_mismatch.pt, as corrected upstream: it differs from gptq4_sd.pt in
// byte 709 only, inside the stored data of gptq4_sd/data/0, so every header
// agrees and the CRC-32 check refuses it: PT-008, field crc32, at that
// entry's data start (docs/pt.md 2.4 and 8). The offset, read by hand from the
// file's ZIP structure (struct offsets of APPNOTE 4.3.7, 4.3.12, 4.3.16):
// the end record at n - 22 = 11215 gives 6 entries and cd_off 10770; the
// second central entry, at 10833, is gptq4_sd/data/0 with size 8192 and
// local header offset h = 597; that local header's name length is 15 and its
// extra length 62 (the FB padding), so the data start is
// h + 30 + 15 + 62 = 704, and 704 <= 709 < 704 + 8192.
struct Expected {
  const char* category;
  const char* rule;
  const char* field;
  std::int64_t offset;
};
inline const std::map<std::string, Expected> kRejects = {
    {"legacy_format.pt", {"PT-legacy", "PT-001", "format", 0}},
    {"hostile_os_system.pt", {"PT-global", "PT-011", "global", 59}},
    {"hostile_stack_global.pt", {"PT-global", "PT-011", "global", 80}},
    {"hostile_eval.pt", {"PT-global", "PT-011", "global", 51}},
    {"hostile_deep_marks.pt", {"PT-limits", "PT-012", "marks", 304}},
    {"zip_traversal.pt", {"PT-zip", "PT-004", "name", 62}},
    {"crc_mismatch.pt", {"PT-zip", "PT-008", "crc32", 704}},
};

}  // namespace qdtest::pt_peer

#endif  // QUANTDIFF_TESTS_PEER_PT_PEER_CASES_H_
