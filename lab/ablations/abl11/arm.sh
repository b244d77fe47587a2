#!/bin/bash
# usage: arm.sh CORE RUN_DIR [extra --set ...]; 20 generations from generation 41 of runs/abl10/solved
core=$1; run=$2; shift 2
exec taskset -c $core .venv/bin/connectx-az train --resume $run --threads 1 --quiet --generations 20 \
  --set num_generations=61 --set train.solved_labels=runs/abl11/labels28k.npz --set selfplay.num_workers=0 "$@"
