"""Ctrl-C and SIGTERM end a long command within seconds, its children with it, with one line saying what it kept.

Real signals to real ``connectx-az`` processes: Ctrl-C as a terminal sends it, to the whole process group; SIGTERM
as ``kill PID`` sends it, to the command alone (its children hear nothing and must be stopped by it).  Each command
runs in a session of its own, so the processes it leaves are those of that session (Linux's ``/proc``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from connectx_az import extras

ROOT = Path(__file__).resolve().parents[1]
#: how long a stopped command may take to end (it takes one or two seconds; the bound leaves room for a busy machine)
BOUND_SECONDS = 15.0

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads the processes in /proc")

# the CLI, as on a machine with 64 cores: a run with a dozen self-play workers is not capped to this one's cores
MANY_CORES = ("import sys\nfrom connectx_az.training import devices\ndevices.available_cores = lambda: 64\n"
              "from connectx_az.cli.main import main\nsys.exit(main(sys.argv[1:]))\n")

LEFTMOST = '''
def agent(observation, configuration):
    board = observation["board"]
    return next(c for c in range(configuration["columns"]) if board[c] == 0)
'''


def _session(leader: int) -> list[int]:
    """The living processes of the session ``leader`` started (zombies, already ended, aside)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # it ended meanwhile
            continue
        if fields[0] != "Z" and int(fields[3]) == leader:  # state, ppid, pgrp, session
            found.append(int(stat.parent.name))
    return found


def _start(args: list[str], tmp_path: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    return subprocess.Popen([sys.executable, *args], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for(proc: subprocess.Popen[str], ready: object, what: str, seconds: float = 240.0) -> None:
    deadline = time.monotonic() + seconds
    while not ready():  # type: ignore[operator]
        assert proc.poll() is None, f"ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no {what} within {seconds:.0f} s"
        time.sleep(0.1)


def _stop(proc: subprocess.Popen[str], how: str) -> tuple[str, str]:
    """Send Ctrl-C (``"ctrl-c"``: SIGINT to the group) or SIGTERM (``"sigterm"``: to the command alone); assert the
    command and every process it started end within ``BOUND_SECONDS``, with status 130; its output."""
    if how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM)
    start = time.monotonic()
    try:
        out, err = proc.communicate(timeout=BOUND_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"still running {BOUND_SECONDS:.0f} s after {how}")
    while _session(proc.pid) and time.monotonic() - start < BOUND_SECONDS:
        time.sleep(0.1)
    left = _session(proc.pid)
    if left:
        os.killpg(proc.pid, signal.SIGKILL)
    assert not left, f"{len(left)} processes outlived the command"
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    return out, err


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_train_with_a_dozen_workers_stops_with_them_and_says_how_to_resume(tmp_path: Path, how: str) -> None:
    run_dir = tmp_path / "run"
    proc = _start(["-c", MANY_CORES, "train", str(run_dir), "--preset", "smoke", "--workers", "12", "--quiet"],
                  tmp_path)
    _wait_for(proc, lambda: len(_session(proc.pid)) >= 6, "self-play workers")
    out, _ = _stop(proc, how)
    last = out.splitlines()[-1]
    assert last.startswith("interrupted: the run is saved after 0 generations (of 2, ")
    assert last.endswith(f"; resume with: .venv/bin/connectx-az train --resume {run_dir}")


@pytest.mark.skipif(not extras.is_installed("numba"), reason="the referee's long proofs are the compiled solver's")
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_duel_stops_in_the_middle_of_a_proof_and_removes_its_folder(tmp_path: Path, how: str) -> None:
    submission, cache = tmp_path / "leftmost.py", tmp_path / "cache.sqlite"
    submission.write_text(LEFTMOST)
    # from the empty board the referee's first proofs run for a minute or more in one call of the solver
    proc = _start(["-m", "connectx_az.cli", "duel", str(submission), "--games", "10", "--cache", str(cache)],
                  tmp_path)
    _wait_for(proc, lambda: len(_session(proc.pid)) >= 2, "the file's process")
    time.sleep(3.0)  # its first move made, the referee proves the opponent's
    _, err = _stop(proc, how)
    assert err.splitlines()[-1] == (f"interrupted: the positions the referee proved are kept in {cache}: the same "
                                    "command plays again faster")
    assert not list(tmp_path.glob("connectx_duel_*"))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 if hasattr(os, "sched_getaffinity") else True,
                    reason="--cores 0 1 needs two cores")
def test_compare_on_two_cores_stops_both_lanes_children(tmp_path: Path) -> None:
    out_dir = tmp_path / "compare"
    proc = _start(["-m", "connectx_az.cli", "compare", str(ROOT / "connectx_az" / "models" / "default.onnx"),
                   "--quick", "--out", str(out_dir), "--cores", "0", "1"], tmp_path)
    _wait_for(proc, lambda: len(_session(proc.pid)) >= 3, "the two lanes' children")
    time.sleep(1.0)
    _, err = _stop(proc, "sigterm")
    assert err.splitlines()[-1] == f"interrupted: the grades done are kept in {out_dir}: the same command goes on " \
        "from them"


def test_bench_agent_stops_its_file_and_removes_its_folder(tmp_path: Path) -> None:
    proc = _start(["-m", "connectx_az.cli", "bench", "agent", "--seconds", "1"], tmp_path)  # then the file: 6 s
    _wait_for(proc, lambda: len(_session(proc.pid)) >= 2, "the built file's process")
    _, err = _stop(proc, "sigterm")
    assert err.splitlines()[-1] == "interrupted: nothing was kept; run the same command again"
    assert not list(tmp_path.glob("connectx_*"))


@pytest.mark.parametrize("command", [["eval", "pons", "--submission", "slow.py"],
                                     ["arena", "--alphabeta", "3", "5", "--games", "200"]])
def test_sigterm_ends_a_grading_with_its_line(tmp_path: Path, command: list[str]) -> None:
    # 0.05 s a move: five minutes for the six sets
    slow = "import time\n" + LEFTMOST.replace("    board =", "    time.sleep(0.05)\n    board =")
    (tmp_path / "slow.py").write_text(slow)
    proc = _start(["-m", "connectx_az.cli", *command], tmp_path)
    time.sleep(4.0)  # past its start, into the positions or the games
    assert proc.poll() is None
    _, err = _stop(proc, "sigterm")
    assert err.splitlines()[-1] == "interrupted: nothing was kept; run the same command again"


@pytest.mark.skipif(not extras.is_installed("kaggle_environments"), reason="validate plays kaggle-environments' games")
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_validate_stops_in_the_middle_of_its_games(tmp_path: Path, how: str) -> None:
    slow = "import time\n" + LEFTMOST.replace("    board =", "    time.sleep(0.05)\n    board =")
    (tmp_path / "slow.py").write_text(slow)
    proc = _start(["-m", "connectx_az.cli", "validate", "slow.py", "--opponents", "random", "--replays",
                   str(tmp_path / "replays")], tmp_path)
    time.sleep(4.0)  # into the games: 40 of them, about a second each
    assert proc.poll() is None
    _, err = _stop(proc, how)
    assert err.splitlines()[-1] == "interrupted: nothing was kept; run the same command again"
    assert not list(tmp_path.glob("connectx_*"))
