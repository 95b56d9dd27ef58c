#!/usr/bin/env bash
# Fetches one file out of a pinned npm package into quantdiff's cache,
# outside the source tree: the way the project gets outside artifacts it
# must not copy into the repository (ggml's library: fetch_ggml.sh; the
# SARIF 2.1.0 JSON schema: fetch_sarif_schema.sh).
#
# `npm pack` only downloads the tarball (no install scripts run); the tarball
# must have the pinned SHA-256, else nothing is kept. The file (and the
# package's LICENSE, when it has one) goes into
# ${QD_CACHE_DIR:-~/.cache/quantdiff}/NAME/VERSION/ in one rename, so a
# half-written cache is never seen.
#
# Usage: scripts/fetch_npm_file.sh NAME PACKAGE VERSION SHA256 MEMBER [--print-path]
#   NAME     the caller's name, for messages and the cache folder
#   MEMBER   the file's path inside the tarball (package/...)
#   Prints where the file is. Idempotent: a verified copy is kept.
#   Exit 0 when the file is there, 1 when it could not be fetched or did
#   not verify, 2 on usage errors. --print-path prints the path and exits 0
#   without fetching.
set -euo pipefail

if (($# < 5 || $# > 6)); then
  sed -n '13,19p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
readonly name="$1" package="$2" version="$3" tarball_sha256="$4" member="$5"

cache_root="${QD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/quantdiff}"
target_dir="$cache_root/$name/$version"
file="$target_dir/$(basename "$member")"

case "${6:-}" in
  "") ;;
  --print-path) echo "$file"; exit 0 ;;
  *) echo "$name: unknown argument '$6'" >&2; exit 2 ;;
esac

if [[ -f "$target_dir/.verified" && -f "$file" ]]; then
  echo "$file"
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "$name: npm is not installed (scripts/setup.sh installs it)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! (cd "$work" && npm pack --silent "$package@$version" >/dev/null 2>"$work/npm.log"); then
  echo "$name: npm pack $package@$version failed:" >&2
  sed 's/^/  /' "$work/npm.log" >&2
  exit 1
fi
tgz=$(find "$work" -maxdepth 1 -name '*.tgz' | head -n 1)
actual=$(sha256sum "$tgz" | cut -d' ' -f1)
if [[ "$actual" != "$tarball_sha256" ]]; then
  echo "$name: $package@$version has SHA-256 $actual, pinned $tarball_sha256; not used" >&2
  exit 1
fi
tar -xzf "$tgz" -C "$work" "$member"
tar -xzf "$tgz" -C "$work" package/LICENSE 2>/dev/null || true
mkdir -p "$cache_root/$name"
staging=$(mktemp -d "$cache_root/$name/.staging.XXXXXX")
cp "$work/$member" "$staging/"
[[ -f "$work/package/LICENSE" ]] && cp "$work/package/LICENSE" "$staging/"
echo "$package@$version sha256 $tarball_sha256" > "$staging/.verified"
rm -rf "$target_dir"
mv "$staging" "$target_dir"
echo "$file"
