#!/usr/bin/env bash
# run_fuzzers.sh: builds the `fuzz` preset (clang, libFuzzer, ASan+UBSan) and
# runs every fuzz target, one after the other, for SECONDS each.
#
#   fuzz/run_fuzzers.sh [SECONDS] [TARGET...]      (default: 60, all targets)
#
# Each target starts from a scratch copy of corpus/seeds/<target> (the seeds
# are never written to) with its dictionary. At the end the script prints
# the executions per second of every target. A crash (divergence, sanitizer
# report, timeout, OOM) makes the exit status non-zero, and its input is
# copied to corpus/regressions/<target>/<rule>-<sha1:8>, where <rule> comes
# from the target's `DIFF:<target>:<kind>:<rule>` signature line (or the
# sanitizer's error kind).
#
# Environment: QD_FUZZ_BUILD_DIR overrides the build folder (default: the
# preset's build/fuzz); QD_FUZZ_JOBS the build parallelism (default 2);
# QD_FUZZ_KEEP=1 keeps the scratch folders; QD_FUZZ_CORPUS_DIR=DIR keeps each
# target's working corpus in DIR/<target> across runs (the seeds are added to
# it, never removed: what the nightly job uses); QD_FUZZ_KEEP_GOING=1 runs
# libFuzzer in fork mode with one worker (-fork=1 -ignore_crashes=1), so a
# known divergence does not end the run; one input per signature is kept.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-60}"
shift || true
all_targets=(safetensors_header_diff rbq_file_diff rbq_roundtrip rbq_matvec bnb_file_diff
             bnb_roundtrip gptq_file_diff gptq_config_diff gptq_roundtrip pt_file_diff
             recognised_file_diff model_dir_diff ggml_blocks_diff fp8_file_diff fp8_roundtrip gguf_file_diff ggml_st_file_diff)
if [[ $# -gt 0 ]]; then targets=("$@"); else targets=("${all_targets[@]}"); fi
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -eq 0 ]]; then
  echo "usage: $0 [SECONDS] [TARGET...]" >&2
  exit 2
fi

max_len_of() {
  case "$1" in
    safetensors_header_diff) echo 4096 ;;
    rbq_file_diff) echo 8192 ;;         # op lists, or whole files in raw mode
    rbq_roundtrip) echo 4200 ;;         # 8 rows x 128 columns x 4 bytes + tail
    rbq_matvec) echo 4096 ;;            # 64 Q8B32 blocks + 256 floats + tail
    bnb_file_diff) echo 8192 ;;         # op lists, or whole files in raw mode
    bnb_roundtrip) echo 16388 ;;        # 4096 binary32 values + tail (or repeated)
    gptq_file_diff) echo 16384 ;;       # op lists, or config sources + whole files in raw mode
    gptq_config_diff) echo 4096 ;;      # one or two config sources
    gptq_roundtrip) echo 34000 ;;       # K*N codes (<= 272 x 128) + G*N zeros + tail
    pt_file_diff) echo 16384 ;;         # op lists, or whole files in raw mode
    recognised_file_diff) echo 16384 ;; # a config (EXL3's tensor_storage) + a whole file
    ggml_st_file_diff) echo 16384 ;;    # a quantize config + a whole GGUF-family file
    model_dir_diff) echo 32768 ;;       # whole directories: index, shards, configs
    fp8_file_diff) echo 8192 ;;         # edits + tail, or config sources + a whole file in raw mode
    fp8_roundtrip) echo 4104 ;;         # 16 x 64 binary32 weights + tail
    *) echo 4096 ;;
  esac
}
dict_of() {
  case "$1" in
    safetensors_header_diff) echo "$root/fuzz/safetensors_header.dict" ;;
    rbq_file_diff) echo "$root/fuzz/rbq_file.dict" ;;
    bnb_file_diff) echo "$root/fuzz/bnb_file.dict" ;;
    gptq_file_diff) echo "$root/fuzz/gptq_file.dict" ;;
    gptq_config_diff) echo "$root/fuzz/gptq_config.dict" ;;
    pt_file_diff) echo "$root/fuzz/pt_file.dict" ;;
    model_dir_diff) echo "$root/fuzz/model_dir.dict" ;;
    *) echo "" ;;
  esac
}

# ---- build ---------------------------------------------------------------
jobs="${QD_FUZZ_JOBS:-2}"
cd "$root"
if [[ -n "${QD_FUZZ_BUILD_DIR:-}" ]]; then
  build="$QD_FUZZ_BUILD_DIR"
  cmake --preset fuzz -B "$build" >/dev/null
  cmake --build "$build" -j "$jobs" --target "${targets[@]}"
else
  build="$root/build/fuzz"
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j "$jobs" --target "${targets[@]}"
fi

# ---- run -----------------------------------------------------------------
scratch="$(mktemp -d "${TMPDIR:-/tmp}/qd-fuzz.XXXXXX")"
if [[ "${QD_FUZZ_KEEP:-0}" != 1 ]]; then trap 'rm -rf "$scratch"' EXIT; fi
declare -A rate units verdict
failed=0

for t in "${targets[@]}"; do
  bin="$build/fuzz/$t"
  [[ -x "$bin" ]] || { echo "no binary $bin" >&2; exit 2; }
  work="$scratch/$t"
  if [[ -n "${QD_FUZZ_CORPUS_DIR:-}" ]]; then
    live="$QD_FUZZ_CORPUS_DIR/$t"
  else
    live="$work/corpus"
  fi
  mkdir -p "$live" "$work/artifacts"
  if [[ -d "corpus/seeds/$t" ]]; then
    find "corpus/seeds/$t" -maxdepth 1 -type f ! -name '.*' ! -name 'README*' \
      -exec cp -n {} "$live/" \;
  fi
  if [[ -z "$(ls -A "$live")" ]]; then
    echo "WARNING: corpus/seeds/$t is empty; fuzzing from nothing" >&2
  fi
  args=(-max_total_time="$seconds" -max_len="$(max_len_of "$t")" -timeout=25
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/artifacts/")
  if [[ "${QD_FUZZ_KEEP_GOING:-0}" == 1 ]]; then
    args+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  fi
  dict="$(dict_of "$t")"
  [[ -n "$dict" ]] && args+=(-dict="$dict")
  echo "==> $t for ${seconds}s (log: $work/log)"
  status=0
  start=$(date +%s.%N)
  "$bin" "${args[@]}" "$live" >"$work/log" 2>&1 || status=$?
  end=$(date +%s.%N)
  n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
  # Fork mode prints no final stats: take the last "#<runs>" status line.
  [[ -n "$n" ]] || n=$(grep -oE '^#[0-9]+' "$work/log" | tail -1 | tr -d '#')
  n="${n:-0}"
  units[$t]="$n"
  rate[$t]=$(awk -v n="$n" -v a="$start" -v b="$end" 'BEGIN { d = b - a; printf "%.0f", (d > 0 ? n / d : 0) }')
  verdict[$t]="ok"

  shopt -s nullglob
  crashes=("$work"/artifacts/crash-* "$work"/artifacts/leak-* "$work"/artifacts/timeout-* \
           "$work"/artifacts/oom-* "$work"/artifacts/slow-unit-*)
  shopt -u nullglob
  if [[ $status -ne 0 || ${#crashes[@]} -gt 0 ]]; then
    failed=1
    declare -A saved=()
    sigs=""
    # Smallest first, so the input kept for a signature is the smallest one.
    mapfile -t crashes < <(ls -S -r "${crashes[@]}" 2>/dev/null || true)
    for c in "${crashes[@]}"; do
      # The signature of this input alone: replay it once.
      "$bin" -runs=1 -timeout=25 -rss_limit_mb=2048 "$c" >"$c.replay" 2>&1 || true
      sig=$(grep -m1 -o '^DIFF:[^ ]*' "$c.replay" || true)
      if [[ -n "$sig" ]]; then
        # DIFF:<target>:<kind>:<rule-or-part>: a rule ID names the file alone,
        # anything else keeps its kind (e.g. bound-avx2).
        kind=$(cut -d: -f3 <<<"$sig")
        what=$(cut -d: -f4- <<<"$sig")
        if [[ "$what" =~ ^[A-Z][A-Z0-9]*-[0-9]+$ ]]; then label="$what"; else label="$kind-$what"; fi
      else
        # Most specific first: UBSan's check, a sanitizer's error kind, then
        # libFuzzer's own verdict (timeout, out-of-memory, deadly signal).
        sig=$(grep -m1 -ohE 'runtime error: [a-z ]+[a-z]' "$c.replay" || true)
        [[ -n "$sig" ]] || sig=$(grep -m1 -ohE 'ERROR: (Address|Leak|Memory)Sanitizer: [A-Za-z-]+' "$c.replay" || true)
        [[ -n "$sig" ]] || sig=$(grep -m1 -ohE 'ERROR: libFuzzer: [A-Za-z-]+' "$c.replay" || true)
        [[ -n "$sig" ]] || sig="$(basename "$c" | cut -d- -f1)"
        label=$(sed -E 's/^ERROR: //; s/Sanitizer//; s/: /-/; s/ +$//; s/ /-/g' <<<"$sig" | tr 'A-Z' 'a-z')
      fi
      label=$(tr -c 'A-Za-z0-9._\n-' '-' <<<"$label" | head -c 60)
      [[ -z "${saved[$label]:-}" ]] || continue
      saved[$label]=1
      sigs+="${sigs:+ }$sig"
      hash=$(sha1sum "$c" | cut -c1-8)
      dest="corpus/regressions/$t/$label-$hash"
      mkdir -p "corpus/regressions/$t"
      cp "$c" "$dest"
      echo "    $sig -> saved $dest"
      grep -m1 -A1 '^DIFF:' "$c.replay" | tail -1 | sed 's/^/      /' || true
    done
    unset saved
    verdict[$t]="CRASH ${sigs:-exit status $status}"
    if [[ ${#crashes[@]} -eq 0 ]]; then
      echo "    exit status $status without an artifact; the log ends:" >&2
      tail -20 "$work/log" >&2
    fi
  fi
done

# ---- summary ---------------------------------------------------------------
echo
echo "machine: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)"
printf '%-26s %12s %10s  %s\n' target executions exec/s verdict
for t in "${targets[@]}"; do
  printf '%-26s %12s %10s  %s\n' "$t" "${units[$t]}" "${rate[$t]}" "${verdict[$t]}"
done
exit "$failed"
