"""Pascal Pons' Connect Four benchmark sets, with every move's exact score, and grading against them.

The files live in the package data folder ``connectx_az/data/pons/`` (its README gives the
format).  Scores are Pons' scores for the side to move: winning with one's own k-th stone scores
``22 - k``, ``0`` is a draw, a loss is negative.  Columns here are 0-based (``col``); the files'
move strings are 1-based, as Pons writes them.

``grade`` scores chosen columns against a set; ``grade_sets`` runs any chooser (positions ->
columns) over the sets.  ``policy_mistake_rates`` grades a network's raw policy (the cheap
per-generation signal of training), ``search_mistake_rates`` MCTS at a fixed simulation count, and
``submissions_mistake_rates`` built ``submission.py`` files under the Kaggle clock; ``grade_model``
is ``eval pons``'s grading of a network (raw policy, MCTS, value head).

``value_accuracy`` grades a network's value head instead: its W/D/L class (``wdl_class``: above
1/3 a win, below -1/3 a loss, else a draw, for the side to move) against the true result, on each
set's positions (``load_results``: for Begin-Hard all 1,000 of the raw file, which gives results
only) or on the positions one move after them (``child_results``: the annotated positions only).
Each result keeps which positions it got right, for paired comparisons of two models
(``compare``).  ``value_calibration`` says why a class is wrong: the confusion of classes, the mean
value of each true result, the accuracy at narrower draw bands, and how often the value's sign is
right where the result is decisive.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from connectx_az.engine import game, mcts
from connectx_az.evaluation import kaggle_io

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
#: a value above this is read as a win, below its negative as a loss, in between as a draw
WDL_THRESHOLD = 1 / 3


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


def _lines(file: str) -> list[str]:
    path = resources.files("connectx_az") / "data" / "pons" / file
    return [line for line in path.read_text(encoding="ascii").splitlines() if line.strip()]


def _check_name(name: str) -> None:
    if name not in SETS:
        raise ValueError(f"unknown Pons set {name!r}; valid sets: {', '.join(SETS)}")


def load_set(name: str, *, limit: int | None = None) -> list[PonsPosition]:
    """The positions of set ``name`` (a key of ``SETS``), in file order, at most ``limit``.

    Raises ``ValueError`` for an unknown name.
    """
    _check_name(name)
    return [_parse(line) for line in _lines(SETS[name])[:limit]]


def load_results(name: str, *, limit: int | None = None) -> list[tuple[str, int]]:
    """``(moves, result)`` of every position of set ``name``, in file order, at most ``limit``.

    ``result`` is +1/0/-1 for the side to move under perfect play.  For a set
    whose annotated file is partial (``RESULT_FILES``: Begin-Hard) this reads
    the file of results alone, which holds all its positions.  Raises
    ``ValueError`` for an unknown name or a malformed line.
    """
    _check_name(name)
    if name not in RESULT_FILES:
        return [(p.moves, p.result) for p in load_set(name, limit=limit)]
    results = []
    for line in _lines(RESULT_FILES[name])[:limit]:
        fields = line.split()
        if len(fields) != 2:
            raise ValueError(f"expected MOVES SCORE, got {line!r}")
        results.append((fields[0], _sign(int(fields[1]))))
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
    return _sign(_played_score(p, col)) < p.result


def is_strict_mistake(p: PonsPosition, col: int) -> bool:
    """True if ``col`` scores below the best move (a slower win or a faster loss counts too)."""
    return _played_score(p, col) < p.score


@dataclass
class SetResult:
    """How many of a set's positions an agent answered with a (strict) mistake.

    ``is_mistake`` says which, position by position in file order (for ``compare``).
    """

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
    """Grade one chosen column (0-based) per position.  Raises ``ValueError`` on a length
    mismatch or an illegal column."""
    if len(positions) != len(cols):
        raise ValueError(f"{len(positions)} positions but {len(cols)} moves")
    mistakes = tuple(is_mistake(p, c) for p, c in zip(positions, cols, strict=True))
    return SetResult(
        name,
        len(positions),
        sum(mistakes),
        sum(is_strict_mistake(p, c) for p, c in zip(positions, cols, strict=True)),
        mistakes,
    )


@dataclass
class ValueResult:
    """How many of a set's positions a value head classed right (``wdl_class``), and which."""

    name: str
    num_positions: int
    num_correct: int
    is_correct: tuple[bool, ...] = field(default=(), compare=False, repr=False)

    @property
    def accuracy(self) -> float:
        return self.num_correct / self.num_positions if self.num_positions else 0.0


def wdl_class(value: np.ndarray, threshold: float = WDL_THRESHOLD) -> np.ndarray:
    """``int8[...]`` +1 (win), 0 (draw), -1 (loss) of values in ``[-1, 1]``, side to move: a win above
    ``threshold``, a loss below its negative."""
    value = np.asarray(value)
    return np.where(value > threshold, 1, np.where(value < -threshold, -1, 0)).astype(np.int8)


def child_results(positions: Sequence[PonsPosition]) -> list[tuple[int, int, int]]:
    """``(position, mask, result)`` after each legal move of each position, in order.

    ``result`` is for the child's side to move (the negated sign of the
    move's score).  Moves that end the game are left out: the rules score
    those positions, never the network.
    """
    children = []
    for p in positions:
        position, mask = position_of(p)
        for col, score in enumerate(p.move_scores):
            if score is None:
                continue
            child = game.play(position, mask, col)
            if game.outcome(*child) is None:
                children.append((*child, -_sign(score)))
    return children


def _values(evaluator: mcts.Evaluator, position: np.ndarray, mask: np.ndarray, batch: int = 1024) -> np.ndarray:
    """``float32[M]`` the evaluator's values of ``M`` positions (side to move), ``batch`` at a time."""
    values = [np.asarray(evaluator.evaluate(game.encode(position[i:i + batch], mask[i:i + batch]))[1],
                         np.float32).reshape(-1) for i in range(0, len(position), batch)]
    return np.concatenate(values) if values else np.zeros(0, np.float32)


def _triple_arrays(triples: Sequence[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(uint64 positions, uint64 masks, int8 results)`` of ``(position, mask, result)`` triples."""
    return (np.array([p for p, _, _ in triples], np.uint64), np.array([m for _, m, _ in triples], np.uint64),
            np.array([r for _, _, r in triples], np.int8))


def grade_values(name: str, evaluator: mcts.Evaluator, positions: Sequence[tuple[int, int, int]]) -> ValueResult:
    """Grade the value head on ``(position, mask, result)`` triples (result for the side to move)."""
    position, mask, result = _triple_arrays(positions)
    correct = wdl_class(_values(evaluator, position, mask)) == result
    return ValueResult(name, len(positions), int(correct.sum()), tuple(bool(c) for c in correct))


def value_accuracy(evaluator: mcts.Evaluator, *, children: bool = False, limit: int | None = None,
                   sets: list[str] | None = None, on_set: Callable[[], None] | None = None) -> list[ValueResult]:
    """The value head's W/D/L accuracy on each set; ``on_set()`` after each set.

    On the set's positions (``load_results``: Begin-Hard's 1,000), or with
    ``children`` on the positions one move after the annotated ones
    (``child_results``).  ``limit`` caps the positions read from each file.
    """
    results = []
    for name in sets or list(SETS):
        results.append(grade_values(name, evaluator, _value_positions(name, children=children, limit=limit)))
        if on_set is not None:
            on_set()
    return results


def _value_positions(name: str, *, children: bool = False, limit: int | None = None) -> list[tuple[int, int, int]]:
    """``(position, mask, result)`` of a set's positions (``load_results``) or of their children."""
    if children:
        return child_results(load_set(name, limit=limit))
    return [(*game.from_moves(moves), result) for moves, result in load_results(name, limit=limit)]


#: draw bands ``value_calibration`` reads the classes at: the grading's own, then narrower ones
VALUE_BANDS = (WDL_THRESHOLD, 0.2, 0.1, 0.05)


@dataclass(frozen=True)
class ValueCalibration:
    """Where a value head's values sit against the true results of set ``name`` (side to move).

    ``confusion[t][c]`` counts the positions of true result ``t - 1`` (loss, draw, win) that
    ``wdl_class`` reads as ``c - 1``; ``mean_value`` is the mean value of each true result (NaN
    where a set has none); ``band_accuracy`` pairs each draw band ``b`` (a win above ``b``, a loss
    below ``-b``) with the W/D/L accuracy it gives; ``sign_accuracy`` is how often the value's sign
    matches a decisive result (NaN without one).
    """

    name: str
    num_positions: int
    confusion: tuple[tuple[int, int, int], ...]
    mean_value: tuple[float, float, float]
    band_accuracy: tuple[tuple[float, float], ...]
    sign_accuracy: float


def value_calibration(name: str, values: np.ndarray, results: np.ndarray,
                      bands: Sequence[float] = VALUE_BANDS) -> ValueCalibration:
    """Calibrate ``values`` (``float[N]`` in ``[-1, 1]``) against ``results`` (``int[N]`` in -1/0/+1)."""
    values = np.asarray(values, np.float64).reshape(-1)
    results = np.asarray(results).reshape(-1)
    if values.shape != results.shape:
        raise ValueError(f"{len(values)} values for {len(results)} results")
    predicted = wdl_class(values)
    confusion = tuple(tuple(int(np.sum((results == t) & (predicted == c))) for c in (-1, 0, 1)) for t in (-1, 0, 1))
    mean_value = tuple(float(values[results == t].mean()) if np.any(results == t) else float("nan")
                       for t in (-1, 0, 1))
    n = max(len(values), 1)
    band_accuracy = tuple((float(b), float(np.sum(wdl_class(values, b) == results)) / n) for b in bands)
    decisive = results != 0
    sign_accuracy = (float(np.mean(np.sign(values[decisive]) == results[decisive])) if np.any(decisive)
                     else float("nan"))
    return ValueCalibration(name, len(values), confusion, mean_value, band_accuracy, sign_accuracy)


def value_calibrations(evaluator: mcts.Evaluator, *, children: bool = False, limit: int | None = None,
                       sets: list[str] | None = None, bands: Sequence[float] = VALUE_BANDS,
                       on_set: Callable[[], None] | None = None) -> list[ValueCalibration]:
    """``value_calibration`` of the evaluator's values on each set (positions as ``value_accuracy``)."""
    out = []
    for name in sets or list(SETS):
        position, mask, result = _triple_arrays(_value_positions(name, children=children, limit=limit))
        out.append(value_calibration(name, _values(evaluator, position, mask), result, bands))
        if on_set is not None:
            on_set()
    return out


@dataclass(frozen=True)
class Paired:
    """Two agents graded on the same positions of set ``name``: how many of the ``num_positions``
    the first got right and the second did not (``only_first``), and the reverse (``only_second``).

    With mistake rates "right" means no mistake; with value results, the right W/D/L class.
    """

    name: str
    num_positions: int
    only_first: int
    only_second: int


def compare(first: SetResult | ValueResult, second: SetResult | ValueResult) -> Paired:
    """The paired comparison of two results of the same kind on the same positions.

    Raises ``ValueError`` when they are not comparable (other set, kind or number of positions,
    or a result without its per-position record).
    """
    def right(r: SetResult | ValueResult) -> tuple[bool, ...]:
        return r.is_correct if isinstance(r, ValueResult) else tuple(not m for m in r.is_mistake)

    a, b = right(first), right(second)
    if (type(first), first.name, first.num_positions) != (type(second), second.name, second.num_positions) \
            or len(a) != first.num_positions or len(b) != len(a):
        raise ValueError(f"cannot pair {first.name} ({first.num_positions}) with {second.name} "
                         f"({second.num_positions}): not the same positions and kind of grade")
    return Paired(first.name, first.num_positions, sum(x and not y for x, y in zip(a, b, strict=True)),
                  sum(y and not x for x, y in zip(a, b, strict=True)))


def paired(a: dict[str, dict], b: dict[str, dict]) -> dict[str, dict[str, int]]:
    """``compare`` for two gradings saved as ``eval pons --json`` rows, per set both graded.

    ``a`` and ``b`` map a set's name to a row (``n`` and ``mistakes``, the
    indices of the positions answered with a mistake; both graded on the same
    first ``n`` positions).  Returns, per set, ``n``, ``only_a`` (positions
    ``a`` gets wrong and ``b`` right), ``only_b`` and ``both``.  Raises
    ``ValueError`` when the position counts differ.
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


def policy_mistake_rates(evaluator: mcts.Evaluator, *, limit: int = 100) -> dict[str, float]:
    """``{"pons_policy/<set>": mistake rate}`` of the raw policy on ``limit`` positions per set."""
    results = grade_sets(lambda pos: choose_policy(evaluator, pos), limit=limit)
    return {f"pons_policy/{r.name}": round(r.mistake_rate, 4) for r in results}


def search_mistake_rates(evaluator: mcts.Evaluator, search: mcts.SearchConfig, *,
                         limit: int | None = None, sets: list[str] | None = None,
                         on_set: Callable[[], None] | None = None) -> list[SetResult]:
    """Pons grades of MCTS without noise at ``search.num_simulations`` simulations; ``on_set()`` after each set."""
    return grade_sets(lambda pos: _choose_search(evaluator, pos, search), limit=limit, sets=sets, on_set=on_set)


def num_positions(sets: Sequence[str] | None = None, limit: int | None = None) -> int:
    """How many positions ``sets`` (default all) hold, ``limit`` at most a set."""
    return sum(len(load_set(name, limit=limit)) for name in sets or SETS)


def grading_evals(sims: Sequence[int], sets: Sequence[str] | None = None) -> int:
    """The network evaluations a position that ``grade_model`` makes over ``sets``: the unit of its ``on_evals``."""
    return len(sets or SETS) * (3 + sum(sims))


def grade_model(evaluator: mcts.Evaluator, *, sims: Sequence[int], limit: int | None = None,
                sets: list[str] | None = None,
                on_evals: Callable[[int], None] | None = None) -> dict[str, list[SetResult] | list[ValueResult]]:
    """``eval pons``'s grades of a network: mode -> one grade a set.

    The modes: ``policy`` (the raw policy), ``mcts<N>`` for each of ``sims`` (``search_mistake_rates``),
    ``value`` and ``value_children`` (``value_accuracy`` on the sets' positions and on their children).
    ``on_evals(n)`` after each set of each mode, ``n`` its network evaluations a position (1, or N
    for ``mcts<N>``): a progress bar's steps, ``grading_evals`` in all.
    """
    def step(weight: int = 1) -> Callable[[], None] | None:
        return None if on_evals is None else lambda: on_evals(weight)

    table: dict[str, list[SetResult] | list[ValueResult]] = {
        "policy": grade_sets(lambda pos: choose_policy(evaluator, pos), limit=limit, sets=sets, on_set=step())}
    for num_sims in sims:
        table[f"mcts{num_sims}"] = search_mistake_rates(evaluator, mcts.SearchConfig(num_simulations=num_sims),
                                                        limit=limit, sets=sets, on_set=step(num_sims))
    table["value"] = value_accuracy(evaluator, limit=limit, sets=sets, on_set=step())
    table["value_children"] = value_accuracy(evaluator, children=True, limit=limit, sets=sets, on_set=step())
    return table


def submissions_mistake_rates(submissions: Sequence[str | Path], *, limit: int | None = None,
                              sets: list[str] | None = None, act_timeout: float = 2.0, overage: float = 60.0,
                              on_position: Callable[[], None] | None = None) -> list[list[SetResult]]:
    """Pons grades of built ``submission.py`` files under the Kaggle clock, one list of sets per file.

    Each file is executed afresh for every position (as Kaggle loads it for
    every game), so each answer pays the load and decode time of a first move,
    and ``overage`` is the bank it sees.  Before the first position the process
    plays each file's first move of a game (the empty board, the full bank), as
    a real game has by the time such a position comes up, and a searched move
    with the book switched off (``kaggle_io.warm_up``: a file whose book answers
    the empty board would otherwise never compile); what lasts of it is the
    solver kernel numba compiled, which later executions of a file in the
    process find (``solver_numba``).  Several files are graded in turns on each
    position, the first to move rotating from one position to the next, so that
    a paired comparison (``compare``) sees the same machine, load and clock for
    both.  Run it in a process pinned to one core with what Kaggle lacks blocked
    (``connectx-az eval pons --submission --runtime``).  ``on_position()`` is
    called once a position, after every file has answered it.  A file that is not a submission, or whose
    agent fails that first move, raises ``kaggle_io.SubmissionError`` before any grading.
    """
    paths = [str(s) for s in submissions]
    for path in paths:
        kaggle_io.first_move(path, act_timeout=act_timeout)
        kaggle_io.warm_up(path, act_timeout=act_timeout)
    results: list[list[SetResult]] = [[] for _ in paths]
    for name in sets or list(SETS):
        positions = load_set(name, limit=limit)
        cols = [[0] * len(positions) for _ in paths]
        for k, p in enumerate(positions):
            position, mask = position_of(p)
            for turn in range(len(paths)):
                i = (turn + k) % len(paths)
                obs, cfg = kaggle_io.kaggle_inputs(position, mask, act_timeout=act_timeout, overage=overage)
                cols[i][k] = int(kaggle_io.load_submission(paths[i])(obs, cfg))
            if on_position is not None:
                on_position()
        for i in range(len(paths)):
            results[i].append(grade(name, positions, cols[i]))
    return results
