#!/bin/bash
# usage: grade.sh CORE ARM: export runs/abl11/ARM, grade raw policy + MCTS 800 and the value head on one core
core=$1; arm=$2; d=runs/abl11
set -e
taskset -c $core .venv/bin/connectx-az export $d/$arm --out $d/$arm.onnx --weights-out $d/$arm.pt
taskset -c $core .venv/bin/connectx-az eval value --models $d/$arm.onnx --json > $d/$arm.value.json
taskset -c $core .venv/bin/connectx-az eval pons --model $d/$arm.onnx --sims 800 --json > $d/$arm.pons.json
