// vector_bundle.h: `export-vectors --gzip`, the whole export as one file.
//
// Layout (README "Portable vectors"): a POSIX ustar archive, compressed as
// one gzip member by zlib (deflate, level 9; gzip header with no file name,
// mtime 0 and zlib's OS byte). Its members are the files the folder export
// writes, under the same relative paths (schema.json, then for each format
// FORMAT.json followed by the files it lists in tcId order), each a regular
// file with mode 0644 (a symbolic link, mode 0777, where a model-directory
// vector holds one), uid and gid 0, empty owner names and mtime 0; no
// directory members (tar creates the folders). `tar -xzf BUNDLE` gives the
// folder `export-vectors --out DIR` writes, byte for byte, and the same
// arguments give the same bundle.
#ifndef QUANTDIFF_CLI_VECTOR_BUNDLE_H_
#define QUANTDIFF_CLI_VECTOR_BUNDLE_H_

#include <string>
#include <vector>

namespace qd::cli {

struct BundleMember {
  std::string path;   // relative, '/'-separated, at most 100 bytes
  std::string bytes;
  // Not empty: the member is a symbolic link to this relative target (a
  // model-directory vector's link out of its folder), bytes empty.
  std::string link_target = {};
};

// Writes MEMBER under DIR (its folders created, a link as a link); a path
// that exists is never replaced: false with *error, as for a write error.
bool WriteNewMember(const std::string& dir, const BundleMember& member, std::string* error);

// The gzip-compressed ustar archive of MEMBERS in the order given, or
// false with *error (a path over 100 bytes, a zlib failure).
bool GzipTarBundle(const std::vector<BundleMember>& members, std::string* bundle,
                   std::string* error);

}  // namespace qd::cli

#endif  // QUANTDIFF_CLI_VECTOR_BUNDLE_H_
