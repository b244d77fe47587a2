#!/bin/bash
# usage: lab/recipe/grade.sh CORE RUN: grade every snapshot of RUN (lab/snapshot.sh) not yet graded, then wait for
# the next: export RUN/snapshots/gen_NNNN.pt to ONNX, then raw policy, MCTS 800 and the value head on the three hard
# sets (onnxruntime, all positions): RUN/grades/gen_NNNN.pons.json, for `eval paired` and docs/results.md
core=$1; run=$2; bin=${BIN:-.venv/bin}
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
  sleep 60
done
