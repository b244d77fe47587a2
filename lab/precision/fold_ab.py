"""Folded BatchNorm against the plain net, alternating on one core (issue 51, 2026-11-27).

usage: taskset -c 0 python lab/precision/fold_ab.py [ROUNDS]

`TorchEvaluator` evaluates `network.fold_batchnorm(net)` since 2026-11-27. This puts the plain net back for
one arm and alternates the arms, so that whatever the other core does falls on both:
1. the network alone (the shipped model, batch 64), in bfloat16 autocast and in float32: 30 pairs of 0.5 s
   measurements each; prints the medians and the median ratio folded / plain with its quartiles;
2. `bench selfplay`'s self-play of the `cpu` preset in bfloat16 (6 s), ROUNDS pairs (default 3).
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch

from connectx_az import paths
from connectx_az.tools import bench, bench_selfplay
from connectx_az.training import export, network

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
torch.set_num_threads(1)
fold = network.fold_batchnorm
net, _ = network.load_checkpoint(paths.DEFAULT_CHECKPOINT)
obs = export.random_positions(64, np.random.default_rng(0))


def raw_rate(evaluator: network.TorchEvaluator, seconds: float = 0.5) -> float:
    evaluator.evaluate(obs)
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        evaluator.evaluate(obs)
        calls += 1
    return calls * len(obs) / (time.perf_counter() - start)


print(f"network evaluations a second at batch 64 ({bench.cpu_name()}):")
for precision in ("bfloat16", "float32"):
    plain = network.TorchEvaluator(net, "cpu", precision)
    plain._inference_net = lambda: net  # type: ignore[method-assign]  # the net itself, BatchNorm and all
    folded = network.TorchEvaluator(net, "cpu", precision)
    pairs = np.array([(raw_rate(plain), raw_rate(folded)) for _ in range(30)])
    ratio = pairs[:, 1] / pairs[:, 0]
    print(f"  {precision:8s} plain {np.median(pairs[:, 0]):,.0f}, folded {np.median(pairs[:, 1]):,.0f}; folded / plain "
          f"{np.median(ratio):.3f} (quartiles {np.percentile(ratio, 25):.3f}-{np.percentile(ratio, 75):.3f}), "
          f"faster in {(ratio > 1).sum()} of {len(ratio)} pairs", flush=True)

print("self-play of the cpu preset in bfloat16 (bench selfplay, 6 s):")
figures: dict[str, list[tuple[float, int]]] = {"plain": [], "folded": []}
for r in range(rounds):
    for arm in figures:
        network.fold_batchnorm = fold if arm == "folded" else (lambda net: net)
        row = bench_selfplay.bench_selfplay(preset="cpu", seconds=6, precision="bfloat16")
        figures[arm].append((row["selfplay_evals_per_s"], row["games_per_hour"]))
        print(f"  round {r} {arm:6s} {row['selfplay_evals_per_s']:,.0f} evaluations/s, "
              f"{row['games_per_hour']:,} games/h", flush=True)
network.fold_batchnorm = fold
for arm, rows in figures.items():
    print(f"  median {arm:6s} {np.median([e for e, _ in rows]):,.0f} evaluations/s, "
          f"{np.median([g for _, g in rows]):,.0f} games/h")
