# ruff: noqa: F821
# exec_submission and kaggle_dicts come from kaggle_io.sandbox_prelude(), which clock_runner.py puts before this.
"""Runs in a fresh interpreter that imitates Kaggle's sandbox (the blocked packages are passed in), pinned to one
core: the built file against Kaggle's clock, as ``clock_runner`` describes.  Prints one JSON line.

argv: cpu, then ``games`` submission act_timeout bank number_of_games seed scale warm|cold (``scale``: of the
agent's own clock constants, 1 as shipped; ``warm`` compiles the solver before the games, which the process
cache keeps: a scaled bank is too small to pay for a compile), or ``first_move`` submission act_timeout bank.
"""
import dataclasses
import json
import os
import random
import sys
import time

ROWS, COLS = 6, 7
#: the agent's clock constants in seconds, which a ``scale`` other than 1 shrinks with the clock
SCALED_CONSTANTS = ("safety_seconds", "overage_reserve", "max_extra_seconds", "default_act_timeout",
                    "compile_min_bank", "solver_extra_seconds", "solver_bank_reserve")


def load(submission):
    """(agent, globals, seconds): executes the file afresh in an empty namespace."""
    start = time.perf_counter()
    agent, env = exec_submission(submission)
    return agent, env, time.perf_counter() - start


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


def play_games(submission, act_timeout, bank0, num_games, seed, scale, warm):
    """Whole games, seats alternating, the file executed afresh for each; Kaggle's books kept here."""
    if warm:
        assert load(submission)[1]["_MODULES"]["solver_numba"].compile_kernel() is not None
    rng = random.Random(seed)
    games = []
    for g in range(num_games):
        seat = 1 + g % 2  # alternate who moves first
        agent, env, exec_seconds = load(submission)  # afresh for every game, as Kaggle does
        player = env["_agent"]
        if scale != 1.0:  # the agent's own clock constants, in seconds, shrink with the clock
            c = player.config
            player.config = dataclasses.replace(c, **{k: getattr(c, k) * scale for k in SCALED_CONSTANTS})
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
    return games


def first_move(submission, act_timeout, bank):
    """A game's first move: the file executed, the model decoded inside the call, the move played."""
    agent, env, exec_seconds = load(submission)
    observation, configuration = kaggle_dicts([0] * 42, 1, 0, bank, act_timeout)
    start = time.perf_counter()
    move = agent(observation, configuration)
    call_seconds = time.perf_counter() - start
    state = env["_agent"]
    return {"type": type(move).__name__, "move": repr(move), "exec_seconds": exec_seconds,
            "call_seconds": call_seconds, "decode_seconds": state.load_seconds,
            "preload_seconds": state.preload_seconds, "backend": state.backend,
            "info": {k: v for k, v in state.info.items() if isinstance(v, (int, float, str))}}


def main() -> None:
    os.sched_setaffinity(0, {int(sys.argv[1])})
    mode, submission, act_timeout, bank = sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
    if mode == "games":
        out = play_games(submission, act_timeout, bank, int(sys.argv[6]), int(sys.argv[7]), float(sys.argv[8]),
                         sys.argv[9] == "warm")
    else:
        out = first_move(submission, act_timeout, bank)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
