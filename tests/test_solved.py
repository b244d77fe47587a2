from pathlib import Path

import numpy as np
import pytest

from connectx_az import game, pons, solved, solver


def _label(n: int, **kwargs) -> tuple[solved.Labels, solved.LabelStats]:
    return solved.label(num_positions=n, min_plies=14, max_plies=16, prover=solver.Solver(), **kwargs)


def test_label_keeps_proven_random_positions_with_their_true_results() -> None:
    labels, stats = _label(12, seed=3)
    assert len(labels) == stats.kept == 12 and stats.tried == stats.kept + stats.unproven
    assert labels.position.dtype == np.uint64 and labels.result.dtype == np.int8
    check = solver.Solver()
    for position, mask, plies, result in zip(labels.position, labels.mask, labels.plies, labels.result, strict=True):
        position, mask = int(position), int(mask)
        assert 14 <= plies <= 16 and game.num_stones(mask) == plies
        assert game.outcome(position, mask) is None and not solver._can_win_next(position, mask)
        assert check.solve(position, mask, weak=True) == result
    assert labels.obs().shape == (12, 2, game.ROWS, game.COLS)
    assert sum(labels.counts()) == 12


def test_label_never_keeps_an_excluded_or_repeated_position() -> None:
    first, _ = _label(10, seed=5)
    again, stats = _label(10, seed=5, exclude=first.keys())
    assert not first.keys() & again.keys() and stats.skipped >= 10
    assert len(again.keys()) == len(again)


def test_benchmark_keys_hold_the_pons_positions_and_their_children() -> None:
    keys = solved.benchmark_keys()
    p = pons.load_set("Begin-Easy")[0]
    position, mask = pons.position_of(p)
    assert (position, mask) in keys
    assert all(game.play(position, mask, col) in keys for col in game.legal_cols(mask))
    moves, _ = pons.load_results("Begin-Hard")[-1]
    assert game.from_moves(moves) in keys


def test_labels_survive_a_round_trip_and_concat_keeps_each_position_once(tmp_path: Path) -> None:
    labels, _ = _label(6, seed=7)
    path = solved.save(tmp_path / "labels.npz", labels)
    back = solved.load(path)
    assert all(np.array_equal(getattr(back, f), getattr(labels, f)) for f in solved.FIELDS)
    both = solved.concat(labels, back, solved.empty())
    assert len(both) == 6 and both.keys() == labels.keys()
    assert solved.empty().obs().shape == (0, 2, game.ROWS, game.COLS)


def test_bad_labels_files_give_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(solved.LabelsError, match="does not exist"):
        solved.load(tmp_path / "none.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip file")
    with pytest.raises(solved.LabelsError, match="not a labels file"):
        solved.load(tmp_path / "junk.npz")
    np.savez(tmp_path / "bad.npz", position=np.zeros(2, np.uint64), mask=np.zeros(2, np.uint64),
             plies=np.zeros(2, np.int8), result=np.array([1, 5], np.int8))
    with pytest.raises(solved.LabelsError, match="results must be"):
        solved.load(tmp_path / "bad.npz")
    np.savez(tmp_path / "odd.npz", position=np.array([3], np.uint64), mask=np.array([1], np.uint64),
             plies=np.zeros(1, np.int8), result=np.zeros(1, np.int8))
    with pytest.raises(solved.LabelsError, match="outside its mask"):
        solved.load(tmp_path / "odd.npz")


def test_label_needs_a_stopping_rule_and_sane_plies() -> None:
    with pytest.raises(ValueError, match="num_positions or seconds"):
        solved.label(prover=solver.Solver())
    with pytest.raises(ValueError, match="plies"):
        solved.label(num_positions=1, min_plies=10, max_plies=5, prover=solver.Solver())
