#!/usr/bin/env bash
# The GPU check on the device tool's machine: a bare GPU box whose python3 already has a CUDA torch, onnx,
# onnxruntime, tqdm and pytest, and no package registry.  Nothing is installed: the package runs from this tree.
#
#   run(command="bash lab/device/gpu_check.sh", timeout_s=540)      # no carry: the working tree alone travels
#
# The check keeps to its own budget (BUDGET, 420 s by default: steps that would overrun it are skipped and say so);
# timeout_s 540 leaves it room to finish and, on a first failure early on, the session's 15 device minutes room for a
# rerun (PRESET=smoke BUDGET=60 tries the script on a CPU).  What comes back in $OUT (the device tool returns at most 8 files, two folders deep): gpu_check.json (every
# figure), gpu_check.log (the progress lines), gpu_check_tests.log (pytest's output), metrics.jsonl (the generations'
# rows), stdout.log (the terminal) and nvidia-smi.txt.  The run itself (checkpoints, replay) stays on the machine.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/gpu-check-out}
WORK=${WORK:-/tmp/gpu-check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
python3 lab/device/gpu_check.py --out "$WORK" --budget "${BUDGET:-420}" ${PRESET:+--preset "$PRESET"} 2>&1 | tee "$OUT/stdout.log"
status=${PIPESTATUS[0]}
cp "$WORK"/gpu_check.json "$WORK"/gpu_check.log "$WORK"/gpu_check_tests.log "$WORK"/run/metrics.jsonl "$OUT"/ 2>/dev/null
ls -l "$OUT"
exit "$status"
