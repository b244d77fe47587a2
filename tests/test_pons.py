"""Loading the Pons benchmark files and grading moves."""

from __future__ import annotations

import pytest

from connectx_az.engine import game
from connectx_az.testsets import pons


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


