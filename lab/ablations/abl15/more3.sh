#!/bin/bash
# usage: more3.sh CORE RUN [ROWS]: 20 more generations (91-110) of a copy of runs/abl15/openb at generation 91,
# the learning rate flat at 3e-5, ROWS proven rows a batch (default the run's 128), the labels the run's own
core=$1; run=$2; rows=${3:+--set train.solved_per_batch=$3}
exec taskset -c $core .venv/bin/connectx-az train --resume $run --threads 1 --quiet --generations 20 \
  --set num_generations=111 --set train.lr=3e-5 --set train.lr_min=3e-5 --set train.lr_schedule_start=91 $rows
