#!/bin/bash
# usage: lab/recipe/screen.sh CORE RUN GEN...: the ship rule's cheapest part for each of a run's graded snapshots
# (lab/recipe/grade.sh wrote RUN/grades/gen_NNNN.onnx): its built file (the shipped book) graded in the `numpy`
# runtime under the Kaggle clock on Begin-Hard, then Begin-Medium (the sets where the shipped file errs in
# numpy), on core CORE.  Writes RUN/screen/gen_NNNN/{sub.py,pons_numpy_SET.json}; a file already written is kept
# (rerun to resume); LIMIT=N grades N positions a set (a quick check of the script).  Time it on a core nothing else
# uses.  A snapshot level with the shipped file on both gets the whole rule: MODEL=RUN/grades/gen_NNNN.onnx
# lab/book/measure.sh ... then lab/ship_rule.py.
set -e
core=$1; run=$2; shift 2; bin=${BIN:-.venv/bin}
[ -n "$run" ] && [ $# -gt 0 ] || { echo "usage: $0 CORE RUN GEN..." >&2; exit 2; }
for gen in "$@"; do
  name=$(printf "gen_%04d" "$gen"); out="$run/screen/$name"
  mkdir -p "$out"
  [ -f "$out/sub.py" ] || "$bin/connectx-az" build --model "$run/grades/$name.onnx" --out "$out/sub.py"
  for set in Begin-Hard Begin-Medium; do
    f="$out/pons_numpy_$set.json"
    [ -f "$f" ] || { taskset -c "$core" "$bin/connectx-az" eval pons --submission "$out/sub.py" --runtime numpy \
                       --sets "$set" ${LIMIT:+--limit "$LIMIT"} --json > "$f.tmp" && mv "$f.tmp" "$f"; }
    echo "$(date -u +%FT%TZ) $f: $(python3 -c 'import json, sys
for sets in json.load(open(sys.argv[1])).values():
    for name, grade in sets.items(): print(len(grade["mistakes"]), "mistakes of", grade["n"])' "$f")"
  done
done
