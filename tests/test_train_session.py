"""Runs that outlive notebook sessions: the time budget, and adopting a run saved by an earlier session.

Kaggle ends a session after about 12 hours and shows the next session the last
version's output read-only under ``/kaggle/input``; a temporary folder stands
in for it here.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from connectx_az.training import config, runs, train
from connectx_az.training.network import NetConfig, PolicyValueNet, load_checkpoint, save_checkpoint

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ["num_generations=3", "selfplay.num_games=4", "selfplay.num_parallel_games=4", "eval_positions=0"]


def _generations(run_dir: Path) -> list[int]:
    return [json.loads(line)["generation"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _next_generation(run_dir: Path) -> int:
    return int(load_checkpoint(run_dir / "checkpoint.pt")[1]["generation"])


@pytest.mark.parametrize(("text", "seconds"), [("90", 90.0), ("90s", 90.0), ("45m", 2700.0), ("11.5h", 41400.0),
                                               (" 2H ", 7200.0), (".5m", 30.0), (30, 30.0), ("2h30m", 9000.0),
                                               ("1h 5m 30s", 3930.0), ("2h40m", 9600.0)])
def test_durations_parse_with_or_without_a_unit(text: str, seconds: float) -> None:
    assert runs.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["0", "0s", "-1h", "", "ten minutes", "5d", "1e3", "30m2h", "1h1h", "2h30", "0h0m"])
def test_a_duration_that_is_not_positive_is_a_config_error(text: str) -> None:
    with pytest.raises(config.ConfigError, match="not a positive duration; .* 90s, 45m, 11.5h or 2h30m"):
        runs.parse_duration(text)


def test_the_time_budget_stops_between_generations_and_the_run_resumes(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    run_dir = tmp_path / "run"
    now = [0.0]

    def after_generation(row: dict) -> None:
        now[0] = 100.0  # the budget is used up once generation 0 is done

    cfg = config.make_config("smoke", overrides=SMOKE)
    with caplog.at_level(logging.WARNING, logger="connectx_az.training.train"):
        train.run(run_dir, cfg, progress=False, time_budget=100.0, clock=lambda: now[0],
                  on_generation=after_generation)
    assert _generations(run_dir) == [0] and _next_generation(run_dir) == 1
    [record] = [r for r in caplog.records if r.name == "connectx_az.training.train"]
    assert "stopped before generation 1 of 3" in record.getMessage()
    assert f"resume with: connectx-az train --resume {run_dir}" in record.getMessage()

    # Resumed with a budget shorter than the last generation took: it stops at once, losing nothing.
    caplog.clear()
    last_seconds = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])["seconds"]
    now[0] = 0.0
    train.run(run_dir, resume=True, progress=False, time_budget=last_seconds / 2, clock=lambda: now[0])
    assert _generations(run_dir) == [0] and _next_generation(run_dir) == 1
    assert any("stopped before generation 1 of 3" in r.getMessage() for r in caplog.records)

    train.run(run_dir, resume=True, progress=False, time_budget=3600.0)
    assert _generations(run_dir) == [0, 1, 2] and _next_generation(run_dir) == 3


def test_train_cli_time_budget(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    args = [sys.executable, "-m", "connectx_az.cli", "train", str(tmp_path / "run"), "--preset", "smoke", "--quiet",
            *(a for s in SMOKE for a in ("--set", s))]
    bad = subprocess.run([*args, "--time-budget=-5m"], env=env, cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.splitlines() == ["error: time budget '-5m' is not a positive duration; write seconds or a "
                                       "number with a unit, e.g. 90s, 45m, 11.5h or 2h30m"]
    assert not (tmp_path / "run").exists()
    # a budget far shorter than a generation: the first one runs, then it stops cleanly, status 0
    done = subprocess.run([*args, "--time-budget", "0.001s"], env=env, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "stopped before generation 1 of 3" in done.stderr and "resume with" in done.stderr
    assert _generations(tmp_path / "run") == [0]
    assert (tmp_path / "run" / "config.json").is_file()


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-generation smoke run, as an earlier session left it."""
    run_dir = tmp_path_factory.mktemp("earlier") / "run"
    train.run(run_dir, config.make_config("smoke", overrides=SMOKE), progress=False, num_generations=1)
    return run_dir


def _attach(run: Path, folder: Path) -> Path:
    """Copy ``run`` to ``folder`` and make the copy read-only, as Kaggle shows an attached output."""
    import shutil

    shutil.copytree(run, folder)
    for path in [folder, *folder.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    return folder


def test_an_attached_run_is_found_copied_and_resumed(saved_run: Path, tmp_path: Path) -> None:
    inputs = tmp_path / "input"
    (inputs / "connectx-az-package").mkdir(parents=True)
    (inputs / "connectx-az-package" / "connectx_az-0.1.0-py3-none-any.whl").write_bytes(b"a wheel")
    attached = _attach(saved_run, inputs / "my-notebook" / "runs" / "connectx_az")
    assert runs.find_attached_run(inputs) == attached
    assert runs.find_attached_run(tmp_path / "nothing-here") is None
    assert runs.find_attached_run(inputs / "connectx-az-package") is None

    run_dir = tmp_path / "working" / "runs" / "connectx_az"
    assert runs.adopt_run(attached, run_dir) == 1
    assert sorted(p.name for p in run_dir.parent.iterdir()) == ["connectx_az"]  # no partial copy left
    train.run(run_dir, resume=True, progress=False)
    assert _generations(run_dir) == [0, 1, 2] and _next_generation(run_dir) == 3
    assert _generations(attached) == [0]  # the input is untouched

    # the more advanced of two attached runs wins
    newer = _attach(run_dir, inputs / "later-version" / "run")
    assert runs.find_attached_run(inputs) == newer


def test_what_is_not_a_resumable_run_is_refused_with_one_line(saved_run: Path, tmp_path: Path) -> None:
    no_config = tmp_path / "input" / "weights-only"
    no_config.mkdir(parents=True)
    (no_config / "checkpoint.pt").write_bytes((saved_run / "checkpoint.pt").read_bytes())
    with pytest.raises(config.ConfigError, match="is not a training run \\(no config.json\\)"):
        runs.find_attached_run(tmp_path / "input")

    other_net = tmp_path / "other-net"
    _attach(saved_run, other_net).chmod(0o755)
    (other_net / "checkpoint.pt").chmod(0o644)
    save_checkpoint(other_net / "checkpoint.pt", PolicyValueNet(NetConfig(num_blocks=2, num_filters=8)),
                    generation=1)
    with pytest.raises(config.ConfigError,
                       match="holds a 2x8 p32 v32\\+pool network but .* describes a 1x16 p32 v32\\+pool one"):
        runs.adopt_run(other_net, tmp_path / "run")
    assert not (tmp_path / "run").exists()

    broken = tmp_path / "broken"
    _attach(saved_run, broken).chmod(0o755)
    (broken / "checkpoint.pt").chmod(0o644)
    (broken / "checkpoint.pt").write_bytes(b"truncated")
    with pytest.raises(config.ConfigError, match="not a readable checkpoint"):
        runs.check_run(broken)

    # a RUN_DIR that already holds something is never overwritten
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("mine")
    with pytest.raises(config.ConfigError, match="is not empty"):
        runs.adopt_run(saved_run, occupied)
    assert [p.name for p in occupied.iterdir()] == ["notes.txt"]
