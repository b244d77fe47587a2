"""How well a model's raw policy fits the proven best moves of the labels, by ply (argmax among the
best moves, and cross-entropy against the uniform target).  usage: fit.py CHECKPOINT_OR_ONNX"""
import sys

import numpy as np
import torch

from connectx_az.engine import game
from connectx_az.training import network
from connectx_az.training import labels as solved

net, _ = network.load_checkpoint(sys.argv[1])
if len(sys.argv) > 2:
    net.load_state_dict(torch.load(sys.argv[2], weights_only=True))
torch.set_num_threads(1)
ev = network.TorchEvaluator(net)
L = solved.concat(solved.load("runs/abl11/labels_m30.npz"), solved.load("runs/abl11/labels_short.npz"))
hm = L.has_moves()
target = L.policy()[hm]
logits, _ = ev.evaluate(L.obs()[hm])
m = L.mask[hm]
legal = game.legal_mask(m)
logits = np.where(legal, logits, -np.inf)
logp = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
ce = -(target * np.where(legal, logp, 0)).sum(1)
ok = target[np.arange(len(target)), logits.argmax(1)] > 0
plies = np.array([bin(int(x)).count("1") for x in m])
for lo, hi in [(4, 7), (8, 9), (10, 11), (12, 13), (14, 20), (21, 42)]:
    s = (plies >= lo) & (plies <= hi)
    print(f"plies {lo}-{hi}: {s.sum()} positions, argmax wrong {1 - ok[s].mean():.3f}, loss {ce[s].mean():.3f}")
