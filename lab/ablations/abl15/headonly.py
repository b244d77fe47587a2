"""Offline probe: train the policy head alone (policy_conv, policy_fc) of the shipped generation 41, the
trunk and the value head frozen and in eval mode (so the value head's outputs, and with them every
value the search sees, stay exactly generation 41's), on its replay window (generations 33-40) plus
the proven positions of LABELS under the `any` target (-log of the probability on the best moves).
usage: headonly.py LR PER STEPS WEIGHT LABELS OUT.pt  (writes OUT.pt, a checkpoint `connectx-az export`
reads, and OUT.json: the raw policy's mistakes on the six sets)"""
import json
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from connectx_az.training import network, replay
from connectx_az.training import labels as solved
from connectx_az.benchmarks import pons

lr, per, steps, weight, labels_path, out = (float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
                                            float(sys.argv[4]), sys.argv[5], sys.argv[6])
torch.set_num_threads(1)
net, _ = network.load_checkpoint("runs/abl10/solved/checkpoint.pt")
net.eval()  # batch norm on its running statistics throughout: the trunk stays exactly as it was
head = [*net.policy_conv.parameters(), *net.policy_fc.parameters()]
for p in net.parameters():
    p.requires_grad_(False)
for p in head:
    p.requires_grad_(True)
opt = torch.optim.AdamW(head, lr=lr, weight_decay=1e-4)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps, eta_min=lr / 10)
data = replay.load_window("runs/abl10/solved/replay", up_to_generation=40, num_generations=8,
                          max_positions=300_000, dedupe=True, value_mix=0.5)
labels = solved.load(labels_path)
keep = labels.has_moves()
rows = replay.ReplayData(obs=labels.obs()[keep], policy=labels.policy()[keep],
                         value=labels.result[keep].astype(np.float32))
rng = np.random.default_rng(0)
start = time.time()
total = 0.0
for step in range(steps):
    a, b = data.sample(256, rng), rows.sample(per, rng)
    logits, _ = net(torch.from_numpy(np.concatenate([a.obs, b.obs])))
    logp = F.log_softmax(logits.float(), dim=1)
    selfplay = -(torch.from_numpy(a.policy) * logp[:256]).sum(1).mean()
    best = torch.from_numpy(b.policy) > 0
    proven = -torch.logsumexp(torch.where(best, logp[256:], torch.tensor(-1e9)), dim=1).mean()
    loss = selfplay + weight * proven
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    sched.step()
    total += proven.item()
    if (step + 1) % 500 == 0:
        print(f"step {step + 1}: proven loss {total / (step + 1):.4f}, {time.time() - start:.0f} s", flush=True)
network.save_checkpoint(out, net)
evaluator = network.TorchEvaluator(net)
results = pons.grade_sets(lambda pos: pons.choose_policy(evaluator, pos))
report = {"lr": lr, "per": per, "steps": steps, "weight": weight, "labels": labels_path, "proven_rows": len(rows.obs),
          "seconds": round(time.time() - start), "proven_loss": total / max(steps, 1),
          "policy": {r.name: round(r.mistake_rate, 4) for r in results},
          "wrong": {r.name: [i for i, w in enumerate(r.is_mistake) if w] for r in results}}
json.dump(report, open(out.replace(".pt", ".json"), "w"), indent=1)
print(out, report["policy"])
