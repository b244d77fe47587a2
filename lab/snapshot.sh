#!/bin/bash
# usage: lab/snapshot.sh RUN EVERY: copy RUN/checkpoint.pt to RUN/snapshots/gen_NNNN.pt each time the run has
# finished a multiple of EVERY generations, and at its last (config.json's num_generations), then exit there
# (train keeps only its latest checkpoint; grading along the way needs them)
run=$1; every=${2:-20}
mkdir -p "$run/snapshots"
while true; do
  # read each time: a resume may change it; 0 until train has written config.json
  last=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["num_generations"])' "$run/config.json" \
         2>/dev/null || echo 0)
  done_gens=$(wc -l < "$run/metrics.jsonl" 2>/dev/null || echo 0)
  out=$(printf "%s/snapshots/gen_%04d.pt" "$run" "$done_gens")
  if [ "$done_gens" -gt 0 ] && { [ $((done_gens % every)) -eq 0 ] || { [ "$last" -gt 0 ] && [ "$done_gens" -ge "$last" ]; }; } && [ ! -f "$out" ]; then
    cp "$run/checkpoint.pt" "$out.tmp" && mv "$out.tmp" "$out" && echo "$(date -u +%FT%TZ) $out"
  fi
  [ "$last" -gt 0 ] && [ "$done_gens" -ge "$last" ] && exit 0
  sleep 15
done
