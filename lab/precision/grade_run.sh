#!/bin/bash
# usage: lab/precision/grade_run.sh CORE RUN [ONCE]: grade every snapshot `train --keep-every` kept in RUN
# (RUN/snapshots/gen_NNNN.pt) not yet graded: export it to ONNX, then raw policy, MCTS 800 and the value head on
# the three hard sets, all their positions (onnxruntime, pinned to CORE): RUN/grades/gen_NNNN.pons.json, read by
# lab/precision/run_table.py. Then waits for the next snapshot, or with ONCE set, stops.
# (lab/recipe/grade.sh at commit 6d9786f, which read lab/snapshot.sh's copies, did the same for the runs before.)
set -euo pipefail
core=${1:?usage: grade_run.sh CORE RUN [ONCE]}; run=${2:?usage: grade_run.sh CORE RUN [ONCE]}; once=${3:-}
bin=${BIN:-.venv/bin}
mkdir -p "$run/grades"
while true; do
  for ckpt in "$run"/snapshots/gen_*.pt; do
    [ -f "$ckpt" ] || continue
    name=$(basename "$ckpt" .pt); out="$run/grades/$name"
    [ -f "$out.pons.json" ] && continue
    taskset -c "$core" "$bin/connectx-az" export "$ckpt" --out "$out.onnx" > /dev/null || continue
    taskset -c "$core" "$bin/connectx-az" eval pons --model "$out.onnx" --sims 800 \
      --sets Middle-Medium Begin-Medium Begin-Hard --json > "$out.pons.json.tmp" && mv "$out.pons.json.tmp" "$out.pons.json"
    echo "$(date -u +%FT%TZ) $out.pons.json"
  done
  [ -n "$once" ] && exit 0
  sleep 60
done
