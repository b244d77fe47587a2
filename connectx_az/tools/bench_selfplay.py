"""``bench selfplay``: network evaluations per second inside self-play, next to the raw batched rate of its network.

Measured in the same process; with worker processes, the tree work runs in them and the network here.  With
``--evaluator free`` the network is replaced by one that costs almost nothing (``FreeEvaluator``), so the figure
is the tree work's own rate."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from connectx_az.engine import game
from connectx_az.tools import bench


class FreeEvaluator:
    """An evaluator that costs almost nothing, for timing self-play's tree work alone.

    A fixed random linear map of the two planes gives logits and a value (``tanh``): unlike uniform priors, whose
    trees are shallow, its priors are uneven and vary with the position.  ``scale`` was chosen so that its trees are
    about as deep as the shipped network's; ``bench selfplay`` reports ``mean_leaf_depth`` beside every rate, so the
    two can be compared on any model."""

    def __init__(self, seed: int = 0, scale: float = 0.8) -> None:
        self.weights = np.random.default_rng(seed).normal(0.0, scale, (2 * game.NUM_CELLS, 8)).astype(np.float32)

    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = obs.reshape(len(obs), -1).astype(np.float32) @ self.weights
        return x[:, : game.NUM_ACTIONS], np.tanh(x[:, game.NUM_ACTIONS])


EVALUATORS = ("network", "free")


def bench_selfplay(*, preset: str = "cpu", seconds: float = 5.0, checkpoint: str | Path | None = None,
                   overrides: tuple[str, ...] = (), num_workers: int = 0, evaluator: str = "network",
                   device: str | None = None, precision: str | None = None) -> dict[str, Any]:
    """Self-play throughput of ``preset`` against the raw forward rate of its network.

    Plays one wave of games: ``batch`` (the preset's games in flight) in this process, or with ``num_workers`` W >= 1
    worker processes W waves of ``batch`` at once, their start-up included as in training.  The raw rate is measured
    at ``raw_batch``, the largest batch self-play sends (the games in flight of one of the server's two groups of
    workers).  The self-play rate counts the positions the searches asked for; ``network_share`` is the part the
    network scored, the rest answered by ``selfplay.CachedEvaluator`` (so the rate may pass the raw one).
    ``evaluator="free"`` replaces the network by ``FreeEvaluator``: the rate is then the tree work's alone,
    ``tree_evals_per_s`` (and per process doing tree work).  ``mean_leaf_depth`` says how deep the trees were.
    ``device`` and ``precision`` override the preset's."""
    from connectx_az.training import config, devices, export, selfplay, workers

    if evaluator not in EVALUATORS:
        raise ValueError(f"unknown evaluator {evaluator!r}; choose one of {', '.join(EVALUATORS)}")
    settings = [*overrides, f"selfplay.num_workers={num_workers}"]
    settings += [f"device={device}"] * (device is not None) + [f"precision={precision}"] * (precision is not None)
    cfg = config.make_config(preset, overrides=settings)
    batch = cfg.selfplay.num_parallel_games
    num_games = batch * max(1, num_workers)
    rng = np.random.default_rng(0)
    result: dict[str, Any] = {"preset": preset, "evaluator": evaluator}
    if evaluator == "free":
        scorer: Any = FreeEvaluator()
        result.update(workers=num_workers, batch=batch)
    else:
        import torch

        from connectx_az.training.network import PolicyValueNet, TorchEvaluator, load_checkpoint

        # as training runs self-play: the network's threads are those the workers leave it
        torch.set_num_threads(workers.inference_threads(cfg.threads, workers.resolve_num_workers(num_workers)))
        torch_device = devices.resolve_device(cfg.device)
        if checkpoint is not None and Path(checkpoint).is_file():
            net, _ = load_checkpoint(checkpoint)
        else:
            torch.manual_seed(0)
            net = PolicyValueNet(cfg.net)
        scorer = TorchEvaluator(net, torch_device, cfg.precision)
        raw_batch = batch * max(1, (num_workers + 1) // 2)
        obs = export.random_positions(raw_batch, rng)
        raw = bench.rate(lambda: scorer.evaluate(obs), raw_batch, seconds)
        result.update(net=net.config.label, device=str(torch_device),
                      precision=str(scorer.dtype or "float32").removeprefix("torch."),
                      threads=torch.get_num_threads(), workers=num_workers, batch=batch, raw_batch=raw_batch,
                      raw_evals_per_s=round(raw, 1))
    selfplay.compile_selfplay()  # compiled (or loaded from numba's cache) before the clock starts
    start = time.perf_counter()
    _, stats = workers.play_games(scorer, num_games, cfg.selfplay, cfg.mcts, rng)
    elapsed = time.perf_counter() - start
    sp_rate = stats.num_evaluations / elapsed
    if evaluator == "free":
        result.update(tree_evals_per_s=round(sp_rate, 1),
                      tree_evals_per_s_per_core=round(sp_rate / max(1, num_workers), 1))
    else:
        result.update(selfplay_evals_per_s=round(sp_rate, 1), ratio=round(sp_rate / result["raw_evals_per_s"], 3))
    return {**result, "simulations": cfg.mcts.num_simulations, "mean_leaf_depth": round(stats.mean_leaf_depth, 2),
            "network_share": round(stats.num_network_evaluations / max(stats.num_evaluations, 1), 3),
            "positions_per_s": round(stats.num_positions / elapsed, 1),
            "games_per_hour": round(stats.num_games / elapsed * 3600),
            "positions_per_hour": round(stats.num_positions / elapsed * 3600),
            "mean_game_length": round(stats.mean_length, 1), **bench.machine()}


_SCALING_KEYS = ("workers", "batch", "raw_batch", "raw_evals_per_s", "selfplay_evals_per_s", "ratio",
                 "tree_evals_per_s", "tree_evals_per_s_per_core", "mean_leaf_depth",
                 "positions_per_s", "games_per_hour", "positions_per_hour")


def run(*, model: str | Path, seconds: float = 5.0, batches: list[int] | None = None,
        workers: list[int] | None = None, preset: str = "cpu", evaluator: str = "network",
        device: str | None = None, precision: str | None = None) -> dict[str, Any]:
    """``bench_selfplay`` of the network beside ONNX ``model`` (its ``.pt``, else a fresh one), with scaling rows:
    one per (worker-process count in ``workers``, games-in-flight count in ``batches``); either alone varies just
    that one."""
    ckpt = Path(model).with_suffix(".pt")
    common: dict[str, Any] = {"seconds": seconds, "checkpoint": ckpt if ckpt.is_file() else None,
                              "preset": preset, "evaluator": evaluator, "device": device, "precision": precision}
    if not (batches or workers):
        return bench_selfplay(**common)
    settings = [(w, b) for w in workers or [0] for b in batches or [None]]
    rows = [bench_selfplay(**common, num_workers=w, overrides=(f"selfplay.num_parallel_games={b}",) if b else ())
            for w, b in settings]
    return {**{k: v for k, v in rows[-1].items() if k not in _SCALING_KEYS},
            "scaling": [{k: r[k] for k in _SCALING_KEYS if k in r} for r in rows]}
