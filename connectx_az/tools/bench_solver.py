"""``bench solver``: weak solves of Pons positions by the pure-Python and the compiled solver, and numba's compile.

The compile is timed in a fresh interpreter (``bench_probes/probe_compile.py``), nothing cached on disk."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np

from connectx_az.engine import game
from connectx_az.tools import bench


def _nodes_text(nodes: int | None) -> str:
    """A node count as ``830k`` or ``12.4M``; ``None`` (the median position unproven) as ``over``."""
    if nodes is None:
        return "over"
    if nodes >= 1_000_000:
        return f"{nodes / 1e6:.1f}M"
    return f"{nodes / 1e3:.0f}k" if nodes >= 1_000 else str(nodes)


#: the budgets (seconds a position) whose proven shares ``bench_solver`` reports
SOLVER_BUDGETS = (0.5, 1.3, 5.0)
#: the Pons sets ``bench_solver`` proves by default
SOLVER_SETS = ("Begin-Medium", "Begin-Hard")
_COMPILE_PROBE = bench.probe_source("compile")


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

    Per solver (``python``: ``solver.Solver``; ``numba``: ``solver_numba.CompiledSolver``), each position is solved
    from an empty table with a deadline of ``max(budgets)`` seconds.  ``within_Xs``: the share of the set's positions
    proven within X seconds; ``nodes_per_s``: all nodes over all search time; ``wrong``: proven results that disagree
    with the set (0 unless the solver is broken); ``overrun_ms``: the median and largest time past the deadline of
    the searches it stopped; ``nodes_by_empty``: per count of empty cells, its positions (``n``), how many were
    proven and the median nodes of a proof, an unproven position counting as more than any (``None`` when the median
    position was not proven).  ``compile``: numba's import and compile times in a fresh interpreter (a game's first
    move pays both).  Pin the process to one core (``taskset -c 1``) to match Kaggle.  ``on_position`` after each
    position."""
    from connectx_az.engine import solver, solver_numba
    from connectx_az.testsets import pons

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
    return {**result, "numba_version": numba_version, "numpy_version": np.__version__, **bench.machine()}


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
