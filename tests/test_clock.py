"""The built submission never loses on the clock, even sharing its one core with a CPU hog.

Kaggle gives each move ``actTimeout`` seconds free and takes any excess from an
overage bank of 30 ``actTimeout`` per game (2 s and 60 s); a move whose excess is
more than the bank holds is a TIMEOUT and loses.  Loading the file and decoding
the model count against the first move.  These tests run the built file in a
fresh interpreter pinned to one core, in the ``numpy`` runtime (package,
onnxruntime, torch and numba blocked) or the ``kaggle`` one (numba and torch
importable, so the solver compiles on the first move),
while a busy-loop process pinned to the same core takes about half of it, with
the clock scaled down so that many games fit in a few seconds.  The runner keeps
Kaggle's books itself: wall time per call, the first call of each game charged
with executing the file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import connectx_az
from connectx_az import kaggle_io
from connectx_az.agent import builder, template

SHIPPED_MODEL = Path(connectx_az.__file__).resolve().parent / "models" / "default.onnx"
#: Kaggle's bank is 30 actTimeouts (60 s at 2 s); the scaled clocks keep that ratio
BANK_PER_ACT_SECOND = 30.0
#: the busy loop stops by itself after this many seconds, whatever happens to the test
HOG_SECONDS = 120

pytestmark = [pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs os.sched_setaffinity"),
              pytest.mark.timing]

# Shared by both runners: pin to one core, block what the runtime lacks, import numpy (Kaggle's harness
# has it loaded before it executes the file), and execute the file Kaggle's way.
_PRELUDE = '''
import json, os, sys, time

os.sched_setaffinity(0, {int(sys.argv[1])})


def load(submission):
    """(agent, globals, seconds): executes the file afresh in an empty namespace."""
    start = time.perf_counter()
    agent, env = exec_submission(submission)
    return agent, env, time.perf_counter() - start
'''


def _script(body: str, runtime: str) -> str:
    """A runner for ``runtime`` (a key of ``kaggle_io.RUNTIMES``): the package and what the runtime lacks blocked."""
    return kaggle_io.sandbox_prelude(("connectx_az", *kaggle_io.RUNTIMES[runtime])) + _PRELUDE + body

# argv: cpu, submission, act_timeout, bank, number of games, seed, scale of the agent's own clock
# constants (1: as shipped), "warm" to compile the solver before the games (the process cache keeps it:
# a scaled bank is too small to pay for a compile).  Prints one JSON line.
_GAMES = textwrap.dedent('''
    import dataclasses
    import random

    ROWS, COLS = 6, 7


    def landing(board, col):
        return max((r for r in range(ROWS) if board[r * COLS + col] == 0), default=-1)


    def wins(board, row, col, mark):
        for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
            count = 1
            for sign in (1, -1):
                r, c = row + sign * dr, col + sign * dc
                while 0 <= r < ROWS and 0 <= c < COLS and board[r * COLS + c] == mark:
                    count, r, c = count + 1, r + sign * dr, c + sign * dc
            if count >= 4:
                return True
        return False


    def opponent(board, mark, rng):
        """Win now, else block, else a random column that gives no win away: fast, not a pushover."""
        legal = [c for c in range(COLS) if board[c] == 0]
        for who in (mark, 3 - mark):
            for c in legal:
                if wins(board, landing(board, c), c, who):
                    return c
        safe = [c for c in legal if landing(board, c) == 0 or not wins(board, landing(board, c) - 1, c, 3 - mark)]
        return rng.choice(safe or legal)


    submission, act_timeout, bank0, num_games, seed, scale = (
        sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7]))
    if sys.argv[8] == "warm":
        assert load(submission)[1]["_MODULES"]["solver_numba"].compile_kernel() is not None
    rng = random.Random(seed)
    games = []
    for g in range(num_games):
        seat = 1 + g % 2  # alternate who moves first
        agent, env, exec_seconds = load(submission)  # afresh for every game, as Kaggle does
        player = env["_agent"]
        if scale != 1.0:  # the agent's own clock constants, in seconds, shrink with the clock
            c = player.config
            player.config = dataclasses.replace(
                c, safety_seconds=c.safety_seconds * scale, overage_reserve=c.overage_reserve * scale,
                max_extra_seconds=c.max_extra_seconds * scale, default_act_timeout=c.default_act_timeout * scale,
                compile_min_bank=c.compile_min_bank * scale, solver_extra_seconds=c.solver_extra_seconds * scale,
                solver_bank_reserve=c.solver_bank_reserve * scale)
        board, bank, mark, moves, result = [0] * (ROWS * COLS), bank0, 1, [], None
        for step in range(ROWS * COLS):
            if mark == seat:
                observation, configuration = kaggle_dicts(board, mark, step, bank, act_timeout)
                start = time.perf_counter()
                move = agent(observation, configuration)
                seconds = time.perf_counter() - start + (exec_seconds if not moves else 0.0)
                info = player.info
                excess = max(0.0, seconds - act_timeout)
                record = {"step": step, "type": type(move).__name__, "move": repr(move),
                          "seconds": seconds, "budget": info.get("budget"), "source": info.get("source"),
                          "simulations": int(info.get("simulations", 0)), "backend": info.get("backend"),
                          "solver": info.get("solver")}
                moves.append(record)
                if excess > bank:  # Kaggle's rule: the move overdrew the bank
                    result = "TIMEOUT"
                    break
                bank -= excess
                record["bank"] = bank
                if type(move) is not int or not 0 <= move < COLS or board[move] != 0:
                    result = "INVALID"
                    break
            else:
                move = opponent(board, mark, rng)
            row = landing(board, move)
            board[row * COLS + move] = mark
            if wins(board, row, move, mark):
                result = "win" if mark == seat else "loss"
                break
            mark = 3 - mark
        games.append({"seat": seat, "exec_seconds": exec_seconds, "result": result or "draw", "moves": moves,
                      "last_error": player.last_error})
    print(json.dumps(games))
''')

# argv: cpu, submission, act_timeout, bank.  Prints one JSON line.
_FIRST_MOVE = textwrap.dedent('''
    submission, act_timeout, bank = sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    agent, env, exec_seconds = load(submission)
    observation, configuration = kaggle_dicts([0] * 42, 1, 0, bank, act_timeout)
    start = time.perf_counter()
    move = agent(observation, configuration)
    call_seconds = time.perf_counter() - start
    state = env["_agent"]
    print(json.dumps({"type": type(move).__name__, "move": repr(move), "exec_seconds": exec_seconds,
                      "call_seconds": call_seconds, "decode_seconds": state.load_seconds,
                      "backend": state.backend, "info": {k: v for k, v in state.info.items()
                                                         if isinstance(v, (int, float, str))}}))
''')


def _cpu() -> int:
    """The core the test pins to (the last one this process may use)."""
    return max(os.sched_getaffinity(0))


@pytest.fixture
def cpu_hog() -> Iterator[subprocess.Popen]:
    """A busy loop pinned to ``_cpu()``: killed at teardown, and stops by itself after ``HOG_SECONDS``."""
    code = (f"import os, time\nos.sched_setaffinity(0, {{{_cpu()}}})\nend = time.monotonic() + {HOG_SECONDS}\n"
            "while time.monotonic() < end:\n    pass\n")
    hog = subprocess.Popen([sys.executable, "-I", "-c", code])
    try:
        yield hog
    finally:
        hog.kill()
        hog.wait(timeout=10)


@pytest.fixture(scope="module")
def submission(small_onnx, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("clock") / "submission.py"
    builder.build_submission(small_onnx, path)
    return path


def _run(script: str, args: list[object], tmp_path: Path, timeout: float) -> object:
    runner = tmp_path / "runner.py"
    runner.write_text(script)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-I", str(runner), str(_cpu()), *map(str, args)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("runtime, agent_clock", [("numpy", "shipped"), ("numpy", "scaled"), ("kaggle", "scaled")])
def test_many_games_on_a_shared_core_never_time_out(runtime, agent_clock, submission, cpu_hog, tmp_path):
    """Six whole games at a clock of 0.25 s a move and a 7.5 s bank, sharing one core with a busy loop.

    ``shipped``: the agent's clock constants as built (its fixed safety margin
    then keeps every move inside ``actTimeout``); ``scaled``: those constants
    shrink with the clock too, so the agent draws on its bank as it does at 2 s.
    In the ``kaggle`` runtime the solver is compiled before the games (the
    first-move test below pays for a compile on the real clock), so the games
    run the compiled solver, with its draws on the bank.
    """
    if runtime == "kaggle":
        pytest.importorskip("numba")
    act_timeout, num_games = 0.25, 6
    bank = BANK_PER_ACT_SECOND * act_timeout
    scale = 1.0 if agent_clock == "shipped" else act_timeout / template.CONFIG.default_act_timeout
    warm = "warm" if runtime == "kaggle" else "cold"
    games = _run(_script(_GAMES, runtime), [submission, act_timeout, bank, num_games, 7, scale, warm], tmp_path,
                 timeout=HOG_SECONDS - 10)
    assert cpu_hog.poll() is None, "the competing process stopped before the games ended"

    assert len(games) == num_games
    moves = [m for g in games for m in g["moves"]]
    for g in games:
        assert g["result"] in ("win", "loss", "draw"), (g["result"], g["moves"][-1], g["last_error"])
        assert g["last_error"] == "", g["last_error"]
        assert all(m["type"] == "int" for m in g["moves"])
        assert all(0.0 <= m["bank"] <= bank for m in g["moves"])
    # the games exercised the clock: the numpy backend searched under a deadline, several times a game
    assert {m["backend"] for m in moves} == {"numpy"}
    assert sum(m["source"] == "search" and m["simulations"] > 0 for m in moves) >= 3 * num_games
    solvers = {m["solver"] for m in moves} - {None}
    assert solvers == ({"numba"} if runtime == "kaggle" else {"python"}), solvers
    if runtime == "kaggle":
        assert sum(m["source"] == "solver" for m in moves) >= num_games
    if agent_clock == "scaled":
        assert min(m["bank"] for m in moves) < bank - act_timeout, "the bank was never used"
    # The agent keeps to its own budget (Kaggle's rule above is the hard line; this is the margin): the
    # search checks the deadline every few milliseconds.  A stall of the machine itself (CI shares its
    # host: one run saw a move 0.11 s late) that lands after the last check makes one move late whatever
    # the agent does, so one move may be late by up to a free move and every other by 50 ms at most.
    late = sorted(((m["seconds"] - m["budget"], m) for m in moves if m["budget"] is not None and m["step"] > 1),
                  key=lambda x: x[0])
    assert late[-1][0] < act_timeout, late[-1]
    assert late[-2][0] < 0.05, late[-2:]


@pytest.mark.parametrize("which", ["small", "shipped"])
def test_first_move_with_exec_and_decode_stays_within_budget(which, submission, cpu_hog, tmp_path):
    if which == "shipped":
        if not SHIPPED_MODEL.is_file():
            pytest.skip("no shipped model")
        submission = tmp_path / "submission.py"
        builder.build_submission(SHIPPED_MODEL, submission)
    act_timeout = 0.5
    bank = BANK_PER_ACT_SECOND * act_timeout
    budget = template.move_budget(act_timeout, bank, 42)
    # A stall of the host during the file's exec (seen at 0.29 s on a loaded machine) makes one first
    # move late whatever the agent does; an agent that does not count its load time is late every time.
    # So the move is tried up to three times in fresh processes and one must keep the budget.
    results = []
    for _ in range(3):
        result = _run(_script(_FIRST_MOVE, "numpy"), [submission, act_timeout, bank], tmp_path, timeout=60)
        assert cpu_hog.poll() is None
        assert result["type"] == "int" and result["backend"] == "numpy", result
        assert result["info"]["source"] == "search" and result["info"]["simulations"] > 0, result
        results.append(result)
        if result["exec_seconds"] + result["call_seconds"] <= budget + 0.05:
            break
    assert min(r["exec_seconds"] + r["call_seconds"] for r in results) <= budget + 0.05, results


def test_first_move_compiles_the_solver_inside_the_real_clock(cpu_hog, tmp_path):
    """The ``kaggle`` runtime at Kaggle's own clock (2 s + 60 s), the shipped model, on a shared core: the first
    move imports numba and compiles the solver, is no TIMEOUT, and leaves at least 40 s of the bank."""
    pytest.importorskip("numba")
    if not SHIPPED_MODEL.is_file():
        pytest.skip("no shipped model")
    submission = tmp_path / "submission.py"
    builder.build_submission(SHIPPED_MODEL, submission)
    act_timeout, bank = 2.0, 60.0
    result = _run(_script(_FIRST_MOVE, "kaggle"), [submission, act_timeout, bank], tmp_path, timeout=120)
    assert cpu_hog.poll() is None
    info = result["info"]
    assert result["type"] == "int" and info["solver"] == "numba" and info["compile_seconds"] > 0, result
    used = max(0.0, result["exec_seconds"] + result["call_seconds"] - act_timeout)
    assert used <= bank - 40.0, result
    # the move kept to its own budget, the compile included (the margin covers a stall of the host)
    assert result["exec_seconds"] + result["call_seconds"] <= info["budget"] + 0.5, result
