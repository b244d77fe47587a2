"""The agent's safety net: reading observations that may be malformed, and ``simple_move``.  Standard library only.

Nothing here assumes a well-formed 6x7 board: ``simple_move`` works on Kaggle's raw board of any size."""

from __future__ import annotations

import math
import numbers

#: Kaggle's ConnectX defaults (``game.COLS``, ``game.INAROW``; this module imports nothing of the package)
_COLUMNS = 7
_INAROW = 4


def read_field(obj, name: str, default=None):
    """``obj[name]`` for mappings (Kaggle's Struct is a dict), else ``obj.name``; ``default`` if absent."""
    try:
        if isinstance(obj, dict):
            return obj.get(name, default)
        return getattr(obj, name, default)
    except Exception:
        return default


def as_float(value, default: float) -> float:
    """``value`` as a finite float (Python or numpy int or float), else ``default``; bools are not numbers here."""
    is_numpy_number = isinstance(value, numbers.Real) and type(value).__module__ == "numpy"
    if isinstance(value, bool) or not (isinstance(value, (int, float)) or is_numpy_number):
        return default
    value = float(value)
    return value if math.isfinite(value) else default


def as_int(value, default: int) -> int:
    """``value`` as an int when it is a whole finite number, else ``default``."""
    number = as_float(value, math.nan)
    return int(number) if math.isfinite(number) and number == int(number) else default


def board_cells(board) -> list[int] | None:
    """The board as a list of ints; cells that are not whole numbers become -1 (occupied, unknown).

    Anything with ``reshape`` and ``tolist`` (numpy, not imported) is flattened first; anything else but a
    list or tuple gives None."""
    if not isinstance(board, (list, tuple)) and hasattr(board, "reshape") and hasattr(board, "tolist"):
        board = board.reshape(-1).tolist()
    if not isinstance(board, (list, tuple)):
        return None
    return [as_int(v, -1) for v in board]


def _landing_row(cells: list[int], rows: int, cols: int, col: int) -> int:
    for row in range(rows - 1, -1, -1):
        if cells[row * cols + col] == 0:
            return row
    return -1


def _completes_line(cells: list[int], rows: int, cols: int, inarow: int, row: int, col: int, who: int) -> bool:
    """Would a stone of ``who`` at ``(row, col)`` make ``inarow`` in a line?"""
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        count = 1
        for sign in (1, -1):
            r, c = row + sign * dr, col + sign * dc
            while 0 <= r < rows and 0 <= c < cols and cells[r * cols + c] == who:
                count += 1
                r, c = r + sign * dr, c + sign * dc
        if count >= inarow:
            return True
    return False


def simple_move(board, columns: int = _COLUMNS, inarow: int = _INAROW, mark: int = 0) -> int:
    """Win now, else block, else the most central column that does not hand over a win.

    Works on the raw board of any size; guesses ``columns`` from its length when the value given does not
    divide it, and the side to move from the stone counts when ``mark`` is not 1 or 2.  With no legal
    column it returns the centre column."""
    cells = board_cells(board) or []
    n = len(cells)
    if not (isinstance(columns, int) and 0 < columns and n and n % columns == 0):
        columns = _COLUMNS if n and n % _COLUMNS == 0 else max(n, 1)
    rows = n // columns
    inarow = inarow if isinstance(inarow, int) and inarow > 0 else _INAROW
    legal = [c for c in range(columns) if c < n and cells[c] == 0]
    if not legal:
        return int(columns // 2)
    if mark not in (1, 2):
        mark = 1 if cells.count(1) <= cells.count(2) else 2
    other = 3 - mark
    landing = {c: _landing_row(cells, rows, columns, c) for c in legal}
    for who in (mark, other):
        for c in legal:
            if _completes_line(cells, rows, columns, inarow, landing[c], c, who):
                return int(c)
    safe = [c for c in legal
            if landing[c] < 1 or not _completes_line(cells, rows, columns, inarow, landing[c] - 1, c, other)]
    return int(min(safe or legal, key=lambda c: (abs(2 * c - (columns - 1)), c)))


def is_legal_move(move, board, columns) -> bool:
    """True when ``move`` is a plain int naming an open column of the raw ``board``."""
    cells = board_cells(board)
    return (type(move) is int and cells is not None and 0 <= move < min(len(cells), columns)
            and cells[move] == 0)
