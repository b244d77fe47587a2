"""A built submission against a perfect opponent, every move of the file checked by the solver afterwards.

``duel`` plays a built ``submission.py`` against the exact solver (``oracle``) under Kaggle's clock, the seats
alternating.  Each game runs the file in a fresh child interpreter (``duel_child``) that imitates Kaggle's agent
sandbox (``kaggle_io.sandbox_prelude``: the package and the runtime's hidden packages blocked; one core), so every
game pays for executing the file and, where numba imports, compiling its solver.  The child times each call (the
first includes executing the file); the parent keeps the overage bank, charges it each move's time beyond
``actTimeout``, and cuts off a move that runs past what the bank holds, as Kaggle's servers do.

The opponent is ``oracle.opponent_move``.  After each game every move of the file is checked
(``oracle.check_move``): a move loses value when it leaves the file a worse result than the position held; a move
the solver cannot prove either way within its budget is unchecked, never kept.  Conventions as in ``oracle``."""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from connectx_az.engine import game
from connectx_az.evaluation import kaggle_io
from connectx_az.evaluation import oracle as referee

#: node budget of one position's proof (the compiled solver's rate: docs/results.md, *Speed*)
DEFAULT_MAX_NODES = 1_000_000_000
#: seconds a move may run past what its clock and bank allow before the duel cuts it off (the verdict is
#: the child's own timing; the cut-off only ends a file that hangs)
CUT_OFF_GRACE = 5.0

log = logging.getLogger(__name__)


class DuelError(ValueError):
    """A duel that cannot start: a bad opening, a file that is not a submission, an unreadable cache."""


# --------------------------------------------------------------------------- the file in its sandbox


#: the child program (``duel_child``: its ``main`` answers the parent's requests), run after the sandbox's prelude
_CHILD_SOURCE = Path(__file__).with_name("duel_child.py").read_text(encoding="utf-8")


class _CutOff(Exception):
    """The file's move ran past its clock, its bank and the grace: the process was killed."""


class _FileProcess:
    """A built file in a fresh child interpreter that imitates Kaggle's sandbox, pinned to one core."""

    def __init__(self, script: Path, submission: Path, workdir: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        self._errors: IO[str] = open(workdir / "file.err", "w+")  # closed by close()
        self._proc = subprocess.Popen([sys.executable, "-I", str(script), str(submission.resolve())], cwd=workdir,
                                      env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._errors, bufsize=0)
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(self._proc.pid, {min(os.sched_getaffinity(0))})

    def move(self, request: dict[str, Any], limit: float) -> dict[str, Any]:
        """The child's reply to one request; ``_CutOff`` after ``limit`` seconds without one."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write((json.dumps(request) + "\n").encode())
        self._proc.stdin.flush()
        ready, _, _ = select.select([self._proc.stdout], [], [], limit)
        if not ready:
            raise _CutOff
        line = self._proc.stdout.readline()
        if not line:
            self._proc.wait()
            self._errors.seek(0)
            last = self._errors.read().strip().splitlines()[-1:]
            return {"error": f"the file's process ended ({last[0] if last else f'exit {self._proc.returncode}'})"}
        return json.loads(line)

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        for pipe in (self._proc.stdin, self._proc.stdout):
            if pipe is not None:
                pipe.close()
        self._errors.close()


# --------------------------------------------------------------------------- games


@dataclass(frozen=True)
class DuelGame:
    """One game of the file against the perfect opponent, from the file's side.

    ``seat`` 1 when the file moves first; ``moves`` the game's columns in Pons' notation, opening included;
    ``result`` +1 win, 0 draw, -1 loss; ``reason`` ``"four in a row"``, ``"draw"`` or ``"timeout by file"`` (a move
    that raises or is illegal stops the duel: ``DuelError``); ``checks`` one ``MoveCheck`` per move of the file;
    ``move_seconds`` its seconds per move (the first includes executing the file) at plies ``move_plies``;
    ``bank_used`` its seconds beyond ``actTimeout`` in all; ``opponent`` the opponent's moves by kind
    (``OPPONENT_KINDS``); ``first_won_ply`` the first ply the file was to move in a proven won position (``None``:
    never); ``solver`` and ``backend`` what the file's agent reported."""

    index: int
    seat: int
    moves: str
    result: int
    reason: str
    checks: tuple[referee.MoveCheck, ...]
    move_seconds: tuple[float, ...]
    move_plies: tuple[int, ...]
    bank_used: float
    opponent: dict[str, int]
    first_won_ply: int | None
    solver: str = ""
    backend: str = ""

    @property
    def value_losses(self) -> list[referee.MoveCheck]:
        return [c for c in self.checks if c.verdict == "lost"]

    @property
    def num_unchecked(self) -> int:
        return sum(c.verdict == "unchecked" for c in self.checks)

    @property
    def converted(self) -> bool:
        """False when the file stood in a proven won position and did not win."""
        return self.first_won_ply is None or self.result == 1

    @property
    def slowest_move(self) -> tuple[float, int]:
        """``(seconds, ply)`` of the file's slowest move (``(0.0, -1)`` if it did not move)."""
        if not self.move_seconds:
            return 0.0, -1
        k = int(np.argmax(self.move_seconds))
        return self.move_seconds[k], self.move_plies[k]

    def as_dict(self) -> dict[str, Any]:
        seconds, ply = self.slowest_move
        return {"game": self.index, "seat": self.seat, "moves": self.moves, "result": self.result,
                "reason": self.reason, "value_losses": [c.as_dict() for c in self.value_losses],
                "unchecked": [c.as_dict() for c in self.checks if c.verdict == "unchecked"],
                "num_file_moves": len(self.checks), "first_won_ply": self.first_won_ply,
                "converted": self.converted, "slowest_move_s": round(seconds, 3), "slowest_move_ply": ply,
                "bank_used_s": round(self.bank_used, 3), "move_seconds": [round(s, 3) for s in self.move_seconds],
                "opponent": self.opponent, "solver": self.solver, "backend": self.backend}


def _play_game(file: _FileProcess, oracle: referee.Oracle, *, index: int, seat: int, opening: list[int], noise: float,
               rng: np.random.Generator, act_timeout: float, bank: float) -> DuelGame:
    """Play one game from ``opening`` (0-based columns), then check the file's moves."""
    cols = list(opening)
    position, mask = game.from_moves(cols, one_based=False)
    file_plies: list[tuple[str, int]] = []  # (position before, col) of each move of the file
    seconds: list[float] = []
    plies: list[int] = []
    kinds: Counter[str] = Counter({kind: 0 for kind in referee.OPPONENT_KINDS})
    bank_left, reply = bank, {}
    reason = ""
    while not reason:
        ply = game.num_stones(mask)
        if ply % 2 == seat - 1:
            mark = 1 + ply % 2
            plies.append(ply)
            request = {"board": game.to_kaggle(position, mask, mark), "mark": mark, "step": ply, "bank": bank_left,
                       "act_timeout": act_timeout}
            try:
                reply = file.move(request, act_timeout + max(bank_left, 0.0) + CUT_OFF_GRACE)
            except _CutOff:
                seconds.append(act_timeout + bank_left + CUT_OFF_GRACE)
                reason = "timeout by file (cut off)"
                break
            seconds.append(float(reply["seconds"]))
            bank_left -= max(0.0, seconds[-1] - act_timeout)
            col = reply.get("move")
            if "load_error" in reply or "error" in reply:
                if index == 0 and "load_error" in reply:
                    raise DuelError(f"not a submission: {reply['load_error']}")
                error = (str(reply.get("load_error") or reply["error"]).splitlines() or [""])[0]
                raise DuelError(f"game {index} (seat {seat}), ply {ply}: the file failed: {error}; the duel stops "
                                "at the file's first broken move")
            elif bank_left < 0:
                reason = "timeout by file"
            elif col is None or not 0 <= col < game.COLS or not game.is_legal(mask, col):
                raise DuelError(f"game {index} (seat {seat}), ply {ply}: the file answered {reply.get('repr')}, not a "
                                "legal column (a plain int of a column that is not full); the duel stops at the "
                                "file's first broken move")
            else:
                file_plies.append((referee.pons_moves(cols), col))
        else:
            col, kind = referee.opponent_move(oracle, position, mask, rng, noise)
            kinds[kind] += 1
        if reason:
            break
        position, mask = game.play(position, mask, col)
        cols.append(col)
        over = game.outcome(position, mask)
        if over is not None:
            reason = "four in a row" if over == -1 else "draw"
    if reason == "four in a row":
        result = 1 if len(cols) % 2 == seat % 2 else -1  # the last stone was the file's
    else:
        result = 0 if reason == "draw" else -1
    checks = tuple(referee.check_move(oracle, moves, col) for moves, col in file_plies)
    first_won = next((len(c.moves) for c in checks if c.result == 1), None)
    return DuelGame(index, seat, referee.pons_moves(cols), result, reason, checks, tuple(seconds), tuple(plies),
                    bank - bank_left,
                    dict(kinds), first_won, reply.get("solver", ""), reply.get("backend", ""))


# --------------------------------------------------------------------------- the duel


@dataclass
class DuelReport:
    """A duel's games and what it cost: the settings, the solver's work and the cache."""

    games: list[DuelGame]
    runtime: str
    noise: float
    act_timeout: float
    bank: float
    max_nodes: int
    solver: str
    stats: referee.SolveStats
    cache_path: str
    cache_size: int
    seconds: float
    seed: int = 0
    opening: str = ""
    by_seat: dict[int, dict[str, int]] = field(default_factory=dict)

    @property
    def num_value_losses(self) -> int:
        return sum(len(g.value_losses) for g in self.games)

    @property
    def num_unconverted(self) -> int:
        return sum(not g.converted for g in self.games)

    @property
    def failed(self) -> bool:
        """True on any value-losing move, any proven win not converted, or any timeout, error or illegal move."""
        return bool(self.num_value_losses or self.num_unconverted or any("by file" in g.reason for g in self.games))

    def summary(self) -> dict[str, Any]:
        slow = max(self.games, key=lambda g: g.slowest_move[0], default=None)
        bank = max(self.games, key=lambda g: g.bank_used, default=None)
        opponent = Counter({kind: 0 for kind in referee.OPPONENT_KINDS})
        for g in self.games:
            opponent.update(g.opponent)
        return {"games": len(self.games), "by_seat": {str(s): v for s, v in self.by_seat.items()},
                "value_losses": self.num_value_losses, "file_moves": sum(len(g.checks) for g in self.games),
                "unchecked": sum(g.num_unchecked for g in self.games),
                "won_positions": sum(g.first_won_ply is not None for g in self.games),
                "unconverted": self.num_unconverted,
                "failures": [f"game {g.index}: {g.reason}" for g in self.games if "by file" in g.reason],
                "slowest_move_s": round(slow.slowest_move[0], 3) if slow else 0.0,
                "slowest_move_game": slow.index if slow else None,
                "max_bank_used_s": round(bank.bank_used, 3) if bank else 0.0,
                "max_bank_used_game": bank.index if bank else None, "opponent": dict(opponent),
                "file_solvers": sorted({g.solver for g in self.games if g.solver}),
                "file_backends": sorted({g.backend for g in self.games if g.backend}), "solver": self.solver,
                "solves": self.stats.as_dict(), "max_nodes": self.max_nodes, "cache": self.cache_path,
                "cache_positions": self.cache_size, "seconds": round(self.seconds, 1), "runtime": self.runtime,
                "noise": self.noise, "act_timeout": self.act_timeout, "bank": self.bank, "seed": self.seed,
                "opening": self.opening}

    def as_dict(self) -> dict[str, Any]:
        return {"games": [g.as_dict() for g in self.games], "summary": self.summary()}


def check_settings(*, games_per_seat: int, noise: float, act_timeout: float, opening: str) -> list[int]:
    """The opening's 0-based columns; ``DuelError`` (one line) for settings a duel cannot play, before any work."""
    bad = [what for what, wrong in ((f"games a seat must be >= 1, not {games_per_seat}", games_per_seat < 1),
                                    (f"the noise must lie in [0, 1], not {noise:g}", not 0.0 <= noise <= 1.0),
                                    (f"the move time must be > 0, not {act_timeout:g}", not act_timeout > 0)) if wrong]
    if bad:  # each setting that fails, alone
        raise DuelError("; ".join(bad))
    try:
        start_cols = [int(ch) - 1 for ch in opening]
        if game.outcome(*game.from_moves(start_cols, one_based=False)) is not None:
            raise ValueError("the game is already over")
    except ValueError as exc:
        raise DuelError(f"bad opening {opening!r}: {exc}") from None
    return start_cols


def duel(submission: str | Path, *, games_per_seat: int, noise: float, runtime: str = "numpy", seed: int = 0,
         cache_path: str | Path | None = None, max_nodes: int = DEFAULT_MAX_NODES, solver_kind: str = "numba",
         opening: str = "", act_timeout: float = kaggle_io.ACT_TIMEOUT, bank: float | None = None,
         on_game: Callable[[DuelGame], None] | None = None) -> DuelReport:
    """Play ``games_per_seat`` games a seat (seats alternating, the file first in game 0) and check them.

    ``submission`` runs as Kaggle runs it, in ``runtime`` (``kaggle_io.RUNTIMES``), with ``act_timeout`` seconds a
    move and ``bank`` seconds of overage (default ``OVERAGE_PER_ACT_SECOND * act_timeout``).  Every game starts after
    ``opening`` (Pons string) and draws its randomness from ``seed`` and its index.  ``cache_path``: the
    ``SolvedCache`` file (``None``: in memory).  ``on_game`` is called after each game.  ``FileNotFoundError`` for a
    missing file; ``DuelError`` for a file that is not a submission, a bad opening or cache, and at the file's first
    broken move (its agent raises, or answers anything but a legal column as a plain int), naming the game, the ply
    and the exception or the answer."""
    submission = Path(submission)
    if not submission.is_file():
        raise FileNotFoundError(f"{submission} not found")
    start_cols = check_settings(games_per_seat=games_per_seat, noise=noise, act_timeout=act_timeout, opening=opening)
    blocked = ("connectx_az", *kaggle_io.runtime_blocked(runtime))
    bank = kaggle_io.OVERAGE_PER_ACT_SECOND * act_timeout if bank is None else bank
    prover = referee.make_prover(solver_kind)
    try:
        cache = referee.SolvedCache(cache_path)
    except referee.OracleError as exc:
        raise DuelError(str(exc)) from None
    oracle = referee.Oracle(prover, cache, max_nodes=max_nodes)
    games: list[DuelGame] = []
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="connectx_duel_") as tmp:
            script = Path(tmp) / "file_process.py"
            script.write_text(kaggle_io.sandbox_prelude(blocked) + _CHILD_SOURCE)
            for index in range(2 * games_per_seat):
                file = _FileProcess(script, submission, Path(tmp))
                try:
                    played = _play_game(file, oracle, index=index, seat=1 + index % 2, opening=start_cols,
                                        noise=noise, rng=np.random.default_rng([seed, index]),
                                        act_timeout=act_timeout, bank=bank)
                finally:
                    file.close()
                games.append(played)
                if on_game is not None:
                    on_game(played)
        cache_size = len(cache)
    finally:
        cache.close()
    by_seat = {seat: {"wins": sum(g.result == 1 for g in games if g.seat == seat),
                      "draws": sum(g.result == 0 for g in games if g.seat == seat),
                      "losses": sum(g.result == -1 for g in games if g.seat == seat)} for seat in (1, 2)}
    return DuelReport(games, runtime, noise, act_timeout, bank, max_nodes, type(prover).__name__, oracle.stats,
                      str(cache_path) if cache_path is not None else "(memory)", cache_size,
                      time.perf_counter() - start, seed, opening, by_seat)


# --------------------------------------------------------------------------- text


_RESULT_WORDS = {1: "file wins", 0: "draw", -1: "file loses"}


def format_game(g: DuelGame) -> str:
    """A game's lines: moves, result, clock, and each value-losing move with the columns that keep the value."""
    seconds, ply = g.slowest_move
    unchecked = [str(len(c.moves)) for c in g.checks if c.verdict == "unchecked"]
    lines = [f"game {g.index} seat {g.seat}: {_RESULT_WORDS[g.result]} ({g.reason}, {len(g.moves)} plies) "
             f"{g.moves or '-'}",
             f"  file: {len(g.checks)} moves, {len(g.value_losses)} value-losing, {len(unchecked)} unchecked"
             + (f" (plies {', '.join(unchecked)})" if unchecked else "") + "; "
             f"slowest {seconds:.2f} s (ply {ply}), bank used {g.bank_used:.2f} s"
             + (f"; won from ply {g.first_won_ply}" + ("" if g.converted else ", NOT converted")
                if g.first_won_ply is not None else "")]
    for c in g.value_losses:
        keeping = ", ".join(str(k + 1) for k in c.keeping) or "?"
        lines.append(f"  value lost at {c.moves or '(empty)'} (ply {len(c.moves)}, result {c.result}): "
                     f"played {c.col + 1} ({c.played}), keeps: {keeping}")
    return "\n".join(lines)


def format_summary(report: DuelReport) -> str:
    """The duel's summary as text."""
    s = report.summary()
    seats = "; ".join(f"seat {seat}: {v['wins']} W {v['draws']} D {v['losses']} L" for seat, v in s["by_seat"].items())
    solves = s["solves"]
    opp = s["opponent"]
    lines = [f"summary: {s['games']} games ({seats}); runtime {s['runtime']}, {s['act_timeout']:g} s a move + "
             f"{s['bank']:g} s bank; noise {s['noise']:g}" + (f"; opening {s['opening']}" if s["opening"] else ""),
             f"value-losing moves: {s['value_losses']} of {s['file_moves']} file moves ({s['unchecked']} unchecked "
             f"within {s['max_nodes']:,} nodes); won positions: {s['won_positions']} games, "
             f"{s['unconverted']} not converted",
             f"slowest move: {s['slowest_move_s']:.2f} s (game {s['slowest_move_game']}); most bank used in a game: "
             f"{s['max_bank_used_s']:.2f} s (game {s['max_bank_used_game']}); file's solver: "
             f"{','.join(s['file_solvers']) or '?'}, backend: {','.join(s['file_backends']) or '?'}",
             f"opponent: {opp['kept']} moves keeping the value, {opp['noise']} random, {opp['unproven']} unproven",
             f"solver ({s['solver']}): {solves['proven']} positions proven, {solves['unproven']} unproven, "
             f"{solves['nodes']:,} nodes, {solves['seconds']:.1f} s (slowest {solves['slowest_seconds']:.1f} s); "
             f"cache {s['cache']}: {s['cache_positions']} entries; {s['seconds']:.0f} s in all"]
    lines += [f"failure: {f}" for f in s["failures"]]
    return "\n".join(lines)
