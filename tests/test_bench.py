"""The solver benchmark: its figures' shape and the ``bench solver`` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from connectx_az import bench

ROOT = Path(__file__).resolve().parents[1]


def test_bench_solver_python_only_needs_no_numba() -> None:
    calls = []
    result = bench.bench_solver(limit=3, sets=("Middle-Easy", "End-Easy"), budgets=(1e-9, 2.0),
                                solvers=("python",), on_position=lambda: calls.append(1))
    assert len(calls) == 6 and "compile" not in result
    row = result["solvers"]["python"]
    for name in ("Middle-Easy", "End-Easy"):
        # these positions take the Python solver milliseconds: all proven in 2 s, none in a nanosecond
        assert row[name] == {"n": 3, "within_1e-09s": 0.0, "within_2s": 1.0, "wrong": 0}
    assert row["nodes_per_s"] > 0 and row["overrun_ms"] == {"n": 0}
    assert "proven within" in bench.format_solver_result(result)


def test_bench_solver_reports_overruns_of_stopped_searches() -> None:
    # 1 ms cannot prove these Begin-Hard positions in pure Python: every search is stopped
    result = bench.bench_solver(limit=2, sets=("Begin-Hard",), budgets=(0.001,), solvers=("python",))
    row = result["solvers"]["python"]
    assert row["Begin-Hard"]["within_0.001s"] == 0.0
    assert row["overrun_ms"]["n"] == 2 and 0 <= row["overrun_ms"]["median"] <= row["overrun_ms"]["max"]
    assert "2 searches stopped at the deadline" in bench.format_solver_result(result)


def test_bench_solver_command_with_numba() -> None:
    pytest.importorskip("numba")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "connectx_az.cli", "bench", "solver", "--limit", "1",
                           "--solvers", "numba", "--json"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["compile"]["error"] is None and result["compile"]["compile_seconds"] > 0
    assert set(result["solvers"]) == {"numba"}
    row = result["solvers"]["numba"]
    assert row["Begin-Medium"]["n"] == row["Begin-Hard"]["n"] == 1
    assert row["Begin-Medium"]["wrong"] == row["Begin-Hard"]["wrong"] == 0
    assert row["nodes_per_s"] > 0
