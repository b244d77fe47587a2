"""The evaluation commands' tables and report shapes (``evaluation/reports.py``)."""

from connectx_az.engine import game
from connectx_az.evaluation import reports


def test_validate_table_keeps_the_backend_and_solver_columns_apart() -> None:
    row = {"opponent": "negamax", "seat": 1, "wins": 3, "draws": 0, "losses": 0, "mean_move_s": 1.5,
           "max_move_s": 2.0, "max_bank_used_s": 0.5, "max_first_move_bank_s": 0.25, "bad_statuses": []}
    rows = [{**row, "backends": ["onnxruntime"], "solvers": ["numba"]},
            {**row, "seat": 2, "backends": ["numpy"], "solvers": ["numba", "python"], "bad_statuses": ["ERROR"]}]
    header, first, second = reports.validate_table(rows)
    assert "onnxruntime  numba" in first and "numpy        numba,python  ERROR" in second
    for word, cell in (("backend", "onnxruntime"), ("solver", "numba"), ("other", "-")):
        assert header.index(word) == first.index(cell, header.index("backend")), word


def test_render_board_numbers_the_columns() -> None:
    board = game.to_kaggle(*game.from_moves("44"), mark=1)
    lines = reports.render_board(board).splitlines()
    assert lines[-1] == "1 2 3 4 5 6 7"
    assert lines[-2] == ". . . X . . ." and lines[-3] == ". . . O . . ."


def test_the_paired_table_sums_the_sets_and_gives_each_rows_sign_tests() -> None:
    counts = {"Begin-Hard": {"n": 100, "only_a": 6, "only_b": 1, "both": 5},
              "End-Easy": {"n": 50, "only_a": 3, "only_b": 0, "both": 2}}
    lines = reports.paired_table("a.json:mcts800", "b.json:mcts800", counts)
    assert lines[2].split() == ["set", "n", "a", "wrong", "b", "wrong", "only", "a", "only", "b", "both", "p", "a",
                                "worse", "p", "b", "worse"]
    # 9 against 1: P(X >= 9) = 11 / 1024 that a is worse, P(X >= 1) = 1023 / 1024 that b is
    assert lines[5].split() == ["the", "sets", "150", "16", "8", "9", "1", "7", "0.0107", "0.999"]
    assert lines[4].split()[-2:] == ["0.125", "1"]  # 3 against 0
    assert len(reports.paired_table("a", "b", {"End-Easy": counts["End-Easy"]})) == 5  # one set: no sum
