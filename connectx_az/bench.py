"""Speed benchmarks that print measured figures (``connectx-az bench ...``).

``selfplay``: network evaluations per second inside self-play next to the raw
batched forward rate of the same network, measured in the same process.
``agent``: simulations per second of the submission's search for each
inference backend, next to that backend's raw single-position rate.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from connectx_az import game


def _machine() -> dict[str, Any]:
    return {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d")}


def rate(fn: Any, per_call: int, seconds: float) -> float:
    """Calls of ``fn`` per second times ``per_call``, after one warm-up call."""
    fn()
    n = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        fn()
        n += 1
    return n * per_call / elapsed


def bench_selfplay(*, preset: str = "cpu", seconds: float = 5.0, checkpoint: str | Path | None = None,
                   overrides: tuple[str, ...] = ()) -> dict[str, Any]:
    """Self-play throughput of ``preset`` against the raw forward rate of its network."""
    import torch

    from connectx_az import config, export, selfplay, train
    from connectx_az.network import PolicyValueNet, TorchEvaluator, load_checkpoint

    cfg = config.make_config(preset, overrides=list(overrides))
    torch.set_num_threads(cfg.threads)
    device = train.resolve_device(cfg.device)
    if checkpoint is not None and Path(checkpoint).is_file():
        net, _ = load_checkpoint(checkpoint)
    else:
        torch.manual_seed(0)
        net = PolicyValueNet(cfg.net)
    evaluator = TorchEvaluator(net, device)
    rng = np.random.default_rng(0)
    batch = cfg.selfplay.num_parallel_games
    obs = export.random_positions(batch, rng)
    raw = rate(lambda: evaluator.evaluate(obs), batch, seconds)
    num_games = batch
    start = time.perf_counter()
    _, stats = selfplay.play_games(evaluator, num_games, cfg.selfplay, cfg.mcts, rng)
    elapsed = time.perf_counter() - start
    sp_rate = stats.num_evaluations / elapsed
    return {
        "preset": preset, "net": net.config.label, "device": str(device), "threads": cfg.threads,
        "batch": batch, "simulations": cfg.mcts.num_simulations,
        "raw_evals_per_s": round(raw, 1), "selfplay_evals_per_s": round(sp_rate, 1),
        "ratio": round(sp_rate / raw, 3),
        "games_per_hour": round(stats.num_games / elapsed * 3600),
        "positions_per_hour": round(stats.num_positions / elapsed * 3600),
        "mean_game_length": round(stats.mean_length, 1),
        **_machine(),
    }


def run(what: str, *, model: str | Path, seconds: float = 5.0, batches: list[int] | None = None) -> dict[str, Any]:
    """One benchmark's figures; ``batches`` (selfplay) adds one row per games-in-flight count."""
    if what == "selfplay":
        ckpt = Path(model).with_suffix(".pt")
        ckpt_arg = ckpt if ckpt.is_file() else None
        result = bench_selfplay(seconds=seconds, checkpoint=ckpt_arg)
        if batches:
            result["scaling"] = [
                {k: r[k] for k in ("batch", "raw_evals_per_s", "selfplay_evals_per_s", "ratio", "positions_per_hour")}
                for r in (bench_selfplay(seconds=seconds, checkpoint=ckpt_arg,
                                         overrides=(f"selfplay.num_parallel_games={b}",)) for b in batches)
            ]
        return result
    if what == "agent":
        return bench_agent(model, seconds=seconds)
    raise ValueError(f"unknown benchmark {what!r}")


def bench_agent(model: str | Path, *, seconds: float = 5.0, num_positions: int = 8) -> dict[str, Any]:
    """Per backend: the submission search's simulations per second and the raw eval rate.

    Uses the agent's own evaluator factory and search settings
    (``template.CONFIG``) on Middle-Medium Pons positions, one fresh tree per
    position searched for ``seconds / num_positions``; the raw rate is
    single-position calls of the same evaluator.  Pin the process to one core
    (``taskset -c 0``) to match Kaggle.
    """
    from connectx_az import mcts, pons
    from connectx_az.agent import template

    path = Path(model)
    if not path.is_file():
        raise FileNotFoundError(f"model {path} not found; pass --model PATH.onnx")
    data = path.read_bytes()
    positions = [pons.position_of(p) for p in pons.load_set("Middle-Medium", limit=num_positions)]
    obs = game.encode(np.array([p for p, _ in positions], np.uint64), np.array([m for _, m in positions], np.uint64))
    result: dict[str, Any] = {"model": path.name, "num_parallel": template.CONFIG.search.num_parallel}
    for backend in ("onnxruntime", "numpy"):
        try:
            evaluator = template.make_evaluator(backend, data)
        except ImportError:
            result[backend] = {"available": False}
            continue
        one = [obs[i : i + 1] for i in range(len(obs))]
        calls = iter(range(10**12))
        raw = rate(lambda: evaluator.evaluate(one[next(calls) % len(one)]), 1, seconds / 2)
        sims = 0
        start = time.perf_counter()
        for position, mask in positions:
            tree = mcts.Tree(np.array([position], np.uint64), np.array([mask], np.uint64), capacity=4096)
            deadline = time.perf_counter() + seconds / len(positions)
            sims += mcts.search(tree, evaluator, template.CONFIG.search, deadline=deadline)
        sims_per_s = sims / (time.perf_counter() - start)
        result[backend] = {"available": True, "sims_per_s": round(sims_per_s, 1),
                           "raw_evals_per_s": round(raw, 1), "ratio": round(sims_per_s / raw, 3)}
    return {**result, **_machine()}


def format_result(what: str, result: dict[str, Any]) -> str:
    lines = [f"{what} benchmark ({result.get('date')}, {result.get('machine')}, {result.get('cpus')} cpus)"]
    for key, value in result.items():
        if key in ("date", "machine", "cpus", "python"):
            continue
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        if isinstance(value, list):
            lines.append(f"  {key}:")
            lines.extend("    " + ", ".join(f"{k} {v}" for k, v in row.items()) for row in value)
            continue
        lines.append(f"  {key:<24}{value}")
    return "\n".join(lines)
