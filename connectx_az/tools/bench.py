"""Speed benchmarks that print measured figures (``connectx-az bench ...``).

``selfplay``: network evaluations per second inside self-play next to the raw
batched forward rate of the same network, measured in the same process; with
worker processes, the tree work runs in them and the network here.  With
``--evaluator free`` the network is replaced by one that costs almost nothing,
so the figure is the tree work's own rate.
``agent``: simulations per second of the submission's search for each
inference backend (onnxruntime, numpy: those that import), next to
that backend's raw rates, timed in turns; then, for a freshly built ``submission.py`` run as Kaggle runs it
(fresh interpreter, onnxruntime, torch and the package blocked), the load time
of a game's first move and the process's peak memory after a few full-budget
moves.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from connectx_az.engine import game
from connectx_az.evaluation import kaggle_io


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


class FreeEvaluator:
    """An evaluator that costs almost nothing, for timing self-play's tree work alone.

    A fixed random linear map of the two planes gives logits and a value
    (``tanh``).  Unlike uniform priors (whose trees are shallow: 3.1 plies below
    the root at 200 simulations), its priors are uneven and vary with the
    position, and ``scale`` 0.8 was chosen so that its trees are about as deep
    as the shipped network's (6.1 vs 6.2 plies, gpu preset, measured with
    ``SelfPlayStats.mean_leaf_depth``); ``bench selfplay`` reports the depth
    beside every rate, so the two can be compared on any model.
    """

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

    Plays one wave of games: ``batch`` (the preset's games in flight) in this
    process, or with ``num_workers`` W >= 1 worker processes (``workers``) W
    waves of ``batch`` at once, their start-up included as in training.  The raw
    rate is measured at ``raw_batch``, the largest batch self-play sends: the
    games in flight of one of the server's two groups of workers.

    ``evaluator="free"`` replaces the network by ``FreeEvaluator``: the rate is
    then the tree work's alone, ``tree_evals_per_s`` (and per core: per process
    doing tree work).  ``mean_leaf_depth`` says how deep the trees were.
    ``device`` and ``precision`` override the preset's (``devices.resolve_device``,
    ``network.autocast_dtype``).
    """
    from connectx_az.training import config, devices, export, workers

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

        torch.set_num_threads(cfg.threads)
        torch_device = devices.resolve_device(cfg.device)
        if checkpoint is not None and Path(checkpoint).is_file():
            net, _ = load_checkpoint(checkpoint)
        else:
            torch.manual_seed(0)
            net = PolicyValueNet(cfg.net)
        scorer = TorchEvaluator(net, torch_device, cfg.precision)
        raw_batch = batch * max(1, (num_workers + 1) // 2)
        obs = export.random_positions(raw_batch, rng)
        raw = rate(lambda: scorer.evaluate(obs), raw_batch, seconds)
        result.update(net=net.config.label, device=str(torch_device),
                      precision=str(scorer.dtype or "float32").removeprefix("torch."),
                      threads=cfg.threads, workers=num_workers, batch=batch, raw_batch=raw_batch,
                      raw_evals_per_s=round(raw, 1))
    start = time.perf_counter()
    _, stats = workers.play_games(scorer, num_games, cfg.selfplay, cfg.mcts, rng)
    elapsed = time.perf_counter() - start
    sp_rate = stats.num_evaluations / elapsed
    if evaluator == "free":
        result.update(tree_evals_per_s=round(sp_rate, 1),
                      tree_evals_per_s_per_core=round(sp_rate / max(1, num_workers), 1))
    else:
        result.update(selfplay_evals_per_s=round(sp_rate, 1), ratio=round(sp_rate / result["raw_evals_per_s"], 3))
    return {
        **result, "simulations": cfg.mcts.num_simulations,
        "mean_leaf_depth": round(stats.mean_leaf_depth, 2),
        "positions_per_s": round(stats.num_positions / elapsed, 1),
        "games_per_hour": round(stats.num_games / elapsed * 3600),
        "positions_per_hour": round(stats.num_positions / elapsed * 3600),
        "mean_game_length": round(stats.mean_length, 1),
        **_machine(),
    }


_SCALING_KEYS = ("workers", "batch", "raw_batch", "raw_evals_per_s", "selfplay_evals_per_s", "ratio",
                 "tree_evals_per_s", "tree_evals_per_s_per_core", "mean_leaf_depth",
                 "positions_per_s", "games_per_hour", "positions_per_hour")


def run(what: str, *, model: str | Path, seconds: float = 5.0, batches: list[int] | None = None,
        workers: list[int] | None = None, preset: str = "cpu", evaluator: str = "network",
        device: str | None = None, precision: str | None = None) -> dict[str, Any]:
    """One benchmark's figures.

    ``batches`` and ``workers`` (selfplay) add one row per (worker-process count,
    games-in-flight count); either alone varies just that one.  ``preset``,
    ``evaluator``, ``device`` and ``precision``: see ``bench_selfplay``.
    """
    if what == "selfplay":
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
    if what == "agent":
        return bench_agent(model, seconds=seconds)
    raise ValueError(f"unknown benchmark {what!r}")


def bench_agent(model: str | Path, *, seconds: float = 5.0, num_positions: int = 8,
                num_moves: int = 3) -> dict[str, Any]:
    """Per backend: the submission search's simulations per second and the raw eval rates.

    Uses the agent's own evaluator factory and search settings
    (``template.CONFIG``) on Middle-Medium Pons positions, one fresh tree per
    position searched for ``seconds / num_positions``; the raw rates are
    single-position calls (``raw_evals_per_s``) and calls of ``num_parallel``
    positions (``raw_batch_evals_per_s``) of the same evaluator, each timed for
    a quarter as long.  Every backend (``backends.KNOWN_BACKENDS`` that load
    here) gets its slices of each position in turn, so a change in the
    machine's load moves all figures alike; ``*_vs_numpy`` divide a backend's
    figures by the numpy runtime's (``sims_vs_numpy``, ``raw_vs_numpy``,
    ``batch_vs_numpy``).  Pin the process to one core
    (``taskset -c 1``) to match Kaggle; the child processes inherit the pinning.

    Then builds ``submission.py`` for the same model and adds what
    ``bench_submission`` measures: ``load_seconds``, ``peak_rss_mb`` and a
    ``submission`` breakdown (``num_moves`` full-budget moves at Kaggle's clock).
    """
    from connectx_az.agent import backends, template
    from connectx_az.benchmarks import pons
    from connectx_az.engine import mcts

    path = Path(model)
    if not path.is_file():
        raise FileNotFoundError(f"model {path} not found; pass --model PATH.onnx")
    data = path.read_bytes()
    num_parallel = template.CONFIG.search.num_parallel
    positions = [pons.position_of(p) for p in pons.load_set("Middle-Medium", limit=num_positions)]
    obs = game.encode(np.array([p for p, _ in positions], np.uint64), np.array([m for _, m in positions], np.uint64))
    batch = np.resize(obs, (num_parallel, *obs.shape[1:]))
    result: dict[str, Any] = {"model": path.name, "num_parallel": num_parallel}
    evaluators = {}
    for backend in backends.KNOWN_BACKENDS:
        try:
            evaluators[backend] = backends.make_evaluator(backend, data)
        except ImportError:
            result[backend] = {"available": False}
            continue
        evaluators[backend].evaluate(obs[:1])
        evaluators[backend].evaluate(batch)
    totals = {b: dict.fromkeys(("raw", "raw_s", "batch", "batch_s", "sims", "search_s"), 0.0) for b in evaluators}
    slice_seconds = seconds / len(positions)
    for i, (position, mask) in enumerate(positions):
        single = obs[i : i + 1]
        for backend, evaluator in evaluators.items():
            t = totals[backend]
            for key, x in (("raw", single), ("batch", batch)):
                start = time.perf_counter()
                while (elapsed := time.perf_counter() - start) < slice_seconds / 4:
                    evaluator.evaluate(x)
                    t[key] += len(x)
                t[key + "_s"] += elapsed
            tree = mcts.Tree(np.array([position], np.uint64), np.array([mask], np.uint64), capacity=4096)
            start = time.perf_counter()
            t["sims"] += mcts.search(tree, evaluator, template.CONFIG.search, deadline=start + slice_seconds)
            t["search_s"] += time.perf_counter() - start
    rates = {b: {"sims_per_s": t["sims"] / t["search_s"], "raw_evals_per_s": t["raw"] / t["raw_s"],
                 "raw_batch_evals_per_s": t["batch"] / t["batch_s"]} for b, t in totals.items()}
    for backend, r in rates.items():
        result[backend] = {"available": True, **{k: round(v, 1) for k, v in r.items()},
                           "ratio": round(r["sims_per_s"] / r["raw_evals_per_s"], 3)}
        if backend != "numpy" and "numpy" in rates:
            for key, label in (("sims_per_s", "sims"), ("raw_evals_per_s", "raw"), ("raw_batch_evals_per_s", "batch")):
                result[backend][f"{label}_vs_numpy"] = round(r[key] / rates["numpy"][key], 3)
    probe = bench_submission(path, num_moves=num_moves)
    result["load_seconds"] = probe.pop("load_seconds")
    result["peak_rss_mb"] = probe.pop("peak_rss_mb")
    result["submission"] = probe
    return {**result, **_machine()}


def _probe(name: str) -> str:
    """The source of a probe program (``bench_probes/probe_NAME.py``), run in a fresh interpreter."""
    return (Path(__file__).parent / "bench_probes" / f"probe_{name}.py").read_text()


_SUBMISSION_PROBE = kaggle_io.sandbox_prelude() + _probe("submission")


def bench_submission(model: str | Path, *, num_moves: int = 3, act_timeout: float = 2.0,
                     overage: float = 60.0, timeout: float = 300.0) -> dict[str, Any]:
    """Load time and peak memory of a freshly built ``submission.py`` in a fresh interpreter.

    ``load_seconds`` is executing the file (numpy already imported, as in
    Kaggle's harness), decoding the embedded model with the numpy backend
    (onnxruntime is blocked, as on Kaggle) and one tiny search of
    ``num_parallel`` simulations: what a game's first move pays before it can
    search.  ``peak_rss_mb`` is the child's peak resident size (``VmHWM``) after ``num_moves``
    full-budget moves at ``act_timeout`` with ``overage`` in the bank (Kaggle's
    clock by default).  Raises ``RuntimeError`` if the child fails.
    """
    from connectx_az.tools import builder

    with tempfile.TemporaryDirectory(prefix="connectx_bench_") as tmp:
        submission = Path(tmp) / "submission.py"
        report = builder.build_submission(model, submission, book_path=None)  # the book would answer the moves
        probe = Path(tmp) / "probe.py"
        probe.write_text(_SUBMISSION_PROBE)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        done = subprocess.run(
            [sys.executable, "-I", str(probe), str(submission), str(num_moves), str(act_timeout), str(overage)],
            cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout,
        )
    if done.returncode != 0:
        raise RuntimeError(f"submission probe failed: {done.stderr.strip().splitlines()[-1:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    moves = out.pop("moves")
    return {
        "load_seconds": round(out["load_seconds"], 3), "peak_rss_mb": round(out["peak_rss_mb"], 1),
        "file_mb": round(report.num_bytes / 1e6, 3), "backend": out["backend"],
        **({"load_error": out["load_error"]} if out["backend"] == "uniform" else {}),
        **{k: round(out[k], 3) for k in ("exec_seconds", "decode_seconds", "first_search_seconds")},
        **{k: round(out[k], 1) for k in ("rss_before_mb", "rss_loaded_mb")},
        "num_moves": len(moves), "clock": f"{act_timeout:g}s + {overage:g}s bank",
        "move_seconds": [m["seconds"] for m in moves], "move_simulations": [m["simulations"] for m in moves],
        "tree_nodes": out["tree_nodes"],
    }


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


def _nodes_text(nodes: int | None) -> str:
    """A node count as ``830k`` or ``12.4M``; ``None`` (the median position unproven) as ``over``."""
    if nodes is None:
        return "over"
    if nodes >= 1_000_000:
        return f"{nodes / 1e6:.1f}M"
    return f"{nodes / 1e3:.0f}k" if nodes >= 1_000 else str(nodes)


#: the budgets (seconds a position) whose proven shares ``bench_solver`` reports, as in the issue
SOLVER_BUDGETS = (0.5, 1.3, 5.0)
#: the Pons sets ``bench_solver`` proves by default
SOLVER_SETS = ("Begin-Medium", "Begin-Hard")

_COMPILE_PROBE = _probe("compile")


def _compile_probe(timeout: float = 300.0) -> dict[str, Any]:
    """Import and compile times of the numba kernel in a fresh interpreter (nothing cached on disk)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    done = subprocess.run([sys.executable, "-c", _COMPILE_PROBE], env=env, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"compile probe failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_solver(*, limit: int | None = 40, sets: tuple[str, ...] = SOLVER_SETS,
                 budgets: tuple[float, ...] = SOLVER_BUDGETS, solvers: tuple[str, ...] = ("python", "numba"),
                 on_position: Any = None) -> dict[str, Any]:
    """Weak solves (``best_move(..., weak=True)``) of the first ``limit`` positions of each Pons set.

    Per solver (``python``: ``solver.Solver``; ``numba``: ``solver_numba.CompiledSolver``, 2^18
    entries), each position is solved from an empty table with a deadline of ``max(budgets)``
    seconds; ``within_Xs`` is the share of the set's positions proven in at most X seconds, and
    ``nodes_per_s`` all nodes over all search time.  A proven result that disagrees with the set
    counts in ``wrong`` (always 0 unless the solver is broken); ``overrun_ms`` is the median and
    the largest time past the deadline of the searches it stopped (how promptly it stops);
    ``nodes_by_empty`` maps each count of empty cells to its positions (``n``), how many were
    proven and the median nodes of a proof there, an unproven position counting as more than any
    (``None`` when the median position was not proven: the deadline is too short to tell).  ``compile`` holds the numba
    import and compile times of a fresh interpreter (a game's first move pays both).  Pin the
    process to one core (``taskset -c 1``) to match Kaggle.  ``on_position`` is called after
    each position (a progress bar).
    """
    from connectx_az.benchmarks import pons
    from connectx_az.engine import solver, solver_numba

    result: dict[str, Any] = {"limit": limit, "deadline_s": max(budgets), "solvers": {}}
    if "numba" in solvers:
        result["compile"] = {k: round(v, 3) if isinstance(v, float) else v for k, v in _compile_probe().items()}
        if solver_numba.compile_kernel() is None:
            raise RuntimeError(f"numba kernel unavailable: {solver_numba.kernel_error()}")
    for kind in solvers:
        if kind == "numba":
            searcher: solver.Solver = solver_numba.CompiledSolver(solver_numba.compile_kernel())
        elif kind == "python":
            searcher = solver.Solver()
        else:
            raise ValueError(f"unknown solver {kind!r}; choose python or numba")
        row: dict[str, Any] = {}
        total_nodes = 0
        total_seconds = 0.0
        overruns: list[float] = []
        by_empty: dict[int, list[float]] = {}
        for name in sets:
            positions = pons.load_set(name, limit=limit)
            times: list[float] = []
            wrong = 0
            for p in positions:
                searcher.clear()
                start = time.perf_counter()
                found = searcher.best_move(*pons.position_of(p), weak=True, deadline=start + max(budgets))
                elapsed = time.perf_counter() - start
                total_nodes += searcher.nodes
                total_seconds += elapsed
                num_empty = game.ROWS * game.COLS - len(p.moves)
                by_empty.setdefault(num_empty, []).append(math.inf if found is None else searcher.nodes)
                if found is None:
                    overruns.append(elapsed - max(budgets))
                else:
                    times.append(elapsed)
                    wrong += found[1] != p.result or pons.is_mistake(p, found[0])
                if on_position is not None:
                    on_position()
            shares = {f"within_{b:g}s": round(sum(t <= b for t in times) / len(positions), 3) for b in budgets}
            row[name] = {"n": len(positions), **shares, "wrong": wrong}
        row["nodes_per_s"] = round(total_nodes / total_seconds)
        overruns.sort()
        row["overrun_ms"] = {"n": len(overruns), "median": round(1000 * overruns[len(overruns) // 2], 2),
                             "max": round(1000 * overruns[-1], 2)} if overruns else {"n": 0}
        row["nodes_by_empty"] = {empty: _median_nodes(nodes) for empty, nodes in sorted(by_empty.items())}
        result["solvers"][kind] = row
    try:
        import numba

        numba_version = numba.__version__
    except ImportError:
        numba_version = None
    return {**result, "numba_version": numba_version, "numpy_version": np.__version__, **_machine()}


def _median_nodes(nodes: list[float]) -> dict[str, Any]:
    """``n``, ``proven`` and ``median_nodes`` of one count of empty cells (unproven: ``math.inf``)."""
    median = sorted(nodes)[(len(nodes) - 1) // 2]
    return {"n": len(nodes), "proven": sum(math.isfinite(x) for x in nodes),
            "median_nodes": int(median) if math.isfinite(median) else None}


def format_solver_result(result: dict[str, Any]) -> str:
    """The ``bench_solver`` figures as a few readable lines."""
    lines = [f"solver benchmark ({result['date']}, {result['machine']}, {result['cpus']} cpus, "
             f"numba {result['numba_version']}, numpy {result['numpy_version']}): weak best_move, "
             f"empty table per position, first {result['limit']} positions per set, "
             f"deadline {result['deadline_s']:g} s"]
    if "compile" in result:
        c = result["compile"]
        lines.append(f"  numba in a fresh process: import {c['import_seconds']:.2f} s, "
                     f"compile {c['compile_seconds']:.2f} s")
    for kind, row in result["solvers"].items():
        over = row["overrun_ms"]
        stops = (f"; {over['n']} searches stopped at the deadline, overrun median {over['median']:.2f} ms, "
                 f"max {over['max']:.2f} ms") if over["n"] else ""
        lines.append(f"  {kind:<7} {row['nodes_per_s']:>12,} nodes/s{stops}")
        for name, cells in row.items():
            if isinstance(cells, dict) and name not in ("overrun_ms", "nodes_by_empty"):
                shares = ", ".join(f"{k.removeprefix('within_')} {100 * v:.1f}%" for k, v in cells.items()
                                   if k.startswith("within_"))
                lines.append(f"          {name:<13} proven within {shares} (n {cells['n']}, wrong {cells['wrong']})")
        medians = [f"{empty} {_nodes_text(cell['median_nodes'])} ({cell['proven']}/{cell['n']})"
                   for empty, cell in row["nodes_by_empty"].items()]
        lines.append("          median nodes of a proof by empty cells (proven/positions): " + ", ".join(medians))
    return "\n".join(lines)
