#!/usr/bin/env bash
# resources.sh QUANTDIFF [WORK_DIR]: wall time, user time and peak RSS
# (/usr/bin/time) of quantdiff on the hostile inputs of issue 9, section 3
# (bench/resources_inputs.py; needs ../shared/peer/models for the GPTQ ones).
# Numbers are for reading, not asserting: the ctest label `hostile` asserts
# exit codes and the memory bound, never time.
set -uo pipefail
quantdiff=$1
work=${2:-$(mktemp -d)}
here=$(cd "$(dirname "$0")" && pwd)
python3 "$here/resources_inputs.py" "$work/in" "$here/../../shared/peer/models" || exit 2
in=$work/in
out=$work/out
mkdir -p "$out"
run() {
  local label=$1
  shift
  /usr/bin/time -f "%e %U %M %x" -o "$work/time.txt" "$@" >/dev/null 2>"$work/stderr.txt"
  read -r wall user rss code < <(tail -1 "$work/time.txt")
  printf "%-26s %7ss wall %7ss user %8d KB  exit %s\n" "$label" "$wall" "$user" "$rss" "$code"
}
run "decode many_tensors.pt" "$quantdiff" decode "$in/many_tensors.pt" --out "$out/a.safetensors"
run "diff many_tensors.pt" "$quantdiff" diff "$in/many_tensors.pt"
run "decode many_tensors.st" "$quantdiff" decode "$in/many_tensors.safetensors" --out "$out/b.safetensors"
run "check many_tensors.st" "$quantdiff" check "$in/many_tensors.safetensors"
run "diff many_tensors.st" "$quantdiff" diff "$in/many_tensors.safetensors"
run "convert meta 90k" "$quantdiff" convert "$in/meta/model.safetensors" --to gptq_v2 --out "$out/c.safetensors"
run "check meta 90k" "$quantdiff" check "$in/meta/model.safetensors"
run "decode stride0.pt" "$quantdiff" decode "$in/stride0.pt" --out "$out/d.safetensors"
run "diff stride0.pt" "$quantdiff" diff "$in/stride0.pt"
run "check stride0.pt" "$quantdiff" check "$in/stride0.pt"
run "check big_array.st" "$quantdiff" check "$in/big_array.safetensors"
run "diff big_array.st" "$quantdiff" diff "$in/big_array.safetensors"
run "check bigcfg" "$quantdiff" check "$in/bigcfg/model.safetensors"
run "diff bigcfg" "$quantdiff" diff "$in/bigcfg/model.safetensors"
