#!/usr/bin/env bash
# Fetches ggml's own build, the third reader quantdiff compares its GGUF
# block codecs against (issue 12; README "ggml, the third reader").
#
# ggml ships as a prebuilt library in the npm package @node-llama-cpp/linux-x64
# (bins/linux-x64/libggml-base.so: plain C exports dequantize_row_<type>,
# quantize_row_<type>_ref, ggml_validate_row_data, gguf_*). A package made for
# the job rather than building llama.cpp here: no compiler flags of ours touch
# it, and the version is pinned with its SHA-256 (scripts/fetch_npm_file.sh
# fetches and verifies). It is loaded with dlopen by thirdparty/ggml/, never
# linked into codecs/ or oracles/.
#
# Usage: scripts/fetch_ggml.sh [--print-path]
#   Prints where the library is. Idempotent: a verified copy is kept.
#   Exit 0 when the library is there, 1 when it could not be fetched or did
#   not verify (nothing is left in the cache then), 2 on usage errors.
set -euo pipefail

case "${1:-}" in
  -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
exec "$(dirname "$0")/fetch_npm_file.sh" ggml "@node-llama-cpp/linux-x64" 3.21.1 \
  4b5b65a8b2611d8af94349b02d815c0f424a30a0a19aef2be5db25ecfef6730f \
  package/bins/linux-x64/libggml-base.so "$@"
