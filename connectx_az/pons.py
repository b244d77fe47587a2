"""Pascal Pons' Connect Four benchmark sets, with every move's exact score, and grading against them.

The files live in the package data folder ``connectx_az/data/pons/`` (its README gives the
format).  Scores are Pons' scores for the side to move: winning with one's own k-th stone scores
``22 - k``, ``0`` is a draw, a loss is negative.  Columns here are 0-based (``col``); the files'
move strings are 1-based, as Pons writes them.

``grade`` scores chosen columns against a set; ``grade_sets`` runs any chooser (positions ->
columns) over the sets.  ``policy_mistake_rates`` grades a network's raw policy (the cheap
per-generation signal of training), ``search_mistake_rates`` MCTS at a fixed simulation count, and
``submission_mistake_rates`` a built ``submission.py`` under the Kaggle clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from connectx_az import game, kaggle_io, mcts

#: set name -> file, in the README's order (easiest stage first); Begin-Hard is partial
SETS = {
    "End-Easy": "Test_L3_R1.txt",
    "Middle-Easy": "Test_L2_R1.txt",
    "Middle-Medium": "Test_L2_R2.txt",
    "Begin-Easy": "Test_L1_R1.txt",
    "Begin-Medium": "Test_L1_R2.txt",
    "Begin-Hard": "Test_L1_R3.partial.txt",
}


def _sign(x: int) -> int:
    return (x > 0) - (x < 0)


@dataclass(frozen=True)
class PonsPosition:
    """One benchmark line: ``moves`` (1-based columns from the empty board), the position's
    ``score`` and ``move_scores[col]`` for each of the 7 columns (``None`` where full), all for the
    side to move."""

    moves: str
    score: int
    move_scores: tuple[int | None, ...]

    @property
    def num_plies(self) -> int:
        """Stones already on the board."""
        return len(self.moves)

    @property
    def result(self) -> int:
        """``+1`` won, ``0`` drawn, ``-1`` lost for the side to move under perfect play."""
        return _sign(self.score)

    @property
    def best_cols(self) -> tuple[int, ...]:
        """Columns (0-based) whose score equals the position's score."""
        return tuple(c for c, s in enumerate(self.move_scores) if s == self.score)


def _parse(line: str) -> PonsPosition:
    fields = line.split()
    if len(fields) != 2 + game.COLS:
        raise ValueError(f"expected MOVES SCORE and {game.COLS} move scores, got {line!r}")
    scores = tuple(None if f == "X" else int(f) for f in fields[2:])
    return PonsPosition(fields[0], int(fields[1]), scores)


def load_set(name: str, *, limit: int | None = None) -> list[PonsPosition]:
    """The positions of set ``name`` (a key of ``SETS``), in file order, at most ``limit``.

    Raises ``ValueError`` for an unknown name.
    """
    if name not in SETS:
        raise ValueError(f"unknown Pons set {name!r}; valid sets: {', '.join(SETS)}")
    path = resources.files("connectx_az") / "data" / "pons" / SETS[name]
    lines = [line for line in path.read_text(encoding="ascii").splitlines() if line.strip()]
    return [_parse(line) for line in lines[:limit]]


def position_of(p: PonsPosition) -> tuple[int, int]:
    """``(position, mask)`` bitboards of the benchmark position (side to move's stones first)."""
    return game.from_moves(p.moves)


def _played_score(p: PonsPosition, col: int) -> int:
    if not 0 <= col < game.COLS or p.move_scores[col] is None:
        raise ValueError(f"column {col} is not a legal move in position {p.moves}")
    return p.move_scores[col]


def is_mistake(p: PonsPosition, col: int) -> bool:
    """True if playing ``col`` (0-based) throws away a win or turns a draw into a loss."""
    return _sign(_played_score(p, col)) < p.result


def is_strict_mistake(p: PonsPosition, col: int) -> bool:
    """True if ``col`` scores below the best move (a slower win or a faster loss counts too)."""
    return _played_score(p, col) < p.score


@dataclass
class SetResult:
    """How many of a set's positions an agent answered with a (strict) mistake."""

    name: str
    num_positions: int
    num_mistakes: int
    num_strict_mistakes: int
    mistakes: tuple[int, ...] = ()  # indices (in the set's order) of the positions answered with a mistake

    @property
    def mistake_rate(self) -> float:
        return self.num_mistakes / self.num_positions if self.num_positions else 0.0

    @property
    def strict_rate(self) -> float:
        return self.num_strict_mistakes / self.num_positions if self.num_positions else 0.0


def grade(name: str, positions: Sequence[PonsPosition], cols: Sequence[int]) -> SetResult:
    """Grade one chosen column (0-based) per position.  Raises ``ValueError`` on a length
    mismatch or an illegal column."""
    if len(positions) != len(cols):
        raise ValueError(f"{len(positions)} positions but {len(cols)} moves")
    mistakes = tuple(i for i, (p, c) in enumerate(zip(positions, cols, strict=True)) if is_mistake(p, c))
    return SetResult(
        name,
        len(positions),
        len(mistakes),
        sum(is_strict_mistake(p, c) for p, c in zip(positions, cols, strict=True)),
        mistakes,
    )


def paired(a: dict[str, dict], b: dict[str, dict]) -> dict[str, dict[str, int]]:
    """Paired counts of two gradings of the same positions, per set both graded.

    ``a`` and ``b`` map a set's name to a row of ``eval pons --json`` (``n`` and
    ``mistakes``, the indices of positions answered with a mistake; both must be
    graded on the same first ``n`` positions).  Returns, per set, ``n``,
    ``only_a`` (positions ``a`` gets wrong and ``b`` right), ``only_b`` and
    ``both``.  Raises ``ValueError`` when the position counts differ.
    """
    out = {}
    for name in [n for n in a if n in b]:
        if a[name]["n"] != b[name]["n"]:
            raise ValueError(f"{name}: {a[name]['n']} positions against {b[name]['n']}; grade the same positions")
        wrong_a, wrong_b = set(a[name]["mistakes"]), set(b[name]["mistakes"])
        out[name] = {"n": a[name]["n"], "only_a": len(wrong_a - wrong_b), "only_b": len(wrong_b - wrong_a),
                     "both": len(wrong_a & wrong_b)}
    return out


# --------------------------------------------------------------------------- grading agents


def choose_policy(evaluator: mcts.Evaluator, positions: list[tuple[int, int]]) -> list[int]:
    """Raw-policy argmax over legal columns for each position."""
    p = np.array([x[0] for x in positions], np.uint64)
    m = np.array([x[1] for x in positions], np.uint64)
    logits, _ = evaluator.evaluate(game.encode(p, m))
    return list(np.where(game.legal_mask(m), logits, -np.inf).argmax(axis=1))


def _choose_search(evaluator: mcts.Evaluator, positions: list[tuple[int, int]],
                   search: mcts.SearchConfig) -> list[int]:
    """MCTS (no noise) at ``search.num_simulations`` for each position, batched across positions."""
    p = np.array([x[0] for x in positions], np.uint64)
    m = np.array([x[1] for x in positions], np.uint64)
    tree = mcts.Tree(p, m, capacity=search.num_simulations + 1)
    mcts.search(tree, evaluator, search)
    return list(mcts.best_cols(tree))


def grade_sets(choose: Callable[[list[tuple[int, int]]], list[int]], *, limit: int | None = None,
               sets: list[str] | None = None) -> list[SetResult]:
    """Grade ``choose`` (positions -> columns) on each Pons set."""
    results = []
    for name in sets or list(SETS):
        positions = load_set(name, limit=limit)
        cols = choose([position_of(p) for p in positions])
        results.append(grade(name, positions, [int(c) for c in cols]))
    return results


def policy_mistake_rates(evaluator: mcts.Evaluator, *, limit: int = 100) -> dict[str, float]:
    """``{"pons_policy/<set>": mistake rate}`` of the raw policy on ``limit`` positions per set."""
    results = grade_sets(lambda pos: choose_policy(evaluator, pos), limit=limit)
    return {f"pons_policy/{r.name}": round(r.mistake_rate, 4) for r in results}


def search_mistake_rates(evaluator: mcts.Evaluator, search: mcts.SearchConfig, *,
                         limit: int | None = None, sets: list[str] | None = None) -> list[SetResult]:
    """Pons grades of MCTS without noise at ``search.num_simulations`` simulations."""
    return grade_sets(lambda pos: _choose_search(evaluator, pos, search), limit=limit, sets=sets)


def submission_mistake_rates(submission: str | Path, *, limit: int | None = None, sets: list[str] | None = None,
                             act_timeout: float = 2.0, overage: float = 60.0,
                             on_position: Callable[[], None] | None = None) -> list[SetResult]:
    """Pons grades of a built ``submission.py`` under the Kaggle clock.

    The file is executed afresh for every position (as Kaggle loads it for every
    game), so each answer pays the load and decode time of a first move, and
    ``overage`` is the bank it sees.  Before the first position the process plays
    a game's first move (the empty board, the full bank), as a real game has by
    the time such a position comes up; what lasts of it is the solver kernel
    numba compiled, which later executions of the file in the process find
    (``solver_numba``).  Run it in a process pinned to one core with what
    Kaggle lacks blocked (``connectx-az eval pons --submission --runtime``).
    """
    obs, cfg = kaggle_io.kaggle_inputs(0, 0, act_timeout=act_timeout)
    kaggle_io.load_submission(submission)(obs, cfg)

    def choose(positions: list[tuple[int, int]]) -> list[int]:
        cols = []
        for position, mask in positions:
            obs, cfg = kaggle_io.kaggle_inputs(position, mask, act_timeout=act_timeout, overage=overage)
            cols.append(int(kaggle_io.load_submission(submission)(obs, cfg)))
            if on_position is not None:
                on_position()
        return cols

    return grade_sets(choose, limit=limit, sets=sets)
