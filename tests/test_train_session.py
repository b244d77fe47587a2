"""Runs that outlive notebook sessions: the time budget, and adopting a run saved by an earlier session.

Kaggle ends a session after about 12 hours and shows the next session the last
version's output read-only under ``/kaggle/input``; a temporary folder stands
in for it here.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import time
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
    ticks = itertools.count(0.0, 60.0)  # each reading of the clock is a minute later: generation 0 takes one

    cfg = config.make_config("smoke", overrides=SMOKE)
    with caplog.at_level(logging.WARNING, logger="connectx_az.training.train"):
        train.run(run_dir, cfg, progress=False, time_budget=100.0, clock=lambda: next(ticks))
    assert _generations(run_dir) == [0] and _next_generation(run_dir) == 1
    first, record = [r for r in caplog.records if r.name == "connectx_az.training.train"]
    assert "the first generation runs whatever the budget" in first.getMessage()
    assert "stopped before generation 1 of 3" in record.getMessage()
    assert f"resume with: .venv/bin/connectx-az train --resume {run_dir}" in record.getMessage()

    # Resumed with a budget shorter than the last generation took: it stops at once, losing nothing.
    caplog.clear()
    last_seconds = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])["seconds"]
    train.run(run_dir, resume=True, progress=False, time_budget=last_seconds / 2, clock=lambda: 0.0)
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
    assert bad.stderr.splitlines() == ["error: --time-budget '-5m' is not a positive duration; write seconds or a "
                                       "number with a unit, e.g. 90s, 45m, 11.5h or 2h30m"]
    assert not (tmp_path / "run").exists()
    # a budget far shorter than a generation: the first one runs, then it stops cleanly, status 0
    done = subprocess.run([*args, "--time-budget", "0.001s"], env=env, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "stopped before generation 1 of 3" in done.stderr and "resume with" in done.stderr
    assert "the first generation runs whatever the budget" in done.stderr  # said before it runs past the budget
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


def test_a_timed_run_anneals_on_its_clock_ends_inside_its_time_and_resumes_to_the_same_deadline(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    run_dir = tmp_path / "run"
    ticks = itertools.count(0.0, 5.0)  # each generation takes 5 s of the run's clock
    cfg = config.make_config("smoke", overrides=[*SMOKE, "total_time=32"])  # num_generations=3 is not used
    with caplog.at_level(logging.INFO, logger="connectx_az.training.train"):
        train.run(run_dir, cfg, progress=False, clock=lambda: next(ticks))
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    # 6 generations: a 7th would end at 35 s, past the 32
    assert [r["generation"] for r in rows] == list(range(6)) and _next_generation(run_dir) == 6
    assert [r["run_seconds"] for r in rows] == [5.0, 10.0, 15.0, 20.0, 25.0, 30.0]
    # the cosine follows the time: the rate of each generation is the one at the share spent when it ends (the
    # first, its duration unknown, at the start); the last trains near the final rate
    train_cfg = cfg.train
    assert rows[0]["lr"] == train_cfg.lr
    for row in rows[1:]:
        assert row["lr"] == pytest.approx(train_cfg.lr_at_fraction(row["run_seconds"] / 32))
    assert rows[-1]["lr"] < train_cfg.lr_min + 0.05 * (train_cfg.lr - train_cfg.lr_min)
    assert any("about 6 generations in the total time" in r.getMessage() for r in caplog.records)
    assert any("total time is spent: 6 generations" in r.getMessage() for r in caplog.records)

    # resumed, it has nothing left to do; resumed with a longer total, it goes on to the new deadline
    train.run(run_dir, resume=True, progress=False, clock=lambda: next(ticks))
    assert _next_generation(run_dir) == 6
    train.run(run_dir, config.override(cfg, ["total_time=50"]), resume=True, progress=False,
              clock=lambda: next(ticks))
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["run_seconds"] for r in rows][6:] == [35.0, 40.0, 45.0, 50.0]
    assert config.load_config(run_dir).total_time == 50
    # turned into a run of fewer generations than it has done, it is refused, its config untouched
    with pytest.raises(config.ConfigError, match="has done 10 generations already; num_generations=3 would end it"):
        train.run(run_dir, config.override(cfg, ["total_time=0"]), resume=True, progress=False)
    assert config.load_config(run_dir).total_time == 50


def test_a_timed_run_keeps_its_last_checkpoint_and_its_card_names_the_total_time(tmp_path: Path) -> None:
    ticks = itertools.count(0.0, 5.0)
    cfg = config.make_config("smoke", overrides=[*SMOKE, "total_time=12"])
    train.run(tmp_path / "run", cfg, progress=False, keep_every=5, clock=lambda: next(ticks))
    assert sorted(p.name for p in (tmp_path / "run" / "snapshots").iterdir()) == ["gen_0002.pt"]
    summary = train.summarize(runs.read_rows(tmp_path / "run"), config.to_dict(cfg))
    assert summary["command"] == ("connectx-az train RUN --preset smoke --workers 0 --total-time 12s "
                                  "--set selfplay.num_games=4 --set eval_positions=0")
    assert summary["total_time"] == "12s"


@pytest.mark.parametrize(("overrides", "message"), [
    (["total_time=-1"], "total_time must be >= 0"),
    (["total_time=60", "train.lr_schedule_start=3"], "lr_schedule_start counts generations"),
])
def test_a_bad_total_time_is_a_config_error(overrides: list[str], message: str) -> None:
    with pytest.raises(config.ConfigError, match=message):
        config.make_config("smoke", overrides=overrides)


def test_train_cli_sizes_the_run_prints_a_line_a_generation_and_says_what_comes_next(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cli = [sys.executable, "-m", "connectx_az.cli", "train"]
    run_dir = tmp_path / "run"
    settings = [a for s in ("selfplay.num_games=4", "eval_positions=0") for a in ("--set", s)]
    done = subprocess.run([*cli, str(run_dir), "--preset", "smoke", "--quiet", "--workers", "0", "--total-time", "4s",
                           *settings], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("machine: ") and "self-play in the training process, 4 games in flight" in lines[0]
    generations = [line for line in lines if line.startswith("generation ")]
    assert generations and generations[0].startswith("generation 1 (") and "% of 4 s): " in generations[0]
    assert lines[-1].startswith(f"the run is complete: {len(generations)} generations in ")
    # the hint names an export of this run's own, and the command as the README spells it
    assert lines[-1].endswith(f"next: .venv/bin/connectx-az export {run_dir} --out build/run.onnx, then "
                              ".venv/bin/connectx-az build --model build/run.onnx")
    assert config.load_config(run_dir).total_time == 4.0
    # a run ends inside its time plus at most one generation: its last generation began inside it
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert (rows[-2]["run_seconds"] if len(rows) > 1 else 0.0) <= 4

    again = subprocess.run([*cli, "--resume", str(run_dir), "--quiet"], env=env, cwd=ROOT, capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0 and again.stdout.splitlines() == [lines[-1]], again.stderr
    for wrong, message in [(["--preset", "cpu"], "--preset, --config and --init-model choose a new run's settings"),
                           ([str(tmp_path / "other")], "give the run's folder once"),
                           (["--workers", "2"], "--workers sizes a new run")]:
        refused = subprocess.run([*cli, "--resume", str(run_dir), *wrong], env=env, cwd=ROOT, capture_output=True,
                                 text=True, timeout=300)
        assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1, refused.stderr
        assert message in refused.stderr


def test_ctrl_c_says_where_the_run_stands_and_how_to_resume_it(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "connectx_az.cli", "train", str(run_dir), "--preset", "smoke",
                             "--quiet", "--workers", "0", "--set", "num_generations=1000",
                             "--set", "selfplay.num_games=4", "--set", "eval_positions=0"],
                            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (run_dir / "checkpoint.pt").is_file():  # a generation saved: Ctrl-C then lands in a later one
        assert proc.poll() is None and time.time() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    last = out.splitlines()[-1]
    assert last.startswith(f"interrupted: the run is saved after {_next_generation(run_dir)} generations (of 1000, ")
    assert last.endswith(f"; resume with: .venv/bin/connectx-az train --resume {run_dir}")
    assert "Traceback" not in err


@pytest.mark.parametrize(("args", "message"), [
    (["--resume", "README.md"], "--resume README.md: not a run's folder (one that holds config.json); "),
    (["RUN", "--total-time", "-5m"], "--total-time '-5m' is not a positive duration; "),
    (["RUN", "--total-time=0"], "--total-time '0' is not a positive duration; "),
    (["RUN", "--time-budget", "-90s"], "--time-budget '-90s' is not a positive duration; "),
    (["RUN", "--preset", "tiny"], "--preset tiny: choose one of smoke, cpu, gpu"),
    (["RUN", "--device", "tpu"], "--device tpu: unknown device 'tpu'; use auto, cpu or cuda"),
])
def test_a_bad_train_option_is_refused_in_one_line_that_names_it_and_its_value(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    from connectx_az.cli.main import main

    args = [str(tmp_path / "run") if a == "RUN" else a for a in args]
    assert main(["train", *args, "--show-config"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {message}"), err
    assert not (tmp_path / "run").exists()


def test_workers_above_the_cores_found_are_capped_with_a_line(capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from connectx_az.cli.main import main
    from connectx_az.training import devices

    monkeypatch.setattr(devices, "available_cores", lambda: 2)
    assert main(["train", str(tmp_path / "run"), "--preset", "smoke", "--workers", "999", "--show-config"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["selfplay"]["num_workers"] == 2
    assert "999 self-play workers capped at 2, the cores found" in err
    # what the user asks within the cores is taken as it is, with no line
    assert main(["train", str(tmp_path / "run"), "--preset", "smoke", "--workers", "2", "--show-config"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["selfplay"]["num_workers"] == 2 and "capped" not in err


def test_a_resumed_run_with_more_workers_than_cores_plays_with_the_cores_and_keeps_its_config(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from connectx_az.cli.main import main
    from connectx_az.training import devices

    run_dir = tmp_path / "run"
    cfg = config.make_config("smoke", overrides=[*SMOKE, "selfplay.num_workers=999"])
    runs.write_config(run_dir, cfg, resume=False, changed=False)  # a run started on a bigger machine
    monkeypatch.setattr(devices, "available_cores", lambda: 1)
    monkeypatch.setattr(devices, "detect", lambda device: devices.Machine(cores=1))
    assert main(["train", "--resume", str(run_dir), "--generations", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "the run's 999 self-play workers capped at 1, the cores found, for this session" in out
    assert _generations(run_dir) == [0]
    assert config.load_config(run_dir).selfplay.num_workers == 999  # the run's own setting is kept


def test_train_run_plays_with_the_workers_of_the_call_and_saves_none(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    cfg = config.make_config("smoke", overrides=[*SMOKE, "selfplay.num_workers=64"])
    train.run(run_dir, cfg, progress=False, num_generations=1, workers=0)  # 0: self-play in this process
    assert _generations(run_dir) == [0] and config.load_config(run_dir).selfplay.num_workers == 64


def test_a_generation_stopped_after_its_self_play_trains_on_its_games_when_resumed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = config.make_config("smoke", overrides=SMOKE)
    whole = tmp_path / "whole"
    train.run(whole, cfg, progress=False, num_generations=1)

    stopped = tmp_path / "stopped"
    steps = train.train_steps

    def stop(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # Ctrl-C while the generation trains

    monkeypatch.setattr(train, "train_steps", stop)
    with pytest.raises(KeyboardInterrupt):
        train.run(stopped, cfg, progress=False, num_generations=1)
    assert (stopped / "replay" / "gen_000000.npz").is_file() and not (stopped / "checkpoint.pt").exists()
    assert runs.status_line(stopped).startswith("the run is saved after 0 generations (of 3, 0 s), and generation "
                                                "1's self-play (4 games, trained on when resumed); resume with: ")

    def no_games(*args: object, **kwargs: object) -> None:
        raise AssertionError("the games on disk were played again")

    monkeypatch.setattr(train, "train_steps", steps)
    monkeypatch.setattr(train.workers, "play_games", no_games)
    train.run(stopped, resume=True, progress=False, num_generations=1)
    row, = runs.read_rows(stopped)
    assert row["selfplay_kept"] is True
    # the same games and the same random state after them: the generation trains as if never stopped
    expected, = runs.read_rows(whole)
    for key in ("policy_loss", "value_loss", "num_games", "num_positions", "selfplay_seconds"):
        assert (row[key] == expected[key]) if key != "selfplay_seconds" else row[key] > 0, key
    assert row["seconds"] >= row["selfplay_seconds"]  # the run's clock counts the self-play played before


@pytest.mark.parametrize("how", ["kill -9", "ctrl-c"])
def test_train_cli_killed_after_a_generations_self_play_resumes_from_its_games(tmp_path: Path, how: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    run_dir = tmp_path / "run"
    cli = [sys.executable, "-m", "connectx_az.cli", "train"]
    # training steps enough that the signal lands in the first generation's training
    proc = subprocess.Popen([*cli, str(run_dir), "--preset", "smoke", "--quiet", "--workers", "0",
                             "--set", "selfplay.num_games=4", "--set", "eval_positions=0",
                             "--set", "train.steps_per_generation=100000"],
                            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (run_dir / "replay" / "gen_000000.json").is_file():
        assert proc.poll() is None and time.time() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL if how == "kill -9" else signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    if how == "ctrl-c":
        assert proc.returncode == 130, err
        assert out.splitlines()[-1].startswith("interrupted: the run is saved after 0 generations (of 2, 0 s), and "
                                               "generation 1's self-play (4 games, trained on when resumed); ")
        return  # the resume is the same as after kill -9
    again = subprocess.run([sys.executable, "-m", "connectx_az.cli", "-v", "train", "--resume", str(run_dir),
                            "--quiet", "--generations", "1", "--set", "train.steps_per_generation=2"],
                           env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "generation 0: its self-play, kept on disk, is not played again" in again.stderr
    assert runs.read_rows(run_dir)[0]["selfplay_kept"] is True


def test_a_timed_run_whose_first_generation_eats_its_time_shrinks_the_later_ones_to_fit_a_handful(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from connectx_az.training import sizing

    ticks = itertools.count(0.0, 60.0)  # a minute a generation by this clock, whatever it plays
    # four minutes: four generations of the first's size would fit, fewer than a handful (five)
    cfg = config.make_config("smoke", overrides=[*SMOKE, "selfplay.num_games=16", "total_time=240"])
    with caplog.at_level(logging.WARNING, logger="connectx_az.training.train"):
        train.run(tmp_path / "run", cfg, progress=False, clock=lambda: next(ticks))
    rows = runs.read_rows(tmp_path / "run")
    scale = sizing.deadline_scale(240, 60)
    assert 0 < scale < 1 and rows[0]["expected_generations"] == sizing.MIN_TIMED_GENERATIONS
    # each later one shares the time left among those still to make, judged by the last one's minute: 3/4 of
    # the first's size in 3 minutes for 4; then 2 minutes left for 3, at 40 s 1/2; then 1 minute for 2: 1/4
    assert [r["num_games"] for r in rows] == [16, 12, 8, 4]
    assert [r.get("scale") for r in rows] == [None, 0.75, 0.5, 0.25]
    assert rows[-1]["lr"] == pytest.approx(cfg.train.lr_min)  # the last trains at the final rate
    assert any("the later ones play 75% of its games and steps, so that about 5 fit" in r.getMessage()
               for r in caplog.records)
    line = runs.generation_line(rows[0], cfg)
    assert line.endswith("; about 5 generations fit in 4 min")


def test_a_timed_run_that_stops_for_time_says_it_is_complete_to_the_last_hundredth(tmp_path: Path) -> None:
    # a busy machine's generations in a four-second run: a slow first, so the second shrinks.  After the fifth,
    # 3.4607 s in (3.46 on disk), the loop judged by its own clock that the next, at the last one's 0.5415 s, would
    # end past the 4 s, and stopped; the run's line, judging by the clock on disk (3.46 + 0.54 fits), said "saved"
    # (CI, 2026-11-28).  Both now judge by the rows on disk: a sixth runs, and then the run is complete
    seconds = [1.4909824274825323, 0.30222909864819475, 0.5390999450450309, 0.5869645898831627, 0.5414610761018456]
    times = itertools.chain([0.0], *([t, t + d] for t, d in zip(itertools.accumulate([0.0, *seconds]),
                                                                 [*seconds, 0.5], strict=False)))
    train.run(tmp_path / "run", config.make_config("smoke", overrides=[*SMOKE, "total_time=4"]), progress=False,
              clock=lambda: next(times))
    rows = runs.read_rows(tmp_path / "run")
    assert [row["run_seconds"] for row in rows] == [1.49, 1.79, 2.33, 2.92, 3.46, 3.96]
    assert rows[1]["scale"] < 1 and "scale" not in rows[2]  # the second shrank, the third fit at full size
    assert runs.status_line(tmp_path / "run").startswith("the run is complete: 6 generations in ")


def test_a_timed_run_where_a_handful_fit_plays_every_generation_at_its_size(tmp_path: Path) -> None:
    ticks = itertools.count(0.0, 60.0)
    cfg = config.make_config("smoke", overrides=[*SMOKE, "total_time=600"])  # ten fit
    train.run(tmp_path / "run", cfg, progress=False, num_generations=3, clock=lambda: next(ticks))
    rows = runs.read_rows(tmp_path / "run")
    assert [r["num_games"] for r in rows] == [4, 4, 4] and rows[0]["expected_generations"] == 10
    assert "expected_generations" not in rows[1]
