#!/bin/bash
# usage: arm.sh CORE RUN LR [LABELS]: 20 generations (41-60) from the shipped generation 41 (a copy of
# runs/abl10/solved in RUN), 128 proven rows a batch of LABELS (default runs/abl13/labels30k.npz) with their best moves
# under the `any` target, the learning rate cosine from LR at generation 41 to 3e-5 at 60
core=$1; run=$2; lr=$3; labels=${4:-runs/abl13/labels30k.npz}
exec taskset -c $core .venv/bin/connectx-az train --resume $run --threads 1 --quiet --generations 20 \
  --set num_generations=61 --set train.solved_labels=$labels --set train.solved_per_batch=128 \
  --set train.solved_policy=true --set train.solved_policy_target=any \
  --set train.lr=$lr --set train.lr_min=3e-5 --set train.lr_schedule_start=41 --set selfplay.num_workers=0
