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
