#!/bin/bash
# usage: more.sh CORE RUN TARGET: 15 more generations (76-90) of an arm of arm.sh, the learning rate
# cosine from 1e-4 at generation 76 to 3e-5 at 90, the rest as arm.sh
core=$1; run=$2; target=$3
exec taskset -c $core .venv/bin/connectx-az train --resume $run --threads 1 --quiet --generations 15 \
  --set num_generations=91 --set train.solved_policy_target=$target \
  --set train.lr=1e-4 --set train.lr_min=3e-5 --set train.lr_schedule_start=76
