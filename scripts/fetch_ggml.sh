#!/usr/bin/env bash
# Fetches ggml's own build, the third reader quantdiff compares its GGUF
# block codecs against (issue 12; README "ggml, the third reader").
#
# ggml ships as a prebuilt library in the npm package @node-llama-cpp/linux-x64
# (bins/linux-x64/libggml-base.so: plain C exports dequantize_row_<type>,
# quantize_row_<type>_ref, ggml_validate_row_data, gguf_*). A package made for
# the job rather than building llama.cpp here: no compiler flags of ours touch
# it, and the version is pinned with its SHA-256. `npm pack` only downloads the
# tarball (no install scripts run); the library is unpacked into a cache
# folder outside the source tree and loaded with dlopen by thirdparty/ggml/,
# never linked into codecs/ or oracles/.
#
# Usage: scripts/fetch_ggml.sh [--print-path]
#   Prints where the library is. Idempotent: a verified copy is kept.
#   Exit 0 when the library is there, 1 when it could not be fetched or did
#   not verify (nothing is left in the cache then), 2 on usage errors.
set -euo pipefail

readonly package="@node-llama-cpp/linux-x64"
readonly version="3.21.1"
readonly tarball_sha256="4b5b65a8b2611d8af94349b02d815c0f424a30a0a19aef2be5db25ecfef6730f"
readonly member="package/bins/linux-x64/libggml-base.so"

cache_root="${QD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/quantdiff}"
target_dir="$cache_root/ggml/$version"
library="$target_dir/libggml-base.so"

case "${1:-}" in
  "") ;;
  --print-path) echo "$library"; exit 0 ;;
  -h|--help)
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
    exit 0 ;;
  *) echo "fetch_ggml: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

if [[ -f "$target_dir/.verified" && -f "$library" ]]; then
  echo "$library"
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "fetch_ggml: npm is not installed (scripts/setup.sh installs it)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! (cd "$work" && npm pack --silent "$package@$version" >/dev/null 2>"$work/npm.log"); then
  echo "fetch_ggml: npm pack $package@$version failed:" >&2
  sed 's/^/  /' "$work/npm.log" >&2
  exit 1
fi
tgz=$(find "$work" -maxdepth 1 -name '*.tgz' | head -n 1)
actual=$(sha256sum "$tgz" | cut -d' ' -f1)
if [[ "$actual" != "$tarball_sha256" ]]; then
  echo "fetch_ggml: $package@$version has SHA-256 $actual, pinned $tarball_sha256; not used" >&2
  exit 1
fi
tar -xzf "$tgz" -C "$work" "$member" package/LICENSE
# Into place in one rename, so a half-written cache is never seen.
mkdir -p "$cache_root/ggml"
staging=$(mktemp -d "$cache_root/ggml/.staging.XXXXXX")
cp "$work/$member" "$work/package/LICENSE" "$staging/"
echo "$package@$version sha256 $tarball_sha256" > "$staging/.verified"
rm -rf "$target_dir"
mv "$staging" "$target_dir"
echo "$library"
