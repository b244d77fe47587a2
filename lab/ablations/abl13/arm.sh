#!/bin/bash
# usage: arm.sh CORE RUN TARGET: 15 generations from generation 61 of ablation 11's arm (a copy of
# runs/abl11/policy in RUN), 256 proven rows a batch of runs/abl13/labels30k.npz with their best moves,
# the learning rate cosine from 3e-4 at generation 61 to 3e-5 at 75; TARGET: uniform (control) or any (arm)
core=$1; run=$2; target=$3
exec taskset -c $core .venv/bin/connectx-az train --resume $run --threads 1 --quiet --generations 15 \
  --set num_generations=76 --set train.solved_labels=runs/abl13/labels30k.npz --set train.solved_per_batch=256 \
  --set train.solved_policy=true --set train.solved_policy_target=$target \
  --set train.lr=3e-4 --set train.lr_min=3e-5 --set train.lr_schedule_start=61 --set selfplay.num_workers=0
