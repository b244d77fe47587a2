#!/bin/bash
# usage: lab/book/measure.sh CORE BOOK OUT: the file built with the opening book BOOK, graded as issue 34 asks:
# the six Pons sets under Kaggle's clock (2 s, no bank, each position executed afresh) in both runtimes, then
# 100 games a seat against `negamax`, then the duel against the perfect opponent (noise 0.2, 100 games a seat),
# each in both runtimes.  Writes OUT/sub.py, OUT/pons_RUNTIME_SET.json (merged into
# OUT/pons_RUNTIME.json), OUT/negamax_RUNTIME.json and
# OUT/duel_RUNTIME.json; a file already written is kept (rerun to resume).  RUNTIMES="numpy" (say) grades one
# runtime only, so that two cores can each take one.
# Pair with an earlier file's grades: connectx-az eval paired OUT/pons_kaggle.json:submission@2s/kaggle OTHER.json:MODE
# Time it on a core nothing else uses: the clock is what is measured.  LIMIT=N GAMES=N: a quick check of the script.
# MODEL=FILE.onnx builds with another model (a candidate to ship: the same grades, the shipped book).
# The build is shared: start a second copy only once OUT/sub.py is written.
set -e
core=$1; book=$2; out=$3; bin=${BIN:-.venv/bin}
[ -n "$out" ] || { echo "usage: $0 CORE BOOK OUT" >&2; exit 2; }
mkdir -p "$out"
[ -f "$out/sub.py" ] || "$bin/connectx-az" build --book "$book" ${MODEL:+--model "$MODEL"} --out "$out/sub.py"
runtimes=${RUNTIMES:-kaggle numpy}
for rt in $runtimes; do
  for set in Begin-Hard Begin-Medium Begin-Easy Middle-Medium Middle-Easy End-Easy; do  # a set a file: resumable
    f="$out/pons_${rt}_$set.json"
    [ -f "$f" ] || { taskset -c "$core" "$bin/connectx-az" eval pons --submission "$out/sub.py" --runtime "$rt" \
                       --sets "$set" ${LIMIT:+--limit "$LIMIT"} --json > "$f.tmp" && mv "$f.tmp" "$f"; }
    echo "$(date -u +%FT%TZ) $f"
  done
  python3 -c 'import json, sys; merged = {}
for path in sys.argv[1:]:
    for mode, sets in json.load(open(path)).items(): merged.setdefault(mode, {}).update(sets)
print(json.dumps(merged))' "$out/pons_${rt}_"*.json > "$out/pons_$rt.json"
done
for rt in $runtimes; do
  f="$out/negamax_$rt.json"
  [ -f "$f" ] || { taskset -c "$core" "$bin/connectx-az" validate "$out/sub.py" --runtime "$rt" --opponents negamax \
                     --games "${GAMES:-100}" --json > "$f.tmp" && mv "$f.tmp" "$f"; }
  echo "$(date -u +%FT%TZ) $f"
done
for rt in $runtimes; do
  f="$out/duel_$rt.json"
  [ -f "$f" ] || { taskset -c "$core" "$bin/connectx-az" duel "$out/sub.py" --games "${GAMES:-100}" --noise 0.2 --runtime "$rt" \
                     --cache "${DUEL_CACHE:-build/duel_cache.sqlite}" --json > "$f.tmp" && mv "$f.tmp" "$f"; }
  echo "$(date -u +%FT%TZ) $f"
done
