"""``bench precision``: float32 against bfloat16 on the Pons positions, figure by figure."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")

from connectx_az.cli import main as cli_main  # noqa: E402
from connectx_az.tools import bench_precision  # noqa: E402
from connectx_az.training.network import save_checkpoint  # noqa: E402
from tests.conftest import make_small_net  # noqa: E402


def test_agreement_measures_the_probabilities_over_legal_moves_and_the_value() -> None:
    legal = np.array([[True, True, False], [True, True, True]])
    first = (np.array([[0.0, 0.0, 9.0], [1.0, 0.0, 0.0]]), np.array([0.5, -0.5]))
    second = (np.array([[0.0, np.log(3.0), -9.0], [1.0, 0.0, 0.0]]), np.array([0.25, -0.5]))
    got = bench_precision.agreement(first, second, legal)
    # the illegal column counts for nothing; the first position's probabilities go from 1/2, 1/2 to 1/4, 3/4
    assert got["policy_max"] == pytest.approx(0.25) and got["policy_mean"] == pytest.approx(0.5 / 5)
    assert got["top_move_differs"] == pytest.approx(0.5)
    assert got["value_max"] == pytest.approx(0.25) and got["value_mean"] == pytest.approx(0.125)


def test_the_bench_grades_both_precisions_paired_and_times_each(tmp_path, capsys) -> None:
    checkpoint = tmp_path / "net.pt"
    save_checkpoint(checkpoint, make_small_net(2))
    result = bench_precision.run(checkpoint, limit=6, sets=["Begin-Easy", "End-Easy"], sims=4, seconds=0.05, batch=4)
    assert list(result["sets"]) == ["Begin-Easy", "End-Easy"]
    for row in result["sets"].values():
        assert row["n"] == 6 and 0 <= row["policy_mean"] <= row["policy_max"] < 0.2 and row["value_max"] < 0.2
        for mode in ("policy", "mcts4"):
            graded = row[mode]
            both_right = graded["float32"] - graded["only_bfloat16_right"]
            assert both_right == graded["bfloat16"] - graded["only_float32_right"]
    assert all(v > 0 for v in result["evals_per_s"].values())
    assert result["train_batch"] == 384 and all(v > 0 for v in result["train_steps_per_s"].values())
    text = bench_precision.format_result(result)
    assert "Begin-Easy" in text and "network evaluations a second at batch 4" in text and "mcts4" in text
    assert "training steps a second at 384 positions a step" in text

    assert cli_main.main(["bench", "precision", "--checkpoint", str(checkpoint), "--limit", "2", "--sets", "End-Easy",
                     "--seconds", "0.1"]) == 0
    assert "End-Easy" in capsys.readouterr().out
    assert cli_main.main(["bench", "precision", "--checkpoint", str(checkpoint), "--limit", "2", "--sets", "End-Easy",
                     "--seconds", "0.1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sets"]["End-Easy"]["n"] == 2  # the JSON alone on stdout
    assert cli_main.main(["bench", "precision", "--checkpoint", str(tmp_path / "none.pt")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_benchmark_names_the_cpu_model_it_ran_on() -> None:
    from connectx_az.tools import bench

    assert bench.cpu_name() and bench.machine()["cpu"] == bench.cpu_name()
    line = bench.format_result("solver", {**bench.machine(), "rate": 1}).splitlines()[0]
    assert bench.cpu_name() in line and line.startswith("solver benchmark (")
