#include "cli/vector_bundle.h"

#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "cli/output_file.h"

namespace qd::cli {
namespace {

constexpr std::size_t kBlock = 512;
constexpr std::size_t kMaxName = 100;  // ustar's name field; no prefix split needed

// An octal number of WIDTH - 1 digits and a NUL, as ustar stores numbers.
void PutOctal(char* field, std::size_t width, unsigned long long value) {
  std::snprintf(field, width, "%0*llo", static_cast<int>(width - 1), value);
}

// The 512-byte ustar header of a regular file (POSIX.1-1988 layout: name 0,
// mode 100, uid 108, gid 116, size 124, mtime 136, checksum 148, typeflag
// 156, magic 257, version 263).
std::string UstarHeader(const std::string& name, std::size_t size, const std::string& link_target) {
  std::string header(kBlock, '\0');
  std::memcpy(&header[0], name.data(), name.size());
  PutOctal(&header[100], 8, link_target.empty() ? 0644 : 0777);
  PutOctal(&header[108], 8, 0);
  PutOctal(&header[116], 8, 0);
  PutOctal(&header[124], 12, size);
  PutOctal(&header[136], 12, 0);
  header[156] = link_target.empty() ? '0' : '2';  // a regular file, or a symbolic link
  std::memcpy(&header[157], link_target.data(), link_target.size());  // linkname
  std::memcpy(&header[257], "ustar", 6);  // with its NUL
  std::memcpy(&header[263], "00", 2);
  // The checksum: the byte sum with the checksum field read as spaces,
  // stored as six octal digits, a NUL and a space.
  std::memset(&header[148], ' ', 8);
  unsigned sum = 0;
  for (const char c : header) sum += static_cast<unsigned char>(c);
  std::snprintf(&header[148], 7, "%06o", sum);
  header[155] = ' ';
  return header;
}

}  // namespace

bool WriteNewMember(const std::string& dir, const BundleMember& member, std::string* error) {
  const std::filesystem::path path = std::filesystem::path(dir) / member.path;
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(path, ec))) {
    *error = "refusing to replace " + path.string() + ": it exists and is not listed by the earlier export's JSON";
    return false;
  }
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) {
    *error = "cannot create " + path.parent_path().string() + ": " + ec.message();
    return false;
  }
  if (!member.link_target.empty()) {
    std::filesystem::create_symlink(member.link_target, path, ec);
    if (ec) *error = "cannot create the link " + path.string() + ": " + ec.message();
    return !ec;
  }
  return WriteFileAtomic(path.string(), member.bytes, {}, error);
}

bool GzipTarBundle(const std::vector<BundleMember>& members, std::string* bundle,
                   std::string* error) {
  std::string tar;
  for (const BundleMember& m : members) {
    if (m.path.empty() || m.path.size() > kMaxName || m.link_target.size() > kMaxName) {
      *error = "bundle member name '" + m.path + "' does not fit a ustar header (1 to 100 bytes)";
      return false;
    }
    tar += UstarHeader(m.path, m.bytes.size(), m.link_target);
    tar += m.bytes;
    tar.append((kBlock - m.bytes.size() % kBlock) % kBlock, '\0');
  }
  tar.append(2 * kBlock, '\0');  // the end-of-archive marker

  z_stream z{};
  // windowBits 15 + 16: a gzip wrapper, whose header zlib writes with mtime 0.
  if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    *error = "zlib: deflateInit2 failed";
    return false;
  }
  bundle->assign(deflateBound(&z, tar.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(tar.data());
  z.avail_in = static_cast<uInt>(tar.size());
  z.next_out = reinterpret_cast<Bytef*>(bundle->data());
  z.avail_out = static_cast<uInt>(bundle->size());
  const int rc = deflate(&z, Z_FINISH);
  bundle->resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) {
    *error = "zlib: deflate did not finish";
    return false;
  }
  return true;
}

}  // namespace qd::cli
