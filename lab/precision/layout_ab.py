"""The torch network's layout on the CPU, arm against arm on one core (issue 51, 2026-11-27).

usage: taskset -c 0 python lab/precision/layout_ab.py [ROUNDS]

Since 2026-11-27 `TorchEvaluator` evaluates `network.fold_batchnorm(net)` (BatchNorm folded into the
convolutions) and `network.place` puts a CPU net's convolution weights channels-last. This measures what
each brings, the arms alternated so that whatever the other core does falls on all of them:
1. the network alone (the shipped model, batch 64) in bfloat16 autocast and in float32: plain (as before),
   folded, folded and channels-last; 20 rounds of 0.5 s each; medians, and the ratio to plain (median and
   quartiles of the rounds);
2. a training step (AdamW, 384 positions, float32 as the presets train): default layout against
   channels-last; 12 rounds of 1 s;
3. `bench selfplay`'s self-play of the `cpu` preset in bfloat16 (6 s): plain against both; ROUNDS rounds
   (default 3).
"""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Callable

import numpy as np
import torch

from connectx_az import paths
from connectx_az.engine import game
from connectx_az.tools import bench, bench_selfplay
from connectx_az.training import export, network, replay, train

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
torch.set_num_threads(1)
fold, place = network.fold_batchnorm, network.place
net, _ = network.load_checkpoint(paths.DEFAULT_CHECKPOINT)  # default layout
obs = export.random_positions(64, np.random.default_rng(0))


def per_second(call: Callable[[], object], seconds: float) -> float:
    call()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        call()
        calls += 1
    return calls / (time.perf_counter() - start)


def report(title: str, unit: float, arms: dict[str, Callable[[], object]], n: int, seconds: float) -> None:
    rates = {arm: [] for arm in arms}
    for _ in range(n):
        for arm, call in arms.items():
            rates[arm].append(per_second(call, seconds) * unit)
    base = np.array(rates["plain"])
    print(title)
    for arm, values in rates.items():
        ratio = np.array(values) / base
        print(f"  {arm:22s} {np.median(values):9,.2f}   / plain {np.median(ratio):.3f} "
              f"(quartiles {np.percentile(ratio, 25):.3f}-{np.percentile(ratio, 75):.3f})", flush=True)


def evaluator(precision: str, inference: network.PolicyValueNet | None) -> Callable[[], object]:
    e = network.TorchEvaluator(copy.deepcopy(net), "cpu", precision)  # placed: folded and channels-last
    if inference is not None:
        e._inference_net = lambda: inference  # type: ignore[method-assign]
    return lambda: e.evaluate(obs)


print(bench.cpu_name())
for precision in ("bfloat16", "float32"):
    report(f"network evaluations a second, {precision}, batch 64:", len(obs), {
        "plain": evaluator(precision, copy.deepcopy(net)),
        "folded": evaluator(precision, fold(net)),
        "folded, channels-last": evaluator(precision, None),
    }, 20, 0.5)


def train_step(channels_last: bool) -> Callable[[], object]:
    rng = np.random.default_rng(0)
    model = place(copy.deepcopy(net), "cpu") if channels_last else copy.deepcopy(net)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    positions = export.random_positions(384, rng)
    policy = rng.dirichlet(np.ones(game.NUM_ACTIONS), 384).astype(np.float32)
    data = replay.ReplayData(positions, policy, rng.uniform(-1, 1, 384).astype(np.float32))
    return lambda: train.train_steps(model, optimizer, data, 1, 384, rng, torch.device("cpu"), progress=False)


report("training steps a second, float32, 384 positions:", 1, {
    "plain": train_step(False), "channels-last": train_step(True)}, 12, 1.0)

print("self-play of the cpu preset in bfloat16 (bench selfplay, 6 s), evaluations a second:")
figures: dict[str, list[float]] = {"plain": [], "folded, channels-last": []}
for r in range(rounds):
    for arm in figures:
        plain = arm == "plain"
        network.fold_batchnorm = (lambda m: m) if plain else fold
        network.place = (lambda m, device: m.to(device)) if plain else place
        row = bench_selfplay.bench_selfplay(preset="cpu", seconds=6, precision="bfloat16")
        figures[arm].append(row["selfplay_evals_per_s"])
        print(f"  round {r} {arm:22s} {row['selfplay_evals_per_s']:,.0f}", flush=True)
network.fold_batchnorm, network.place = fold, place
base = np.array(figures["plain"])
for arm, values in figures.items():
    print(f"  median {arm:22s} {np.median(values):,.0f}   / plain {np.median(np.array(values) / base):.3f}")
