#!/bin/bash
# Equal-time comparison of issue 51: the `cpu` preset as it was (float32, 32 games in flight) against ARM_B
# (default: bfloat16 with 64 games in flight), same seed, from scratch, for HOURS of wall time each, then
# the two networks alone graded paired at MCTS 800 on Begin-Hard, Begin-Medium and Middle-Medium.
#
#   lab/precision/equal_time.sh OUT [HOURS] [CHUNK]     # run it again after a stop: it goes on
#
# Each call trains both arms at once, one per core, in chunks of CHUNK (default 30m) that stop between
# generations (`train --time-budget`), the arms swapping cores from one chunk to the next, until both have
# run HOURS (default 1; a last chunk is cut to what a run has left); then it exports and grades them (about
# 15 minutes a core). Needs both cores idle.
# A quick try of the script itself: PRESET=smoke SIMS=8 LIMIT=5 lab/precision/equal_time.sh /tmp/eq 0.001 1m
set -euo pipefail
OUT=${1:?usage: equal_time.sh OUT [HOURS] [CHUNK]}
HOURS=${2:-1}
CHUNK=${3:-30m}
PY=${PY:-.venv/bin}
PRESET=${PRESET:-cpu}
SIMS=${SIMS:-800}
LIMIT=${LIMIT:+--limit $LIMIT}
ARM_A=${ARM_A:-"--set precision=float32 --set selfplay.num_parallel_games=32"}
ARM_B=${ARM_B:-"--set precision=bfloat16 --set selfplay.num_parallel_games=64"}
mkdir -p "$OUT"

hours() {  # the generation seconds a run has summed, in hours (0 before it starts)
  [ -f "$1/metrics.jsonl" ] || { echo 0; return; }
  python3 -c "import json,sys; print(sum(json.loads(l)['seconds'] for l in open(sys.argv[1])) / 3600)" "$1/metrics.jsonl"
}
short() { python3 -c "import sys; print(float(sys.argv[1]) < float(sys.argv[2]))" "$1" "$HOURS"; }
budget() {  # CHUNK, or what the run has left of HOURS where that is less (whole minutes, at least one)
  python3 -c "import math, sys; left = (float(sys.argv[2]) - float(sys.argv[1])) * 60
chunk = sys.argv[3]; minutes = float(chunk[:-1]) * {'h': 60, 'm': 1, 's': 1 / 60}[chunk[-1]]
print(f'{max(1, math.ceil(min(left, minutes)))}m')" "$1" "$HOURS" "$CHUNK"
}

chunk=$(find "$OUT" -maxdepth 1 -name "chunk_*" | wc -l)
while [ "$(short "$(hours "$OUT/A")")" = True ] || [ "$(short "$(hours "$OUT/B")")" = True ]; do
  core_a=$((chunk % 2)); core_b=$((1 - core_a))
  for arm in A B; do
    if [ "$arm" = A ]; then core=$core_a; settings=$ARM_A; else core=$core_b; settings=$ARM_B; fi
    [ "$(short "$(hours "$OUT/$arm")")" = True ] || continue
    if [ -f "$OUT/$arm/config.json" ]; then
      taskset -c "$core" "$PY/connectx-az" train --resume "$OUT/$arm" --threads 1 \
        --time-budget "$(budget "$(hours "$OUT/$arm")")" --quiet \
        >> "$OUT/$arm.log" 2>&1 &
    else
      # shellcheck disable=SC2086
      taskset -c "$core" "$PY/connectx-az" train "$OUT/$arm" --preset "$PRESET" --threads 1 --time-budget "$CHUNK" \
        $settings --quiet >> "$OUT/$arm.log" 2>&1 &
    fi
  done
  wait
  touch "$OUT/chunk_$chunk"; chunk=$((chunk + 1))
  echo "chunk $chunk: A $(hours "$OUT/A") h, B $(hours "$OUT/B") h"
done

for arm in A B; do
  [ -f "$OUT/$arm.onnx" ] || "$PY/connectx-az" export "$OUT/$arm" --out "$OUT/$arm.onnx" > /dev/null
done
core=0
for arm in A B; do
  [ -f "$OUT/$arm.pons.json" ] || taskset -c $core "$PY/connectx-az" eval pons --model "$OUT/$arm.onnx" --sims "$SIMS" \
    --sets Begin-Hard Begin-Medium Middle-Medium $LIMIT --json > "$OUT/$arm.pons.json" &
  core=1
done
wait
for arm in A B; do
  python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(sys.argv[2], len(rows), 'generations', round(sum(r['seconds'] for r in rows) / 3600, 2), 'h,',
      sum(r['num_games'] for r in rows), 'games,', sum(r['num_evaluations'] for r in rows), 'network evaluations')
" "$OUT/$arm/metrics.jsonl" "$arm"
done
for mode in "mcts$SIMS" policy; do
  "$PY/connectx-az" eval paired "$OUT/A.pons.json:$mode" "$OUT/B.pons.json:$mode"
done
