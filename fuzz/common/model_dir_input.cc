// model_dir_input.cc: the framing of fuzz/common/model_dir_input.h.
#include "fuzz/common/model_dir_input.h"

#include <algorithm>
#include <set>
#include <string>

namespace qd::fuzz {
namespace {

constexpr char kKindBytes[] = {'r', 'e', 'o'};  // in DirEntryKind order

qd::DirEntryKind KindOf(std::uint8_t byte) {
  for (int k = 0; k < 3; ++k) {
    if (byte == static_cast<std::uint8_t>(kKindBytes[k])) return static_cast<qd::DirEntryKind>(k);
  }
  return static_cast<qd::DirEntryKind>(byte % 3);
}

// A name no directory lists (docs/model_dir.md 1: entries directly in D).
bool Listable(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('\0') == std::string_view::npos;
}

}  // namespace

qd::ModelDirListing ModelDirListingFromInput(const std::uint8_t* data, std::size_t size) {
  qd::ModelDirListing listing;
  listing.dir = std::string(kModelDirName);
  listing.prefix = listing.dir + "/";
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::set<std::string, std::less<>> seen;
  std::size_t start = 0;
  while (start <= input.size()) {
    std::size_t stop = input.find(kModelDirSeparator, start);
    if (stop == std::string_view::npos) stop = input.size();
    const std::string_view entry = input.substr(start, stop - start);
    start = stop + kModelDirSeparator.size();
    if (entry.empty()) continue;
    const std::string_view rest = entry.substr(1);
    const std::size_t slash = rest.find('/');
    const std::string_view name = rest.substr(0, slash);
    if (!Listable(name) || !seen.insert(std::string(name)).second) continue;
    qd::DirEntry e;
    e.name = std::string(name);
    e.kind = KindOf(static_cast<std::uint8_t>(entry[0]));
    if (e.kind == qd::DirEntryKind::kRegular && slash != std::string_view::npos) {
      const std::string_view bytes = rest.substr(slash + 1);
      e.bytes = {reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()};
    }
    listing.entries.push_back(std::move(e));
  }
  std::sort(listing.entries.begin(), listing.entries.end(),
            [](const qd::DirEntry& a, const qd::DirEntry& b) { return a.name < b.name; });
  return listing;
}

std::vector<std::uint8_t> ModelDirInput(const qd::gen::GeneratedDir& dir) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i < dir.files.size(); ++i) {
    const qd::gen::GeneratedDirFile& f = dir.files[i];
    if (i > 0) out.insert(out.end(), kModelDirSeparator.begin(), kModelDirSeparator.end());
    out.push_back(static_cast<std::uint8_t>(kKindBytes[static_cast<int>(f.kind)]));
    out.insert(out.end(), f.name.begin(), f.name.end());
    out.push_back('/');
    out.insert(out.end(), f.bytes.begin(), f.bytes.end());
  }
  return out;
}

}  // namespace qd::fuzz
