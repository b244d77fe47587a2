#!/usr/bin/env bash
# Second device call of 2026-11-27 (what gpu_check.sh left open): the gpu tests again, then self-play of the gpu
# preset with more games in flight per worker, one JSON line per setting into $OUT/scaling.jsonl as each ends.
#   run(command="bash lab/device/scaling.sh", timeout_s=280)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/scaling-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
timeout 45 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py 2>&1 | tail -5 | tee "$OUT/tests.log"
for setting in "16 128" "16 64" "8 256"; do
    set -- $setting
    echo "workers $1, batch $2" >&2
    timeout 75 python3 -m connectx_az.cli bench selfplay --preset gpu --device cuda --workers "$1" --batch "$2" \
        --seconds 1 --json >> "$OUT/scaling.jsonl" 2>> "$OUT/scaling.err"
    tail -1 "$OUT/scaling.jsonl"
done
