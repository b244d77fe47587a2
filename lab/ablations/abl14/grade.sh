#!/bin/bash
# usage: grade.sh CORE ARM [NAME]: export runs/abl14/ARM as NAME (default ARM), grade raw policy + MCTS 800 and the value head on one core
core=$1; arm=$2; name=${3:-$2}; d=runs/abl14
set -e
taskset -c $core .venv/bin/connectx-az export $d/$arm --out $d/$name.onnx --weights-out $d/$name.pt
taskset -c $core .venv/bin/connectx-az eval value --models $d/$name.onnx --json > $d/$name.value.json
taskset -c $core .venv/bin/connectx-az eval pons --model $d/$name.onnx --sims 800 --json > $d/$name.pons.json
