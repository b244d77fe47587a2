"""Grading a network or a built file against the Pons sets (``testsets.pons``): ``eval pons``'s work.

``grade_model`` grades a network (raw policy, MCTS, value head), ``submissions_mistake_rates`` built
``submission.py`` files under the Kaggle clock.  The value head is graded by its W/D/L class (``wdl_class``, side to
move) against the true result (``value_accuracy``); ``value_calibration`` says why a class is wrong.  Each result
keeps which positions it got right, for paired comparisons of two models (``compare``, ``paired``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from connectx_az.engine import game, search_tree
from connectx_az.evaluation import kaggle_io
from connectx_az.testsets.pons import (
    SETS,
    PonsPosition,
    SetResult,
    choose_policy,
    grade,
    grade_sets,
    load_results,
    load_set,
    position_of,
    search_mistake_rates,
    sign,
)

#: a value above this is read as a win, below its negative as a loss, in between as a draw
WDL_THRESHOLD = 1 / 3


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
    """``(position, mask, result)`` after each legal move of each position, in order; ``result`` is for the child's
    side to move (the negated sign of the move's score).  Moves that end the game are left out: the rules score
    those positions, never the network."""
    children = []
    for p in positions:
        position, mask = position_of(p)
        for col, score in enumerate(p.move_scores):
            if score is None:
                continue
            child = game.play(position, mask, col)
            if game.outcome(*child) is None:
                children.append((*child, -sign(score)))
    return children


def _values(evaluator: search_tree.Evaluator, position: np.ndarray, mask: np.ndarray, batch: int = 1024) -> np.ndarray:
    """``float32[M]`` the evaluator's values of ``M`` positions (side to move), ``batch`` at a time."""
    values = [np.asarray(evaluator.evaluate(game.encode(position[i:i + batch], mask[i:i + batch]))[1],
                         np.float32).reshape(-1) for i in range(0, len(position), batch)]
    return np.concatenate(values) if values else np.zeros(0, np.float32)


def _triple_arrays(triples: Sequence[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(uint64 positions, uint64 masks, int8 results)`` of ``(position, mask, result)`` triples."""
    return (np.array([p for p, _, _ in triples], np.uint64), np.array([m for _, m, _ in triples], np.uint64),
            np.array([r for _, _, r in triples], np.int8))


def grade_values(name: str, evaluator: search_tree.Evaluator, positions: Sequence[tuple[int, int, int]]) -> ValueResult:
    """Grade the value head on ``(position, mask, result)`` triples (result for the side to move)."""
    position, mask, result = _triple_arrays(positions)
    correct = wdl_class(_values(evaluator, position, mask)) == result
    return ValueResult(name, len(positions), int(correct.sum()), tuple(bool(c) for c in correct))


def value_accuracy(evaluator: search_tree.Evaluator, *, children: bool = False, limit: int | None = None,
                   sets: list[str] | None = None, on_set: Callable[[], None] | None = None) -> list[ValueResult]:
    """The value head's W/D/L accuracy on each set; ``on_set()`` after each set.

    On the set's positions (``load_results``: Begin-Hard's 1,000, results only), or with ``children`` on the
    positions one move after the annotated ones (``child_results``).  ``limit`` caps the positions read from each file.
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

    ``confusion[t][c]`` counts the positions of true result ``t - 1`` (loss, draw, win) that ``wdl_class`` reads as
    ``c - 1``; ``mean_value`` is the mean value of each true result (NaN where a set has none); ``band_accuracy`` pairs
    each draw band ``b`` (a win above ``b``, a loss below ``-b``) with the W/D/L accuracy it gives; ``sign_accuracy``
    is how often the value's sign matches a decisive result (NaN without one)."""

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


def value_calibrations(evaluator: search_tree.Evaluator, *, children: bool = False, limit: int | None = None,
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
    """Two agents graded on the same positions of set ``name``: how many of the ``num_positions`` the first got right
    and the second did not (``only_first``), and the reverse (``only_second``).  Right: no mistake, or for value
    results the right W/D/L class."""

    name: str
    num_positions: int
    only_first: int
    only_second: int


def compare(first: SetResult | ValueResult, second: SetResult | ValueResult) -> Paired:
    """The paired comparison of two results; ``ValueError`` when they are not comparable (other set, kind or number
    of positions, or a result without its per-position record)."""
    def right(r: SetResult | ValueResult) -> tuple[bool, ...]:
        return r.is_correct if isinstance(r, ValueResult) else tuple(not m for m in r.is_mistake)

    a, b = right(first), right(second)
    if (type(first), first.name, first.num_positions) != (type(second), second.name, second.num_positions) \
            or len(a) != first.num_positions or len(b) != len(a):
        raise ValueError(f"cannot pair {first.name} ({first.num_positions}) with {second.name} "
                         f"({second.num_positions}): not the same positions and kind of grade")
    return Paired(first.name, first.num_positions, sum(x and not y for x, y in zip(a, b, strict=True)),
                  sum(y and not x for x, y in zip(a, b, strict=True)))


def sign_test(only_a: int, only_b: int) -> float:
    """One-sided exact sign test that ``a`` is worse: P(X >= only_a) for X ~ Binomial(only_a + only_b, 1/2), where
    ``only_a`` positions are wrong for ``a`` alone and ``only_b`` for ``b`` alone."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    return sum(math.comb(n, k) for k in range(only_a, n + 1)) / 2 ** n


def paired(a: dict[str, dict], b: dict[str, dict]) -> dict[str, dict[str, int]]:
    """``compare`` for two gradings saved as ``eval pons --json`` rows, per set both graded.

    ``a`` and ``b`` map a set's name to a row (``n`` and ``mistakes``, the indices of the positions answered with a
    mistake, both graded on the same first ``n`` positions).  Per set: ``n``, ``only_a`` (positions ``a`` gets wrong
    and ``b`` right), ``only_b`` and ``both``.  ``ValueError`` when the position counts differ."""
    out = {}
    for name in [n for n in a if n in b]:
        if a[name]["n"] != b[name]["n"]:
            raise ValueError(f"{name}: {a[name]['n']} positions against {b[name]['n']}; grade the same positions")
        wrong_a, wrong_b = set(a[name]["mistakes"]), set(b[name]["mistakes"])
        out[name] = {"n": a[name]["n"], "only_a": len(wrong_a - wrong_b), "only_b": len(wrong_b - wrong_a),
                     "both": len(wrong_a & wrong_b)}
    return out


def grading_evals(sims: Sequence[int], sets: Sequence[str] | None = None) -> int:
    """The network evaluations a position that ``grade_model`` makes over ``sets``: the unit of its ``on_evals``."""
    return len(sets or SETS) * (3 + sum(sims))


def grade_model(evaluator: search_tree.Evaluator, *, sims: Sequence[int], limit: int | None = None,
                sets: list[str] | None = None,
                on_evals: Callable[[int], None] | None = None) -> dict[str, list[SetResult] | list[ValueResult]]:
    """``eval pons``'s grades of a network: mode -> one grade a set.

    The modes: ``policy`` (the raw policy), ``mcts<N>`` for each of ``sims`` (``search_mistake_rates``), ``value`` and
    ``value_children`` (``value_accuracy`` on the sets' positions and on their children).  ``on_evals(n)`` after each
    set of each mode, ``n`` its network evaluations a position (1, or N for ``mcts<N>``; ``grading_evals`` in all)."""
    def step(weight: int = 1) -> Callable[[], None] | None:
        return None if on_evals is None else lambda: on_evals(weight)

    table: dict[str, list[SetResult] | list[ValueResult]] = {
        "policy": grade_sets(lambda pos: choose_policy(evaluator, pos), limit=limit, sets=sets, on_set=step())}
    for num_sims in sims:
        table[f"mcts{num_sims}"] = search_mistake_rates(evaluator, search_tree.SearchConfig(num_simulations=num_sims),
                                                        limit=limit, sets=sets, on_set=step(num_sims))
    table["value"] = value_accuracy(evaluator, limit=limit, sets=sets, on_set=step())
    table["value_children"] = value_accuracy(evaluator, children=True, limit=limit, sets=sets, on_set=step())
    return table


def submissions_mistake_rates(submissions: Sequence[str | Path], *, limit: int | None = None,
                              sets: list[str] | None = None, act_timeout: float = 2.0, overage: float = 60.0,
                              on_position: Callable[[], None] | None = None) -> list[list[SetResult]]:
    """Pons grades of built ``submission.py`` files under the Kaggle clock, one list of sets per file.

    Each file is executed afresh for every position, as Kaggle loads it for every game, so each answer pays a first
    move's load and decode; ``overage`` is the bank it sees.  First each file plays a game's first move (the empty
    board, the full bank) and a searched move with its book off (``kaggle_io.warm_up``), so that the process holds
    the solver kernel numba compiled, as a real game does by the time such a position comes up.  Files take turns
    on each position, the first to answer rotating, so that a paired comparison (``compare``) sees the same machine,
    load and clock for each.  Run it pinned to one core with what Kaggle lacks blocked (``connectx-az eval pons
    --submission --runtime``).  ``on_position()`` once every file has answered a position.  A file that is not a
    submission, whose network does not load (``kaggle_io.check_network``) or whose agent fails that first move
    raises ``kaggle_io.SubmissionError`` before any grading."""
    paths = [str(s) for s in submissions]
    for path in paths:
        kaggle_io.check_network(path)
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
