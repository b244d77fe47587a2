"""Offline probe: can the proven opening moves pull the raw policy on the Begin sets at all?

From ablation 11's arm (generation 61, its optimizer state), train STEPS steps on its replay window
(generations 53-60) plus the proven positions of labels_m30 + labels_short, at learning rate LR with
PER proven rows a batch, then grade the raw policy on all six Pons sets and the value head.
usage: finetune.py LR PER STEPS OUT.json
"""
import json
import sys
import time

import numpy as np
import torch

from connectx_az.training import network, replay, train
from connectx_az.training import labels as solved
from connectx_az.benchmarks import pons
from connectx_az.evaluation import grading

lr, per, steps, out = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
torch.set_num_threads(1)
net, ckpt = network.load_checkpoint("runs/abl11/policy/checkpoint.pt")
opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-4)
opt.load_state_dict(ckpt["optimizer"])
for g in opt.param_groups:
    g["lr"] = lr
data = replay.load_window("runs/abl11/policy/replay", up_to_generation=60, num_generations=8,
                          max_positions=300_000, dedupe=True, value_mix=0.5)
labels = solved.concat(solved.load("runs/abl11/labels_m30.npz"), solved.load("runs/abl11/labels_short.npz"))
rows = replay.ReplayData(obs=labels.obs(), policy=labels.policy(), value=labels.result.astype(np.float32))
rng = np.random.default_rng(0)
t = time.time()
losses = train.train_steps(net, opt, data, steps, 256, rng, torch.device("cpu"), progress=False,
                           solved=rows, solved_per_batch=per)
ev = network.TorchEvaluator(net)
res = pons.grade_sets(lambda pos: pons.choose_policy(ev, pos))
val = grading.value_accuracy(ev)
report = {"lr": lr, "per": per, "steps": steps, "seconds": round(time.time() - t),
          "losses": losses, "policy": {r.name: round(r.mistake_rate, 4) for r in res},
          "wrong": {r.name: [i for i, w in enumerate(r.is_mistake) if w] for r in res},
          "value": {v.name: round(v.accuracy, 4) for v in val}}
json.dump(report, open(out, "w"), indent=1, default=str)
print(out, report["policy"], report["value"], report["losses"].get("solved_policy_loss"))
