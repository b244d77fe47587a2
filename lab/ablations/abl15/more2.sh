#!/bin/bash
# usage: more2.sh CORE RUN LABELS: 15 more generations (76-90) of an arm resumed at generation 76 (a copy of
# runs/abl15/open), the learning rate a cosine from 5e-5 at generation 76 to 3e-5 at 90, the proven rows from LABELS
core=$1; run=$2; labels=$3
exec taskset -c $core .venv/bin/connectx-az train --resume $run --threads 1 --quiet --generations 15 \
  --set num_generations=91 --set train.lr=5e-5 --set train.lr_min=3e-5 --set train.lr_schedule_start=76 \
  --set train.solved_labels=$labels
