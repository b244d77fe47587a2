"""The GPU check (``connectx-az bench gpu``) in its CPU form: every step with the smoke preset, the budget's
skips, a failing step that costs the others nothing, and the T4 projection's arithmetic."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from connectx_az.cli import main as cli_main  # noqa: E402
from connectx_az.tools import bench_gpu  # noqa: E402
from connectx_az.training import network  # noqa: E402
from connectx_az.training.devices import available_cores  # noqa: E402

CPU_FORM = bench_gpu.CheckConfig(preset="smoke", device="cpu", budget=180.0, generations=2, seconds=0.2,
                                 workers=(0, 2), num_moves=1, act_timeout=0.2, core_counts=(2, 1, 999))


def test_every_step_runs_on_the_cpu_with_the_smoke_preset(tmp_path) -> None:
    record = bench_gpu.run(tmp_path, CPU_FORM)
    steps = record["steps"]
    assert list(steps) == list(bench_gpu.STEPS)
    assert {name: s["status"] for name, s in steps.items()} == dict.fromkeys(bench_gpu.STEPS, "ok")
    assert json.loads((tmp_path / "gpu_check.json").read_text()) == record
    log = (tmp_path / "gpu_check.log").read_text()
    assert all(f"{name}: " in log for name in bench_gpu.STEPS)

    auto = "bfloat16" if network.cpu_has_fast_bfloat16() else "float32"
    assert steps["device"]["device"] == "cpu" and steps["device"]["auto_precision"] == auto
    assert "passed" in steps["tests"]["summary"] and "failed" not in steps["tests"]["summary"]
    assert steps["device"]["chosen_precision"] == auto  # timed on a GPU only
    rows = steps["throughput"]["rows"]
    assert [r["evaluator"] for r in rows] == ["free"] + ["network"] * 8
    assert [(r["precision"], r["workers"]) for r in rows[1:7]] == [
        (p, w) for w in (0, 2) for p in sorted(bench_gpu.PRECISIONS, key=lambda p: p != auto)]  # auto's first
    # then self-play as a run sized for 2 cores and for 1 plays it, pinned to them; past the machine's, skipped
    assert [(r["cores"], r["workers"], r["precision"]) for r in rows[7:]] == [(2, 2, auto), (1, 0, auto)]
    assert steps["throughput"]["skipped_rows"] == [f"sized for 999 cores (this machine has {available_cores()})"]
    assert all(r["selfplay_evals_per_s"] > 0 and r["positions_per_s"] > 0 for r in rows[1:])
    assert rows[0]["tree_evals_per_s_per_core"] > 0
    assert set(steps["throughput"]["forward"]["seconds"]) == {str(b) for b in bench_gpu.FORWARD_BATCHES}

    generations = steps["generations"]
    assert [r["generation"] for r in generations["rows"]] == [0, 1]
    projection = generations["projection"]
    assert projection["generation_seconds"] > 0 and projection["num_generations"] == 2
    assert projection["hours_here"] == round(projection["generation_seconds"] * 2 / 3600, 2)
    assert "unknown" in projection["t4"]  # a CPU has no peak figures to scale by: said, not guessed

    submission = steps["submission"]
    assert (tmp_path / "run" / "submission.py").is_file() and submission["book_entries"] > 0
    assert submission["backend"] == "numpy" and len(submission["move_seconds"]) == 1
    text = bench_gpu.format_result(record)
    assert all(name in text for name in bench_gpu.STEPS) and "float16" in text


def test_a_failing_step_is_recorded_and_the_steps_past_the_budget_are_skipped_with_the_reason(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]

    def slow_throughput(ctx):
        now[0] += 500.0  # the throughput rows took the whole budget
        return {"rows": []}

    def broken_tests(ctx):
        raise RuntimeError("pytest exited 1\n1 failed, 31 passed")

    monkeypatch.setattr(bench_gpu, "_device", lambda ctx: {"name": "stand-in"})
    monkeypatch.setattr(bench_gpu, "_tests", broken_tests)
    monkeypatch.setattr(bench_gpu, "_throughput", slow_throughput)
    record = bench_gpu.run(tmp_path, bench_gpu.CheckConfig(budget=420.0), clock=lambda: now[0])
    status = {name: s["status"] for name, s in record["steps"].items()}
    assert status == {"device": "ok", "tests": "failed", "throughput": "ok", "generations": "skipped",
                      "submission": "skipped"}
    assert record["steps"]["tests"]["reason"] == "RuntimeError: 1 failed, 31 passed"
    assert "-80 s of the budget left" in record["steps"]["generations"]["reason"]
    assert json.loads((tmp_path / "gpu_check.json").read_text())["steps"]["submission"]["status"] == "skipped"


def test_the_t4_projection_scales_each_part_of_a_generation_as_its_docstring_says() -> None:
    rows = [{"seconds": 99.0, "selfplay_seconds": 90.0, "train_seconds": 5.0, "num_evaluations": 1_600_000},
            *[{"seconds": 25.0, "selfplay_seconds": 20.0, "train_seconds": 2.0, "num_evaluations": 1_600_000}] * 2]
    # forward time 1 ms + 1 us a position; tree work 10,000 evaluations a second per core
    figures = {"forward": {"seconds": {"32": 1e-3 + 32e-6, "512": 1e-3 + 512e-6}},
               "rows": [{"evaluator": "free", "tree_evals_per_s_per_core": 10_000.0}]}
    p = bench_gpu.project(rows, num_generations=100, num_parallel_games=64, num_workers=16, figures=figures,
                          device_name="NVIDIA H100 80GB HBM3")
    # here: the median generation after the first (warm-up), times the run's generations
    assert p["generation_seconds"] == 25.0 and p["hours_here"] == round(25.0 * 100 / 3600, 2)
    # here the bound is the tree work (16 x 10,000 < 512 / 1.512 ms); self-play reached 80,000 of its 160,000
    t4 = p["t4"]
    assert t4["efficiency"] == 0.5
    # T4: 4 workers' tree work (40,000) is slower than the network at 128 a call, its per-position time x 989/65
    assert t4["bound"] == "tree work" and t4["tree_evals_per_s"] == 40_000
    assert t4["network_evals_per_s"] == round(128 / (1e-3 + 128e-6 * 989 / 65))
    train = 2.0 * 67 / 8.1
    rest = 25.0 - 20.0 - 2.0
    assert t4["hours_at_best"] == round((1_600_000 / 40_000 + train + rest) * 100 / 3600, 2)
    assert t4["hours"] == round((1_600_000 / 20_000 + train + rest) * 100 / 3600, 2)
    # The network scores only what the searches' cache does not answer: with a quarter of the positions its
    # share (400,000 / 43,425 a second on the T4) falls below the tree work's (1,600,000 / 80,000), which bounds.
    cached = [{**row, "num_network_evaluations": 400_000} for row in rows]
    figures["rows"][0]["tree_evals_per_s_per_core"] = 20_000.0
    t4 = bench_gpu.project(cached, num_generations=100, num_parallel_games=64, num_workers=16, figures=figures,
                           device_name="NVIDIA H100 80GB HBM3")["t4"]
    assert t4["bound"] == "tree work" and t4["efficiency"] == 0.25  # here: 5 s of tree work, 20 s measured
    assert t4["hours_at_best"] == round((1_600_000 / 80_000 + train + rest) * 100 / 3600, 2)
    uncached = bench_gpu.project(rows, num_generations=100, num_parallel_games=64, num_workers=16, figures=figures,
                                 device_name="NVIDIA H100 80GB HBM3")["t4"]
    assert uncached["bound"] == "network"
    network_seconds = 1_600_000 / uncached["network_evals_per_s"]
    assert uncached["hours_at_best"] == round((network_seconds + train + rest) * 100 / 3600, 2)
    # sized for the T4 box (256 in flight a worker) and with self-play measured here on 4 cores, pinned: the
    # network is called with 512 positions, and the tree work runs at the measured rate
    measured = {**figures, "rows": [*figures["rows"], {"cores": 4, "selfplay_evals_per_s": 50_000.0}]}
    t4 = bench_gpu.project(rows, num_generations=100, num_parallel_games=64, num_workers=16, figures=measured,
                           device_name="NVIDIA H100 80GB HBM3", t4_parallel_games=256)["t4"]
    network_rate = 512 / (1e-3 + 512e-6 * 989 / 65)
    assert t4["network_evals_per_s"] == round(network_rate) and t4["tree_rate_measured_on_4_cores"]
    likely = max(1_600_000 / network_rate, 1_600_000 / 50_000) + train + rest
    assert t4["hours"] == round(likely * 100 / 3600, 2) and t4["generations_in_11h"] == int(11 * 3600 // likely)
    cpu = bench_gpu.project(rows, num_generations=100, num_parallel_games=64, num_workers=2, figures=figures,
                            device_name="cpu")
    assert cpu["hours_here"] == p["hours_here"] and "unknown" in cpu["t4"]


def test_the_command_refuses_a_budget_that_is_no_time_in_one_line(capsys: pytest.CaptureFixture) -> None:
    assert cli_main.main(["bench", "gpu", "--budget", "0", "--out", "unused"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --budget") and "\n" not in err
