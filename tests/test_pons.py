"""Loading the Pons benchmark files and grading moves."""

from __future__ import annotations

import numpy as np
import pytest

from connectx_az.engine import game
from connectx_az.evaluation import pons


@pytest.mark.parametrize("name", list(pons.SETS))
def test_sets_load_and_are_consistent(name: str) -> None:
    positions = pons.load_set(name)
    if name == "Begin-Hard":
        assert 0 < len(positions) <= 1000  # annotated so far
    else:
        assert len(positions) == 1000
    for p in positions:
        assert len(p.move_scores) == game.COLS
        assert max(s for s in p.move_scores if s is not None) == p.score
        position, mask = pons.position_of(p)
        assert game.num_stones(mask) == p.num_plies
        assert game.outcome(position, mask) is None
        assert [s is not None for s in p.move_scores] == list(game.legal_mask(mask))


def test_order_and_limit() -> None:
    assert list(pons.SETS)[:2] == ["End-Easy", "Middle-Easy"]
    first = pons.load_set("Middle-Easy", limit=2)
    assert [p.moves for p in first] == ["5554224333234511764415115", "52753311433677442422121"]
    assert first[0].move_scores == (-8, -8, -8, -8, None, 4, -8)


def test_unknown_set_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="End-Easy.*Begin-Hard"):
        pons.load_set("Easy")


def test_grading_examples() -> None:
    # Begin-Easy line 1: "32164625 11 -4 -3 11 4 0 -2 -5"
    p = pons.load_set("Begin-Easy", limit=1)[0]
    assert p.score == 11 and p.best_cols == (2,) and p.result == 1
    assert not pons.is_mistake(p, 2) and not pons.is_strict_mistake(p, 2)
    assert not pons.is_mistake(p, 3) and pons.is_strict_mistake(p, 3)  # a slower win
    assert pons.is_mistake(p, 4)  # a draw thrown away a win
    assert pons.is_mistake(p, 0)
    # End-Easy line 1: a lost position, "... -1 X X X X X -1 -2"
    lost = pons.load_set("End-Easy", limit=1)[0]
    assert lost.result == -1
    assert not pons.is_mistake(lost, 6) and pons.is_strict_mistake(lost, 6)  # loses faster
    with pytest.raises(ValueError, match="not a legal move"):
        pons.is_mistake(lost, 0)
    # Middle-Medium line 1: a draw, "274552224131661 0 -9 -11 -12 0 -11 -11 -11"
    drawn = pons.load_set("Middle-Medium", limit=1)[0]
    assert drawn.best_cols == (3,)
    assert pons.is_mistake(drawn, 0) and not pons.is_mistake(drawn, 3)


def test_grade_counts_and_rates() -> None:
    positions = pons.load_set("Begin-Easy", limit=1) + pons.load_set("End-Easy", limit=1)
    result = pons.grade("mixed", positions, [3, 6])
    assert result == pons.SetResult("mixed", 2, 0, 2)
    assert result.mistake_rate == 0.0 and result.strict_rate == 1.0
    assert pons.grade("mixed", positions, [4, 5]).mistake_rate == 0.5
    with pytest.raises(ValueError):
        pons.grade("mixed", positions, [3])


def test_paired_counts_and_refuses_different_positions():
    a = {"Begin-Hard": {"n": 5, "mistakes": [0, 2, 4]}, "End-Easy": {"n": 3, "mistakes": []}}
    b = {"Begin-Hard": {"n": 5, "mistakes": [2, 3]}, "Middle-Easy": {"n": 3, "mistakes": [1]}}
    assert pons.paired(a, b) == {"Begin-Hard": {"n": 5, "only_a": 2, "only_b": 1, "both": 1}}
    with pytest.raises(ValueError, match="same positions"):
        pons.paired(a, {"Begin-Hard": {"n": 4, "mistakes": []}})


# --------------------------------------------------------------------------- value head accuracy


class ResultEvaluator:
    """A value head that knows the results it is given (``{(position, mask): value}``), else says ``default``."""

    def __init__(self, values: dict[tuple[int, int], float], default: float = 0.0) -> None:
        self.values, self.default = values, default

    def evaluate(self, obs):
        import numpy as np

        value = [self.values.get(game.decode(o), self.default) for o in obs]
        return np.zeros((len(obs), 7), np.float32), np.array(value, np.float32)


def test_wdl_class_thresholds() -> None:
    import numpy as np

    values = np.array([-1, -0.34, -1 / 3, 0, 1 / 3, 0.34, 1], np.float32)
    assert pons.wdl_class(values).tolist() == [-1, -1, 0, 0, 0, 1, 1]


def test_begin_hard_results_cover_all_positions_and_agree_with_the_annotated_ones() -> None:
    results = pons.load_results("Begin-Hard")
    annotated = pons.load_set("Begin-Hard")
    assert len(results) == 1000 and {r for _, r in results} == {-1, 0, 1}
    # The annotated positions are a subset of them with the same results (in the set's order but for one:
    # raw position 193 comes after 307, where its annotation came in late; the 326 after the first 474
    # came in later still, and follow them so that earlier grades pair with `--limit 474`).
    index = {moves: i for i, (moves, _) in enumerate(results)}
    assert len(annotated) == len({p.moves for p in annotated}) and all(p.moves in index for p in annotated)
    assert all(results[index[p.moves]][1] == p.result for p in annotated)
    raw = [index[p.moves] for p in annotated]
    assert sorted(raw[:474]) == list(range(474)) and raw[307] == 193  # what `--limit 474` grades, in its order
    assert all(x < y for x, y in zip(raw[473:-1], raw[474:], strict=True))  # then the later ones, in order
    assert pons.load_results("End-Easy", limit=3) == [(p.moves, p.result) for p in pons.load_set("End-Easy", limit=3)]
    with pytest.raises(ValueError, match="unknown Pons set"):
        pons.load_results("Hard")


def test_child_results_take_the_negated_move_scores_and_skip_finished_games() -> None:
    # End-Easy line 1: the side to move has a winning move, which ends the game and is left out.
    p = pons.load_set("End-Easy", limit=1)[0]
    position, mask = pons.position_of(p)
    children = pons.child_results([p])
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
    perfect = pons.value_accuracy(ResultEvaluator(oracle), limit=40, sets=sets)
    assert [(r.name, r.num_positions, r.accuracy) for r in perfect] == [("Begin-Hard", 40, 1.0),
                                                                        ("Middle-Medium", 40, 1.0)]
    done: list[str] = []
    draws = pons.value_accuracy(ResultEvaluator({}), limit=40, sets=sets,  # says "draw" everywhere
                                on_set=lambda: done.append("set"))
    assert done == ["set", "set"]  # the progress callback, once a set
    for r in draws:
        assert r.num_correct == sum(res == 0 for _, res in pons.load_results(r.name, limit=40))
    paired = pons.compare(perfect[0], draws[0])
    assert (paired.only_first, paired.only_second) == (40 - draws[0].num_correct, 0)
    children = pons.value_accuracy(ResultEvaluator({}), children=True, limit=5, sets=["End-Easy"])[0]
    assert children.num_positions == len(pons.child_results(pons.load_set("End-Easy", limit=5)))
    graded = pons.grade("Begin-Easy", pons.load_set("Begin-Easy", limit=1), [4])  # a mistake
    chosen: list[int] = []
    assert pons.grade_sets(lambda pos: [4] * len(pos), limit=1, sets=["Begin-Easy"],
                           on_set=lambda: chosen.append(1))[0].is_mistake == (True,) and chosen == [1]
    best = pons.grade("Begin-Easy", pons.load_set("Begin-Easy", limit=1), [2])
    assert graded.is_mistake == (True,) and pons.compare(best, graded) == pons.Paired("Begin-Easy", 1, 1, 0)
    with pytest.raises(ValueError, match="cannot pair"):
        pons.compare(perfect[0], graded)


def test_value_calibration_reads_confusion_bands_means_and_sign() -> None:
    # Three losses, two draws, three wins, with values a head shrunk toward 0 would give.
    values = [-0.9, -0.2, 0.1, 0.0, 0.4, 0.25, 0.6, -0.05]
    results = [-1, -1, -1, 0, 0, 1, 1, 1]
    c = pons.value_calibration("toy", values, results, bands=(1 / 3, 0.1))
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
    cal = pons.value_calibrations(ResultEvaluator(oracle), limit=30, sets=["Middle-Medium"])[0]
    acc = pons.value_accuracy(ResultEvaluator(oracle), limit=30, sets=["Middle-Medium"])[0]
    assert cal.band_accuracy[0] == (pons.WDL_THRESHOLD, acc.accuracy) and cal.sign_accuracy == 1.0
    assert sum(map(sum, cal.confusion)) == 30 == cal.num_positions
    no_decisive = pons.value_calibration("draws", [0.0, 0.1], [0, 0])
    assert np.isnan(no_decisive.sign_accuracy) and np.isnan(no_decisive.mean_value[0])
    with pytest.raises(ValueError, match="2 values for 3 results"):
        pons.value_calibration("bad", [0.0, 0.1], [0, 0, 1])
