"""The GPU check (``lab/device/gpu_check.py``, ``make gpu-check``) in its CPU form: every step with the smoke
preset, the budget's skips, and a failing step that costs the others nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab" / "device"))
import gpu_check  # noqa: E402
import t4_projection  # noqa: E402

from connectx_az.training import network  # noqa: E402
from connectx_az.training.devices import available_cores  # noqa: E402

CPU_FORM = gpu_check.CheckConfig(preset="smoke", device="cpu", budget=180.0, generations=2, seconds=0.2,
                                 workers=(0, 2), num_moves=1, act_timeout=0.2, core_counts=(2, 1, 999))


def test_every_step_runs_on_the_cpu_with_the_smoke_preset(tmp_path) -> None:
    record = gpu_check.run(tmp_path, CPU_FORM)
    steps = record["steps"]
    assert list(steps) == list(gpu_check.STEPS)
    assert {name: s["status"] for name, s in steps.items()} == dict.fromkeys(gpu_check.STEPS, "ok")
    assert json.loads((tmp_path / "gpu_check.json").read_text()) == record
    log = (tmp_path / "gpu_check.log").read_text()
    assert all(f"{name}: " in log for name in gpu_check.STEPS)

    auto = "bfloat16" if network.cpu_has_fast_bfloat16() else "float32"
    assert steps["device"]["device"] == "cpu" and steps["device"]["auto_precision"] == auto
    assert "passed" in steps["tests"]["summary"] and "failed" not in steps["tests"]["summary"]
    assert steps["device"]["chosen_precision"] == auto  # timed on a GPU only
    rows = steps["throughput"]["rows"]
    here = available_cores()
    sized = [c for c in CPU_FORM.core_counts if c <= here]  # (2, 1) on two cores, (1,) pinned to one
    assert [r["evaluator"] for r in rows] == ["free"] + ["network"] * (6 + len(sized))
    assert [(r["precision"], r["workers"]) for r in rows[1:7]] == [
        (p, w) for w in (0, 2) for p in sorted(gpu_check.PRECISIONS, key=lambda p: p != auto)]  # auto's first
    # then self-play as a run sized for 2 cores and for 1 plays it, pinned to them; past the machine's, skipped
    assert [(r["cores"], r["workers"], r["precision"]) for r in rows[7:]] == [(c, c if c > 1 else 0, auto)
                                                                               for c in sized]
    assert steps["throughput"]["skipped_rows"] == [f"sized for {c} cores (this machine has {here})"
                                                   for c in CPU_FORM.core_counts if c > here]
    assert all(r["selfplay_evals_per_s"] > 0 and r["positions_per_s"] > 0 for r in rows[1:])
    assert rows[0]["tree_evals_per_s_per_core"] > 0
    assert set(steps["throughput"]["forward"]["seconds"]) == {str(b) for b in t4_projection.FORWARD_BATCHES}

    generations = steps["generations"]
    assert [r["generation"] for r in generations["rows"]] == [0, 1]
    projection = generations["projection"]
    assert projection["generation_seconds"] > 0 and projection["num_generations"] == 2
    assert projection["hours_here"] == round(projection["generation_seconds"] * 2 / 3600, 2)
    assert "unknown" in projection["t4"]  # a CPU has no peak figures to scale by: said, not guessed

    submission = steps["submission"]
    assert (tmp_path / "run" / "submission.py").is_file() and submission["book_entries"] > 0
    assert submission["backend"] == "numpy" and len(submission["move_seconds"]) == 1
    text = gpu_check.format_result(record)
    assert all(name in text for name in gpu_check.STEPS) and "float16" in text


def test_a_failing_step_is_recorded_and_the_steps_past_the_budget_are_skipped_with_the_reason(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]

    def slow_throughput(ctx):
        now[0] += 500.0  # the throughput rows took the whole budget
        return {"rows": []}

    def broken_tests(ctx):
        raise RuntimeError("pytest exited 1\n1 failed, 31 passed")

    monkeypatch.setattr(gpu_check, "_device", lambda ctx: {"name": "stand-in"})
    monkeypatch.setattr(gpu_check, "_tests", broken_tests)
    monkeypatch.setattr(gpu_check, "_throughput", slow_throughput)
    record = gpu_check.run(tmp_path, gpu_check.CheckConfig(budget=420.0), clock=lambda: now[0])
    status = {name: s["status"] for name, s in record["steps"].items()}
    assert status == {"device": "ok", "tests": "failed", "throughput": "ok", "generations": "skipped",
                      "submission": "skipped"}
    assert record["steps"]["tests"]["reason"] == "RuntimeError: 1 failed, 31 passed"
    assert "-80 s of the budget left" in record["steps"]["generations"]["reason"]
    assert json.loads((tmp_path / "gpu_check.json").read_text())["steps"]["submission"]["status"] == "skipped"


def test_the_command_refuses_a_budget_that_is_no_time_in_one_line(capsys: pytest.CaptureFixture) -> None:
    assert gpu_check.main(["--budget", "0", "--out", "unused"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --budget") and "\n" not in err
