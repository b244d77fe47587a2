#!/bin/bash
# usage: more.sh CORE RUN [LABELS]: 15 more generations (61-75) of an arm of arm.sh, the learning rate a cosine
# from 1e-4 at generation 61 to 5e-5 at 75, the proven rows from LABELS (default: the arm's own), the rest as arm.sh
core=$1; run=$2; labels=${3:+--set train.solved_labels=$3}
exec taskset -c $core .venv/bin/connectx-az train --resume $run --threads 1 --quiet --generations 15 \
  --set num_generations=76 --set train.lr=1e-4 --set train.lr_min=5e-5 --set train.lr_schedule_start=61 $labels
