#!/bin/bash
# usage: arm.sh CORE RUN LABELS: 15 generations from generation 61 of ablation 11's arm (runs/abl11/policy)
core=$1; run=$2; labels=$3
exec taskset -c $core .venv/bin/connectx-az train --resume $run --threads 1 --quiet --generations 15 \
  --set num_generations=76 --set train.solved_labels=$labels --set train.solved_policy=true --set selfplay.num_workers=0
