"""Grading value heads and pairing two gradings (evaluation.grading)."""

from __future__ import annotations

import numpy as np
import pytest

from connectx_az.engine import game
from connectx_az.evaluation import grading
from connectx_az.testsets import pons


class ResultEvaluator:
    """A value head that knows the results it is given (``{(position, mask): value}``), else says ``default``."""

    def __init__(self, values: dict[tuple[int, int], float], default: float = 0.0) -> None:
        self.values, self.default = values, default

    def evaluate(self, obs):

        value = [self.values.get(game.decode(o), self.default) for o in obs]
        return np.zeros((len(obs), 7), np.float32), np.array(value, np.float32)



def test_paired_counts_and_refuses_different_positions():
    a = {"Begin-Hard": {"n": 5, "mistakes": [0, 2, 4]}, "End-Easy": {"n": 3, "mistakes": []}}
    b = {"Begin-Hard": {"n": 5, "mistakes": [2, 3]}, "Middle-Easy": {"n": 3, "mistakes": [1]}}
    assert grading.paired(a, b) == {"Begin-Hard": {"n": 5, "only_a": 2, "only_b": 1, "both": 1}}
    with pytest.raises(ValueError, match="same positions"):
        grading.paired(a, {"Begin-Hard": {"n": 4, "mistakes": []}})


def test_wdl_class_thresholds() -> None:
    import numpy as np

    values = np.array([-1, -0.34, -1 / 3, 0, 1 / 3, 0.34, 1], np.float32)
    assert grading.wdl_class(values).tolist() == [-1, -1, 0, 0, 0, 1, 1]


def test_child_results_take_the_negated_move_scores_and_skip_finished_games() -> None:
    # End-Easy line 1: the side to move has a winning move, which ends the game and is left out.
    p = pons.load_set("End-Easy", limit=1)[0]
    position, mask = pons.position_of(p)
    children = grading.child_results([p])
    expected = []
    for col, score in enumerate(p.move_scores):
        if score is not None and game.outcome(*game.play(position, mask, col)) is None:
            expected.append((*game.play(position, mask, col), -((score > 0) - (score < 0))))
    assert children == expected
    wins = [c for c, s in enumerate(p.move_scores) if s is not None and game.wins_now(position, mask, c)]
    assert len(children) == sum(s is not None for s in p.move_scores) - len(wins)


def test_value_accuracy_and_paired_comparisons() -> None:
    sets = ["Begin-Hard", "Middle-Medium"]
    oracle = {game.from_moves(m): float(r) for name in sets for m, r in pons.load_results(name, limit=40)}
    perfect = grading.value_accuracy(ResultEvaluator(oracle), limit=40, sets=sets)
    assert [(r.name, r.num_positions, r.accuracy) for r in perfect] == [("Begin-Hard", 40, 1.0),
                                                                        ("Middle-Medium", 40, 1.0)]
    done: list[str] = []
    draws = grading.value_accuracy(ResultEvaluator({}), limit=40, sets=sets,  # says "draw" everywhere
                                on_set=lambda: done.append("set"))
    assert done == ["set", "set"]  # the progress callback, once a set
    for r in draws:
        assert r.num_correct == sum(res == 0 for _, res in pons.load_results(r.name, limit=40))
    paired = grading.compare(perfect[0], draws[0])
    assert (paired.only_first, paired.only_second) == (40 - draws[0].num_correct, 0)
    children = grading.value_accuracy(ResultEvaluator({}), children=True, limit=5, sets=["End-Easy"])[0]
    assert children.num_positions == len(grading.child_results(pons.load_set("End-Easy", limit=5)))
    graded = pons.grade("Begin-Easy", pons.load_set("Begin-Easy", limit=1), [4])  # a mistake
    chosen: list[int] = []
    assert pons.grade_sets(lambda pos: [4] * len(pos), limit=1, sets=["Begin-Easy"],
                           on_set=lambda: chosen.append(1))[0].is_mistake == (True,) and chosen == [1]
    best = pons.grade("Begin-Easy", pons.load_set("Begin-Easy", limit=1), [2])
    assert graded.is_mistake == (True,) and grading.compare(best, graded) == grading.Paired("Begin-Easy", 1, 1, 0)
    with pytest.raises(ValueError, match="cannot pair"):
        grading.compare(perfect[0], graded)


def test_value_calibration_reads_confusion_bands_means_and_sign() -> None:
    # Three losses, two draws, three wins, with values a head shrunk toward 0 would give.
    values = [-0.9, -0.2, 0.1, 0.0, 0.4, 0.25, 0.6, -0.05]
    results = [-1, -1, -1, 0, 0, 1, 1, 1]
    c = grading.value_calibration("toy", values, results, bands=(1 / 3, 0.1))
    assert c.num_positions == 8
    # rows: true loss, draw, win; columns: read as loss, draw, win at ±1/3
    assert c.confusion == ((1, 2, 0), (0, 1, 1), (0, 2, 1))
    assert np.allclose(c.mean_value, [(-0.9 - 0.2 + 0.1) / 3, 0.2, 0.8 / 3])
    # ±1/3: right on -0.9, 0.0, 0.6; ±0.1: right on -0.9, -0.2, 0.0, 0.25, 0.6
    assert [b for b, _ in c.band_accuracy] == [1 / 3, 0.1]
    assert np.allclose([a for _, a in c.band_accuracy], [3 / 8, 5 / 8])
    assert c.sign_accuracy == 4 / 6  # decisive: -0.9, -0.2 right; 0.1 wrong; 0.25, 0.6 right; -0.05 wrong
    # The grading's own band gives the value row's accuracy, on real positions.
    oracle = {game.from_moves(m): 0.5 * r for m, r in pons.load_results("Middle-Medium", limit=30)}
    cal = grading.value_calibrations(ResultEvaluator(oracle), limit=30, sets=["Middle-Medium"])[0]
    acc = grading.value_accuracy(ResultEvaluator(oracle), limit=30, sets=["Middle-Medium"])[0]
    assert cal.band_accuracy[0] == (grading.WDL_THRESHOLD, acc.accuracy) and cal.sign_accuracy == 1.0
    assert sum(map(sum, cal.confusion)) == 30 == cal.num_positions
    no_decisive = grading.value_calibration("draws", [0.0, 0.1], [0, 0])
    assert np.isnan(no_decisive.sign_accuracy) and np.isnan(no_decisive.mean_value[0])
    with pytest.raises(ValueError, match="2 values for 3 results"):
        grading.value_calibration("bad", [0.0, 0.1], [0, 0, 1])


# --------------------------------------------------------------------------- value head accuracy
