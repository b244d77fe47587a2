"""Offline probe, second form: the proven rows' policy loss as the uniform cross-entropy (what
train.solved_policy does) or as -log of the probability on the set of best moves ("set"), weighted.
usage: finetune2.py LR PER STEPS LOSS WEIGHT OUT.json"""
import json
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from connectx_az.training import network, replay
from connectx_az.training import labels as solved
from connectx_az.benchmarks import pons
from connectx_az.evaluation import grading

lr, per, steps, kind, weight, out = (float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4],
                                     float(sys.argv[5]), sys.argv[6])
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
net.train()
tot = 0.0
for step in range(steps):
    a, b = data.sample(256, rng), rows.sample(per, rng)
    obs = torch.from_numpy(np.concatenate([a.obs, b.obs]))
    logits, value = net(obs)
    logp = F.log_softmax(logits.float(), dim=1)
    tv = torch.from_numpy(np.concatenate([a.value, b.value]))
    value_loss = ((value.float() - tv) ** 2).mean()
    sp = -(torch.from_numpy(a.policy) * logp[:256]).sum(1).mean()
    tp = torch.from_numpy(b.policy)
    has = tp.sum(1) > 0
    if kind == "set":
        terms = -torch.logsumexp(torch.where(tp > 0, logp[256:], torch.tensor(-1e9)), dim=1)
    else:
        terms = -(tp * logp[256:]).sum(1)
    proven = terms[has].mean() if has.any() else torch.zeros(())
    loss = sp + value_loss + weight * proven
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    tot += proven.item()
net.eval()
ev = network.TorchEvaluator(net)
res = pons.grade_sets(lambda pos: pons.choose_policy(ev, pos))
val = grading.value_accuracy(ev)
torch.save(net.state_dict(), out.replace(".json", ".state.pt"))
report = {"lr": lr, "per": per, "steps": steps, "kind": kind, "weight": weight, "seconds": round(time.time() - t),
          "proven_loss": tot / max(steps, 1), "policy": {r.name: round(r.mistake_rate, 4) for r in res},
          "wrong": {r.name: [i for i, w in enumerate(r.is_mistake) if w] for r in res},
          "value": {v.name: round(v.accuracy, 4) for v in val}}
json.dump(report, open(out, "w"), indent=1)
print(out, report["policy"], report["value"], report["proven_loss"])
