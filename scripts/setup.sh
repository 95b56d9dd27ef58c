#!/usr/bin/env bash
# Installs the Debian 12 packages quantdiff builds with, when any is missing.
# Idempotent: on a machine that has them all it runs no apt command at all.
set -euo pipefail

packages=(cmake ninja-build g++ clang libclang-rt-14-dev librapidcheck-dev
          nlohmann-json3-dev zlib1g-dev libgtest-dev libgmock-dev libbenchmark-dev
          pkgconf nettle-dev
          # scripts/test builds through it when present: reruns compile what changed.
          ccache
          # The report tests' validators (tests/cli/test_impl_test.cc,
          # TestImplReports): xmllint, jsonschema, headless Chromium;
          # jsonschema also for corpus/vectors-schema.
          libxml2-utils python3-jsonschema chromium
          # The outside readers under test (README "Outside readers under
          # test"): examples/py_reader needs numpy, examples/torch_load torch
          # 1.13.1; about 148 MB of archives, 637 MB installed (177 packages).
          python3-numpy python3-torch)
# npm fetches ggml's own build (scripts/fetch_ggml.sh); any npm will do.
command -v npm >/dev/null || packages+=(npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
    || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# ggml, the third reader of the GGUF block types (README "ggml, the third
# reader"). Without it the tests that need it are not registered (CMake says
# so); with CI=true a missing library fails the configure step instead.
if ! "$(dirname "$0")/fetch_ggml.sh" >/dev/null; then
  echo "setup: ggml could not be fetched; the tests that compare with it will not be registered" >&2
fi

# The SARIF 2.1.0 schema the report tests validate against (from a pinned
# npm package, into the same cache; never into the tree).
if ! "$(dirname "$0")/fetch_sarif_schema.sh" >/dev/null; then
  echo "setup: the SARIF schema could not be fetched; the report tests will not be registered" >&2
fi
