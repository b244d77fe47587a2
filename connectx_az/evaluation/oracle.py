"""The perfect opponent and the referee of a duel: the exact solver behind a file of solved positions.

``Oracle`` answers a position's result and its moves' scores from the solver, within a node budget per position,
through ``SolvedCache`` (sqlite, keyed by ``book.canonical_key``), so that the positions games share are solved
once; a position not proven within the budget stays unproven.  ``opponent_move`` is the opponent's move,
``check_move`` the referee's verdict on a move of the file.

Conventions: ``col`` is 0-based; move strings are in Pons' notation (1-based columns from the empty board); a
*result* is +1/0/-1 for the side to move and an *exact score* Pons' score (``solver``)."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from connectx_az.engine import book, game, solver

#: the kinds of the opponent's moves: a random column (``noise``), one proven to keep the position's
#: result (``kept``), or the best known where the solver could not prove the result (``unproven``)
OPPONENT_KINDS = ("kept", "noise", "unproven")

log = logging.getLogger(__name__)
T = TypeVar("T")


class OracleError(ValueError):
    """A file that is not a cache of solved positions."""


def pons_moves(cols: list[int]) -> str:
    """0-based columns as a move string in Pons' notation (1-based)."""
    return "".join(str(c + 1) for c in cols)


# --------------------------------------------------------------------------- solved positions


class SolvedCache:
    """Proven results and exact scores of positions, kept in an sqlite file (standard library).

    Rows are ``(key, exact, value, nodes)``: ``key`` is ``book.canonical_key``'s (a position and its mirror share a
    row), ``exact`` says whether ``value`` is an exact score or a result, and ``value`` is ``NULL`` where the solver
    gave up after ``nodes`` nodes (so that a later run with no larger budget does not try again).  Every row is
    committed as it is written (sqlite's write-ahead log), so a killed run keeps every row written before.  ``path``
    ``None``: in memory only.  ``OracleError`` for a file that is not such a cache."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = None if path is None else Path(path)
        self._rows: dict[tuple[int, bool], tuple[int | None, int]] = {}
        try:
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(":memory:" if self.path is None else str(self.path))
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # WAL commits survive a killed process
            self._db.execute("CREATE TABLE IF NOT EXISTS solved (key INTEGER NOT NULL, exact INTEGER NOT NULL, "
                             "value INTEGER, nodes INTEGER NOT NULL, PRIMARY KEY (key, exact)) WITHOUT ROWID")
            for key, exact, value, nodes in self._db.execute("SELECT key, exact, value, nodes FROM solved"):
                self._rows[key, bool(exact)] = (value, nodes)
        except sqlite3.DatabaseError as exc:
            raise OracleError(f"{path} is not a cache of solved positions ({exc})") from None

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, key: int, exact: bool) -> tuple[int | None, int] | None:
        """``(value, nodes)`` of a key (value ``None``: unproven within ``nodes``), or ``None`` if never tried."""
        return self._rows.get((key, exact))

    def put(self, key: int, exact: bool, value: int | None, nodes: int) -> None:
        self._rows[key, exact] = (value, nodes)
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO solved VALUES (?, ?, ?, ?)", (key, int(exact), value, nodes))

    def close(self) -> None:
        self._db.close()


@dataclass
class SolveStats:
    """What an ``Oracle`` asked of its solver: positions proven and given up, nodes and seconds."""

    num_proven: int = 0
    num_unproven: int = 0
    nodes: int = 0
    seconds: float = 0.0
    slowest_seconds: float = 0.0
    slowest_empty: int = 0  # empty cells of the position of the slowest proof or attempt

    def as_dict(self) -> dict[str, Any]:
        return {"proven": self.num_proven, "unproven": self.num_unproven, "nodes": self.nodes,
                "seconds": round(self.seconds, 2), "slowest_seconds": round(self.slowest_seconds, 2),
                "slowest_empty_cells": self.slowest_empty}


class Oracle:
    """Results and exact scores of positions: the cache, else the solver within ``max_nodes`` nodes.

    Every method takes an unfinished position ``(position, mask)`` (side to move's stones first).  A value is
    ``None`` where the solver could not prove it within the budget.  When every child of a position is proven, the
    position's own value (the best of them) is stored too, so the position a move leads to is usually known by the
    time it is asked about."""

    def __init__(self, prover: solver.Solver, cache: SolvedCache, *, max_nodes: int) -> None:
        if max_nodes < 1:
            raise ValueError(f"max_nodes must be >= 1, got {max_nodes}")
        self.solver = prover
        self.cache = cache
        self.max_nodes = max_nodes
        self.stats = SolveStats()

    def value(self, position: int, mask: int, *, exact: bool = False) -> int | None:
        """The position's result (its exact score with ``exact``) for the side to move, or ``None``."""
        key = book.canonical_key(position, mask)[0]
        row = self.cache.get(key, exact)
        if row is not None and (row[0] is not None or row[1] >= self.max_nodes):
            return row[0]
        start = time.perf_counter()
        value = _interruptible(lambda: self.solver.solve(position, mask, weak=not exact, max_nodes=self.max_nodes))
        seconds = time.perf_counter() - start
        self.stats.nodes += self.solver.nodes
        self.stats.seconds += seconds
        if seconds > self.stats.slowest_seconds:
            self.stats.slowest_seconds = seconds
            self.stats.slowest_empty = game.NUM_CELLS - game.num_stones(mask)
        if value is None:
            self.stats.num_unproven += 1
        else:
            self.stats.num_proven += 1
        if seconds > 1.0:
            log.info("%s at %d empty cells: %s, %d nodes, %.1f s", "exact score" if exact else "result",
                     game.NUM_CELLS - game.num_stones(mask), "unproven" if value is None else value,
                     self.solver.nodes, seconds)
        self.cache.put(key, exact, value, self.max_nodes if value is None else self.solver.nodes)
        return value

    def move_value(self, position: int, mask: int, col: int, *, exact: bool = False) -> int | None:
        """What playing the legal column ``col`` is worth to the side to move (result or exact score)."""
        if game.wins_now(position, mask, col):
            return (game.NUM_CELLS + 1 - game.num_stones(mask)) // 2 if exact else 1
        child, child_mask = game.play(position, mask, col)
        if game.is_full(child_mask):
            return 0
        value = self.value(child, child_mask, exact=exact)
        return None if value is None else -value

    def move_values(self, position: int, mask: int, *, exact: bool = False) -> dict[int, int | None]:
        """``move_value`` of every legal column, by column; stores the position's value when all are proven."""
        values = {col: self.move_value(position, mask, col, exact=exact) for col in game.legal_cols(mask)}
        proven = [v for v in values.values() if v is not None]
        key = book.canonical_key(position, mask)[0]
        row = self.cache.get(key, exact)
        if len(proven) == len(values) and (row is None or row[0] is None):
            self.cache.put(key, exact, max(proven), 0)
        return values


def _interruptible(work: Callable[[], T]) -> T:
    """``work()``, run in a daemon thread while this one waits in short naps, where this is the main thread: a proof
    by the compiled solver can hold its thread for a minute in one call, and Ctrl-C or SIGTERM (the main thread's)
    would wait for it; an interrupt leaves the proof to end with the process."""
    if threading.current_thread() is not threading.main_thread():
        return work()
    done: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(work())
        except BaseException as exc:  # raised again in the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=run, name="oracle-proof", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.5)
    if failed:
        raise failed[0]
    return done[0]


# --------------------------------------------------------------------------- the opponent and the checks


def opponent_move(oracle: Oracle, position: int, mask: int, rng: np.random.Generator,
                  noise: float) -> tuple[int, str]:
    """``(col, kind)``: the perfect opponent's column in an unfinished position, and its kind.

    With probability ``noise`` a uniformly random legal column (``"noise"``; nothing solved).  Otherwise, where the
    position's result is proven, a column that keeps it, uniformly among those (``"kept"``); in a lost position the
    one that loses slowest by the exact scores, where those are proven, else one that does not lose at once.  Where
    the result is not proven (``"unproven"``): a column proven to draw if there is one, else one of the unproven."""
    legal = game.legal_cols(mask)
    if rng.random() < noise:
        return int(rng.choice(legal)), "noise"
    results = oracle.move_values(position, mask)
    proven = {col: r for col, r in results.items() if r is not None}
    best = max(proven.values(), default=None)
    if best != 1 and len(proven) < len(legal):
        pool = [c for c, r in proven.items() if r == 0] or [c for c in legal if results[c] is None]
        return int(rng.choice(pool)), "unproven"
    if best == -1:
        scores = oracle.move_values(position, mask, exact=True)
        if all(s is not None for s in scores.values()):
            top = max(s for s in scores.values() if s is not None)
            return int(rng.choice([c for c, s in scores.items() if s == top])), "kept"
        safe = [c for c in legal if not game.winning_cols(*game.play(position, mask, c))]
        return int(rng.choice(safe or legal)), "kept"
    return int(rng.choice([c for c, r in proven.items() if r == best])), "kept"


@dataclass(frozen=True)
class MoveCheck:
    """The solver's verdict on one move of the file, everything from the file's side.

    ``moves``: the position before the move (Pons string); ``col``: the column played (0-based); ``verdict``:
    ``"kept"`` (the move keeps the position's result), ``"lost"`` (it is proven to leave a worse one) or
    ``"unchecked"`` (not proven either way within the budget).  ``result``: the position's result and ``played`` the
    result after the move (``None``: unproven); ``keeping``: for a lost move, the columns proven to keep the result
    (where the position's result is unproven, to reach the best result proven)."""

    moves: str
    col: int
    verdict: str
    result: int | None
    played: int | None
    keeping: tuple[int, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"position": self.moves, "col": self.col + 1, "verdict": self.verdict, "result": self.result,
                "played": self.played, "keeping": [c + 1 for c in self.keeping]}


def check_move(oracle: Oracle, moves: str, col: int) -> MoveCheck:
    """Does playing ``col`` (0-based, legal) after ``moves`` (Pons string, an unfinished game) keep the value?

    A lost position is kept by every move.  Otherwise the position's result and the played move's are proven
    (usually found in the cache: the opponent solved them as its own children); where either is unproven, or the
    move lost value, every column is tried, and a move still loses value when another column is proven better."""
    position, mask = game.from_moves(moves)
    result = oracle.value(position, mask)
    if result == -1:
        return MoveCheck(moves, col, "kept", result, -1)
    played = oracle.move_value(position, mask, col)
    if result is not None and played == result:
        return MoveCheck(moves, col, "kept", result, played)
    values = oracle.move_values(position, mask)
    proven = {c: v for c, v in values.items() if v is not None}
    if result is None and len(proven) == len(values):
        result = max(proven.values())
    best = result if result is not None else max(proven.values(), default=None)
    if played is not None and best is not None and played < best:
        return MoveCheck(moves, col, "lost", result, played, tuple(c for c, v in proven.items() if v == best))
    if played is not None and result is not None:
        return MoveCheck(moves, col, "kept", result, played)
    return MoveCheck(moves, col, "unchecked", result, played)


def make_prover(kind: str) -> solver.Solver:
    """The solver of the opponent and the checks: ``"numba"`` (compiled where numba imports, else the pure
    Python one) or ``"python"``."""
    if kind == "python":
        return solver.Solver()
    if kind == "numba":
        from connectx_az.engine import solver_numba

        return solver_numba.make_solver()
    raise ValueError(f"unknown solver {kind!r}; choose numba or python")
