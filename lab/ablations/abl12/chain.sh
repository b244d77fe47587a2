#!/bin/bash
cd /work/main
until grep -q "best moves of" lab/ablations/abl11/fill_m30.log; do sleep 10; done
sleep 5
pkill -f "label runs/abl11/labels_m30.npz"; pkill -f "label runs/abl11/labels_short.npz"; sleep 3
.venv/bin/python lab/ablations/abl12/openings.py > lab/ablations/abl12/openings.log 2>&1 || exit 1
cp -r runs/abl11/policy runs/abl12/control && cp -r runs/abl11/policy runs/abl12/open
(lab/ablations/abl12/arm.sh 0 runs/abl12/control runs/abl11/labels28k.npz > lab/ablations/abl12/control.log 2>&1; lab/ablations/abl12/grade.sh 0 control > lab/ablations/abl12/grade_control.log 2>&1) &
(lab/ablations/abl12/arm.sh 1 runs/abl12/open runs/abl12/labels_open.npz > lab/ablations/abl12/open.log 2>&1; lab/ablations/abl12/grade.sh 1 open > lab/ablations/abl12/grade_open.log 2>&1) &
wait
