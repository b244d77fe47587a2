"""The benchmarks: the self-play benchmark's tree-work mode and the leaf depth it reports; the solver
benchmark's figures and its ``bench solver`` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from connectx_az.engine import game
from connectx_az.tools import bench_agent, bench_selfplay, bench_solver
from connectx_az.training import config, selfplay

ROOT = Path(__file__).resolve().parents[1]


class _Uniform:
    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((len(obs), 7), np.float32), np.zeros(len(obs), np.float32)


def _depth(evaluator: object, simulations: int) -> float:
    cfg = config.make_config("smoke", overrides=[f"mcts.num_simulations={simulations}"])
    _, stats = selfplay.play_games(evaluator, 8, cfg.selfplay, cfg.mcts, np.random.default_rng(0))
    return stats.mean_leaf_depth


def test_mean_leaf_depth_counts_plies_below_the_root() -> None:
    # one simulation a move expands the root and adds one child: every leaf is one ply down
    assert _depth(_Uniform(), 1) == 1.0
    # uneven priors send the walks down fewer, deeper lines than uniform ones
    assert 1.0 < _depth(_Uniform(), 40) < _depth(bench_selfplay.FreeEvaluator(), 40)


def test_bench_selfplay_free_evaluator_reports_tree_work_per_core() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "connectx_az.cli", "bench", "selfplay", "--preset", "smoke",
                           "--evaluator", "free", "--batch", "4", "8", "--json"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["evaluator"] == "free" and result["preset"] == "smoke"
    assert [row["batch"] for row in result["scaling"]] == [4, 8]
    for row in result["scaling"]:
        assert row["tree_evals_per_s"] > 0 and row["tree_evals_per_s_per_core"] == row["tree_evals_per_s"]
        assert row["mean_leaf_depth"] >= 1.0
        assert "raw_evals_per_s" not in row  # no network was run


def test_bench_solver_python_only_needs_no_numba() -> None:
    calls = []
    result = bench_solver.bench_solver(limit=3, sets=("Middle-Easy", "End-Easy"), budgets=(1e-9, 2.0),
                                solvers=("python",), on_position=lambda: calls.append(1))
    assert len(calls) == 6 and "compile" not in result
    row = result["solvers"]["python"]
    for name in ("Middle-Easy", "End-Easy"):
        # these positions take the Python solver milliseconds: all proven in 2 s, none in a nanosecond
        assert row[name] == {"n": 3, "within_1e-09s": 0.0, "within_2s": 1.0, "wrong": 0}
    assert row["nodes_per_s"] > 0 and row["overrun_ms"] == {"n": 0}
    by_empty = row["nodes_by_empty"]
    assert sum(cell["n"] for cell in by_empty.values()) == sum(cell["proven"] for cell in by_empty.values()) == 6
    assert all(isinstance(cell["median_nodes"], int) and cell["median_nodes"] > 0 for cell in by_empty.values())
    assert all(1 <= empty <= game.ROWS * game.COLS for empty in by_empty)
    assert "proven within" in bench_solver.format_solver_result(result)


def test_median_nodes_counts_an_unproven_position_as_more_than_any() -> None:
    inf = float("inf")
    assert bench_solver._median_nodes([5, 1, inf]) == {"n": 3, "proven": 2, "median_nodes": 5}
    assert bench_solver._median_nodes([5, inf, inf]) == {"n": 3, "proven": 1, "median_nodes": None}
    assert bench_solver._median_nodes([7, 3, 9, 1]) == {"n": 4, "proven": 4, "median_nodes": 3}  # the lower middle
    assert [bench_solver._nodes_text(n) for n in (None, 999, 20_000, 2_500_000)] == ["over", "999", "20k", "2.5M"]


def test_bench_solver_reports_overruns_of_stopped_searches() -> None:
    # 1 ms cannot prove these Begin-Hard positions in pure Python: every search is stopped
    result = bench_solver.bench_solver(limit=2, sets=("Begin-Hard",), budgets=(0.001,), solvers=("python",))
    row = result["solvers"]["python"]
    assert row["Begin-Hard"]["within_0.001s"] == 0.0
    assert row["overrun_ms"]["n"] == 2 and 0 <= row["overrun_ms"]["median"] <= row["overrun_ms"]["max"]
    assert "2 searches stopped at the deadline" in bench_solver.format_solver_result(result)
    assert all(cell["proven"] == 0 and cell["median_nodes"] is None for cell in row["nodes_by_empty"].values())
    assert "over (0/" in bench_solver.format_solver_result(result)


@pytest.mark.slow  # compiles numba from scratch, in a process of its own
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


def test_bench_agent_times_every_backend_in_turns(small_onnx) -> None:
    result = bench_agent.bench_agent(small_onnx, seconds=0.4, num_positions=2, num_moves=0)
    for backend in ("onnxruntime", "numpy"):
        row = result[backend]
        assert row["available"] and row["sims_per_s"] > 0 and row["raw_evals_per_s"] > 0
        assert row["raw_batch_evals_per_s"] > 0
    assert {"sims_vs_numpy", "raw_vs_numpy", "batch_vs_numpy"} <= set(result["onnxruntime"])
    assert "sims_vs_numpy" not in result["numpy"]
    assert result["numpy"]["compiled_sims_per_s"] > 0  # the search compiled (numba is in the test extra)
    assert result["submission"]["backend"] == "numpy" and result["submission"]["num_moves"] == 0
