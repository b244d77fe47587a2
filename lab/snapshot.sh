#!/bin/bash
# usage: lab/snapshot.sh RUN EVERY: copy RUN/checkpoint.pt to RUN/snapshots/gen_NNNN.pt each time the run has
# finished a multiple of EVERY generations (train keeps only its latest checkpoint; grading along the way needs them)
run=$1; every=${2:-20}
mkdir -p "$run/snapshots"
while true; do
  done_gens=$(wc -l < "$run/metrics.jsonl" 2>/dev/null || echo 0)
  out=$(printf "%s/snapshots/gen_%04d.pt" "$run" "$done_gens")
  if [ "$done_gens" -gt 0 ] && [ $((done_gens % every)) -eq 0 ] && [ ! -f "$out" ]; then
    cp "$run/checkpoint.pt" "$out.tmp" && mv "$out.tmp" "$out" && echo "$(date -u +%FT%TZ) $out"
  fi
  sleep 15
done
