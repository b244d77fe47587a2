"""``bench precision``: the network in float32 and in bfloat16 on the Pons positions, and its speed in each.

Whether bfloat16 inference (what ``network.autocast_dtype`` picks on a CPU with bfloat16 instructions) changes what
self-play sees: per set, the largest and mean |difference| of the move probabilities (softmax over the legal moves)
and of the value, the share of positions whose most likely move differs, and the raw policy's mistakes in each
precision with the paired counts (with ``sims``, MCTS's too).  Then network evaluations a second at ``batch``
positions a call and training steps a second (AdamW on ``train_batch`` positions) with training's forward pass in
each precision, timed in turns (pin the command to one idle core: ``taskset -c 1``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from connectx_az.engine import game, search_tree
from connectx_az.evaluation import grading
from connectx_az.testsets import pons
from connectx_az.tools import bench

PRECISIONS = ("float32", "bfloat16")


def agreement(first: tuple[np.ndarray, np.ndarray], second: tuple[np.ndarray, np.ndarray],
              legal: np.ndarray) -> dict[str, float]:
    """How close two evaluations of the same positions are: ``(logits, value)`` each, ``legal`` the moves."""
    p, q = search_tree.masked_softmax(first[0], legal), search_tree.masked_softmax(second[0], legal)
    dv = np.abs(first[1] - second[1])
    return {"policy_max": float(np.abs(p - q).max()), "policy_mean": float(np.abs(p - q)[legal].mean()),
            "top_move_differs": float((p.argmax(axis=1) != q.argmax(axis=1)).mean()),
            "value_max": float(dv.max()), "value_mean": float(dv.mean())}


def run(checkpoint: str | Path, *, limit: int | None = None, sets: Sequence[str] | None = None,
        sims: int = 0, seconds: float = 3.0, batch: int = 32, train_batch: int = 384) -> dict[str, Any]:
    """The figures of the module's docstring for the network of ``checkpoint`` (a training checkpoint)."""
    from connectx_az.training.network import TorchEvaluator, load_checkpoint, train_autocast_dtype

    net = load_checkpoint(checkpoint)[0]
    evaluators = {p: TorchEvaluator(net, "cpu", p) for p in PRECISIONS}
    rows: dict[str, dict[str, Any]] = {}
    for name in sets or list(pons.SETS):
        positions = pons.load_set(name, limit=limit)
        boards = [pons.position_of(p) for p in positions]
        pos = np.array([b[0] for b in boards], np.uint64)
        mask = np.array([b[1] for b in boards], np.uint64)
        obs = game.encode(pos, mask)
        outputs = {p: e.evaluate(obs) for p, e in evaluators.items()}
        row: dict[str, Any] = {"n": len(positions), **agreement(outputs["float32"], outputs["bfloat16"],
                                                                   game.legal_mask(mask))}
        grades = {p: pons.grade(name, positions, [int(c) for c in pons.choose_policy(e, boards)])
                  for p, e in evaluators.items()}
        row["policy"] = _paired(grades)
        if sims:
            search = search_tree.SearchConfig(num_simulations=sims)
            grades = {p: pons.search_mistake_rates(e, search, limit=limit, sets=[name])[0]
                      for p, e in evaluators.items()}
            row[f"mcts{sims}"] = _paired(grades)
        rows[name] = row
    positions = [pons.position_of(p) for p in pons.load_set("Middle-Medium", limit=batch)]
    sample = game.encode(*(np.array(x, np.uint64) for x in zip(*positions, strict=True)))
    speed = {p: 0.0 for p in PRECISIONS}
    steps = {p: 0.0 for p in PRECISIONS}
    trainers = {p: _trainer(net, train_batch, train_autocast_dtype("cpu", p)) for p in PRECISIONS}
    for _ in range(2):  # in turns, so that a drift of the machine's speed is shared
        for p, e in evaluators.items():
            speed[p] = max(speed[p], bench.rate(lambda e=e: e.evaluate(sample), len(sample), seconds / 2))
            steps[p] = max(steps[p], bench.rate(trainers[p], 1, seconds / 2))
    return {"checkpoint": str(checkpoint), "sets": rows, "evals_per_s": {p: round(v) for p, v in speed.items()},
            "train_steps_per_s": {p: round(v, 2) for p, v in steps.items()}, "train_batch": train_batch,
            "batch": batch, "sims": sims, **bench.machine()}


def _trainer(net: Any, batch: int, dtype: Any) -> Any:
    """One AdamW step of training on ``batch`` random positions, forward pass at autocast ``dtype``, per call
    (on a copy of ``net``: the graded network stays as it is)."""
    import copy

    import torch

    from connectx_az.training import export, network, replay, train

    rng = np.random.default_rng(0)
    model = network.place(copy.deepcopy(net), "cpu")  # as training places it
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    obs = export.random_positions(batch, rng)
    policy = rng.dirichlet(np.ones(game.NUM_ACTIONS), batch).astype(np.float32)
    data = replay.ReplayData(obs, policy, rng.uniform(-1, 1, batch).astype(np.float32))
    return lambda: train.train_steps(model, optimizer, data, 1, batch, rng, torch.device("cpu"), progress=False,
                                     dtype=dtype)


def _paired(grades: dict[str, pons.SetResult]) -> dict[str, int]:
    both = grading.compare(grades["float32"], grades["bfloat16"])
    return {"float32": grades["float32"].num_mistakes, "bfloat16": grades["bfloat16"].num_mistakes,
            "only_float32_right": both.only_first, "only_bfloat16_right": both.only_second}


def format_result(result: dict[str, Any]) -> str:
    """The figures as a table: one line a set, then the speed."""
    modes = ["policy"] + ([f"mcts{result['sims']}"] if result["sims"] else [])
    lines = [f"{result['checkpoint']}: float32 against bfloat16 on the Pons positions; |difference| max / mean of the "
             "move probabilities and the value; mistakes float32 / bfloat16 (paired: only float32 right / only "
             "bfloat16 right)",
             f"  {'set':<14} {'n':>5}  {'policy':>17}  {'top move differs':>16}  {'value':>17}  "
             + "  ".join(f"{m:<22}" for m in modes)]
    for name, r in result["sets"].items():
        graded = "  ".join(f"{r[m]['float32']:>4} / {r[m]['bfloat16']:<4} ({r[m]['only_float32_right']} / "
                           f"{r[m]['only_bfloat16_right']})".ljust(22) for m in modes)
        lines.append(f"  {name:<14} {r['n']:>5}  {r['policy_max']:.4f} / {r['policy_mean']:.5f}  "
                     f"{r['top_move_differs']:>16.1%}  {r['value_max']:.4f} / {r['value_mean']:.5f}  {graded}")
    speed = result["evals_per_s"]
    lines.append(f"network evaluations a second at batch {result['batch']} ({result.get('date')}, "
                 f"{result.get('cpu')}): float32 {speed['float32']:,}, bfloat16 {speed['bfloat16']:,} "
                 f"({speed['bfloat16'] / max(speed['float32'], 1):.2f}x)")
    steps = result["train_steps_per_s"]
    lines.append(f"training steps a second at {result['train_batch']} positions a step: "
                 f"float32 {steps['float32']:.2f}, bfloat16 {steps['bfloat16']:.2f} "
                 f"({steps['bfloat16'] / max(steps['float32'], 1e-9):.2f}x)")
    return "\n".join(lines)
