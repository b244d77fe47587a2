"""Pascal Pons' Connect Four benchmark sets (``data/pons/``), every move's exact score, and grading against them.

Scores are for the side to move: winning with one's own k-th stone scores ``22 - k``, 0 is a draw, a loss is
negative.  Columns here are 0-based (``col``); the files' move strings are 1-based, as Pons writes them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from connectx_az import paths
from connectx_az.engine import game, mcts, search_tree

#: set name -> file, in the README's order (easiest stage first); Begin-Hard is partial
SETS = {
    "End-Easy": "Test_L3_R1.txt",
    "Middle-Easy": "Test_L2_R1.txt",
    "Middle-Medium": "Test_L2_R2.txt",
    "Begin-Easy": "Test_L1_R1.txt",
    "Begin-Medium": "Test_L1_R2.txt",
    "Begin-Hard": "Test_L1_R3.partial.txt",
}
#: set name -> file with every position's result alone (``MOVES SCORE``), where ``SETS`` is partial
RESULT_FILES = {"Begin-Hard": "raw/Test_L1_R3"}


def sign(x: int) -> int:
    return (x > 0) - (x < 0)


@dataclass(frozen=True)
class PonsPosition:
    """One benchmark line: ``moves`` (1-based), ``score`` and ``move_scores[col]`` (``None`` where full),
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
        return sign(self.score)

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


def _lines(file: str) -> list[str]:
    path = paths.PONS_DIR / file
    return [line for line in path.read_text(encoding="ascii").splitlines() if line.strip()]


def _check_name(name: str) -> None:
    if name not in SETS:
        raise ValueError(f"unknown Pons set {name!r}; valid sets: {', '.join(SETS)}")


def load_set(name: str, *, limit: int | None = None) -> list[PonsPosition]:
    """The positions of set ``name`` (a key of ``SETS``) in file order, at most ``limit``; ``ValueError`` if unknown."""
    _check_name(name)
    return [_parse(line) for line in _lines(SETS[name])[:limit]]


def load_results(name: str, *, limit: int | None = None) -> list[tuple[str, int]]:
    """``(moves, result)`` (+1/0/-1, side to move) of set ``name``'s positions, in file order, at most ``limit``.

    Where ``SETS`` is partial this reads ``RESULT_FILES``.  Raises ``ValueError`` for an unknown name or a
    malformed line."""
    _check_name(name)
    if name not in RESULT_FILES:
        return [(p.moves, p.result) for p in load_set(name, limit=limit)]
    results = []
    for line in _lines(RESULT_FILES[name])[:limit]:
        fields = line.split()
        if len(fields) != 2:
            raise ValueError(f"expected MOVES SCORE, got {line!r}")
        results.append((fields[0], sign(int(fields[1]))))
    return results


def position_of(p: PonsPosition) -> tuple[int, int]:
    """``(position, mask)`` bitboards of the benchmark position (side to move's stones first)."""
    return game.from_moves(p.moves)


def _played_score(p: PonsPosition, col: int) -> int:
    if not 0 <= col < game.COLS or p.move_scores[col] is None:
        raise ValueError(f"column {col} is not a legal move in position {p.moves}")
    return p.move_scores[col]


def is_mistake(p: PonsPosition, col: int) -> bool:
    """True if playing ``col`` (0-based) throws away a win or turns a draw into a loss."""
    return sign(_played_score(p, col)) < p.result


def is_strict_mistake(p: PonsPosition, col: int) -> bool:
    """True if ``col`` scores below the best move (a slower win or a faster loss counts too)."""
    return _played_score(p, col) < p.score


@dataclass
class SetResult:
    """How many of a set's positions an agent answered with a (strict) mistake; ``is_mistake`` in file order."""

    name: str
    num_positions: int
    num_mistakes: int
    num_strict_mistakes: int
    is_mistake: tuple[bool, ...] = field(default=(), compare=False, repr=False)

    @property
    def mistake_rate(self) -> float:
        return self.num_mistakes / self.num_positions if self.num_positions else 0.0

    @property
    def strict_rate(self) -> float:
        return self.num_strict_mistakes / self.num_positions if self.num_positions else 0.0


def grade(name: str, positions: Sequence[PonsPosition], cols: Sequence[int]) -> SetResult:
    """Grade one chosen column (0-based) a position; ``ValueError`` on a length mismatch or an illegal column."""
    if len(positions) != len(cols):
        raise ValueError(f"{len(positions)} positions but {len(cols)} moves")
    mistakes = tuple(is_mistake(p, c) for p, c in zip(positions, cols, strict=True))
    return SetResult(name, len(positions), sum(mistakes),
                     sum(is_strict_mistake(p, c) for p, c in zip(positions, cols, strict=True)), mistakes)


def choose_policy(evaluator: search_tree.Evaluator, positions: list[tuple[int, int]]) -> list[int]:
    """Raw-policy argmax over legal columns for each position."""
    p = np.array([x[0] for x in positions], np.uint64)
    m = np.array([x[1] for x in positions], np.uint64)
    logits, _ = evaluator.evaluate(game.encode(p, m))
    return list(np.where(game.legal_mask(m), logits, -np.inf).argmax(axis=1))


def _choose_search(evaluator: search_tree.Evaluator, positions: list[tuple[int, int]],
                   search: search_tree.SearchConfig) -> list[int]:
    """MCTS (no noise) at ``search.num_simulations`` for each position, batched across positions."""
    p = np.array([x[0] for x in positions], np.uint64)
    m = np.array([x[1] for x in positions], np.uint64)
    tree = search_tree.Tree(p, m, capacity=search.num_simulations + 1)
    mcts.compile_search(cache=True)  # where numba imports: the same columns, sooner
    mcts.search(tree, evaluator, search)
    return list(mcts.best_cols(tree))


def grade_sets(choose: Callable[[list[tuple[int, int]]], list[int]], *, limit: int | None = None,
               sets: list[str] | None = None, on_set: Callable[[], None] | None = None) -> list[SetResult]:
    """Grade ``choose`` (positions -> columns) on each Pons set; ``on_set()`` after each set."""
    results = []
    for name in sets or list(SETS):
        positions = load_set(name, limit=limit)
        cols = choose([position_of(p) for p in positions])
        results.append(grade(name, positions, [int(c) for c in cols]))
        if on_set is not None:
            on_set()
    return results


def policy_mistake_rates(evaluator: search_tree.Evaluator, *, limit: int = 100) -> dict[str, float]:
    """``{"pons_policy/<set>": mistake rate}`` of the raw policy on ``limit`` positions per set."""
    results = grade_sets(lambda pos: choose_policy(evaluator, pos), limit=limit)
    return {f"pons_policy/{r.name}": round(r.mistake_rate, 4) for r in results}


def search_mistake_rates(evaluator: search_tree.Evaluator, search: search_tree.SearchConfig, *,
                         limit: int | None = None, sets: list[str] | None = None,
                         on_set: Callable[[], None] | None = None) -> list[SetResult]:
    """Pons grades of MCTS without noise at ``search.num_simulations`` simulations; ``on_set()`` after each set."""
    return grade_sets(lambda pos: _choose_search(evaluator, pos, search), limit=limit, sets=sets, on_set=on_set)


def num_positions(sets: Sequence[str] | None = None, limit: int | None = None) -> int:
    """How many positions ``sets`` (default all) hold, ``limit`` at most a set."""
    return sum(len(load_set(name, limit=limit)) for name in sets or SETS)


def benchmark_keys() -> set[tuple[int, int]]:
    """The ``(position, mask)`` of every Pons position (all six sets, Begin-Hard's 1,000) and of every child."""
    keys = {position_of(p) for name in SETS for p in load_set(name)}
    for moves, _ in load_results("Begin-Hard"):
        keys.add(game.from_moves(moves))
    for position, mask in list(keys):
        for col in game.legal_cols(mask):
            keys.add(game.play(position, mask, col))
    return keys
