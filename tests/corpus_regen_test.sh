#!/usr/bin/env bash
# corpus_regen_test.sh MAKE_SEEDS QUANTDIFF CORPUS_DIR WORK_DIR
#
# The ctest corpus/regenerate-seeds-and-vectors (label corpus): corpus/seeds
# and corpus/vectors are exactly what `qd_make_seeds DIR` and `quantdiff
# export-vectors --out DIR` write with this build (GCC or clang alike). Both
# are written into WORK_DIR (emptied first) and compared byte for byte with
# the committed folders; hidden and README files are not corpus files. On a
# difference it names the first differing file, lists the others and fails.
set -euo pipefail
if [[ $# -ne 4 ]]; then
  echo "usage: $0 MAKE_SEEDS QUANTDIFF CORPUS_DIR WORK_DIR" >&2
  exit 2
fi
make_seeds=$1
quantdiff=$2
corpus=${3%/}
work=${4%/}

rm -rf "$work"
mkdir -p "$work"
"$make_seeds" "$work/seeds" > "$work/make_seeds.log"
"$quantdiff" export-vectors --out "$work/vectors" > "$work/export_vectors.log" 2>&1

differences=()
for kind in seeds vectors; do
  rc=0
  out=$(LC_ALL=C diff -rq -x '.*' -x 'README*' "$corpus/$kind" "$work/$kind") || rc=$?
  if [[ $rc -gt 1 ]]; then
    echo "diff failed on $corpus/$kind and $work/$kind:" >&2
    echo "$out" >&2
    exit 2
  fi
  # One line a file: corpus/<kind>/<path>: what differs.
  while IFS= read -r line; do
    [[ -z $line ]] && continue
    case $line in
      "Files $corpus/"*" differ")
        rest=${line#"Files $corpus/"}
        differences+=("corpus/${rest%% and *}: bytes differ") ;;
      "Only in $corpus/"*)
        rest=${line#"Only in $corpus/"}
        differences+=("corpus/${rest%%: *}/${rest#*: }: committed, not regenerated") ;;
      "Only in $work/"*)
        rest=${line#"Only in $work/"}
        differences+=("corpus/${rest%%: *}/${rest#*: }: regenerated, not committed") ;;
      *) differences+=("$line") ;;
    esac
  done <<< "$out"
done

if [[ ${#differences[@]} -eq 0 ]]; then
  echo "corpus/seeds and corpus/vectors regenerate byte for byte"
  exit 0
fi
mapfile -t sorted < <(printf '%s\n' "${differences[@]}" | LC_ALL=C sort)
echo "first differing file: ${sorted[0]}"
echo "${#sorted[@]} differences (regenerated files in $work):"
printf '  %s\n' "${sorted[@]:0:40}"
[[ ${#sorted[@]} -gt 40 ]] && echo "  ..."
echo "The generators no longer write the committed corpus with this compiler. If that is"
echo "meant, regenerate it (qd_make_seeds --replace corpus/seeds; quantdiff export-vectors"
echo "--out corpus/vectors) and check that the GCC and the clang build write the same files."
exit 1
