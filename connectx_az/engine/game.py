"""Connect Four rules on bitboards (6 rows x 7 columns, four in a row). numpy only.

A position is a pair of integers ``(position, mask)``:

* ``mask``     has a bit set for every stone on the board;
* ``position`` has a bit set for every stone of the **side to move**.

Bit ``col * 7 + row`` is the cell in column ``col`` (0 = left) and row ``row``
(0 = bottom).  Each column owns seven bits; the seventh is a sentinel that stays
empty so that shifts never carry a line from one column into the next::

      col:  0  1  2  3  4  5  6
           .  .  .  .  .  .  .     sentinel row (bits 6, 13, ... 48)
    row 5  5 12 19 26 33 40 47
    row 4  4 11 18 25 32 39 46
    row 3  3 10 17 24 31 38 45
    row 2  2  9 16 23 30 37 44
    row 1  1  8 15 22 29 36 43
    row 0  0  7 14 21 28 35 42     (bottom)

Every function works on Python ``int`` and, elementwise, on numpy ``uint64`` arrays of any shape.
Positions are seen from the side to move: ``play`` returns the *opponent's* stones as the new
``position``.  ``encode`` gives ``uint8[..., 2, 6, 7]``: plane 0 the side to move, plane 1 the
opponent, row 0 the **top** row, as in Kaggle's board.  ``outcome`` is ``-1``/``0`` for the side to
move, or ``None`` while the game goes on; ``0`` always means a draw, never "not over"."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ROWS = 6
COLS = 7
INAROW = 4
NUM_CELLS = ROWS * COLS
NUM_ACTIONS = COLS
_H1 = ROWS + 1  # bits per column, sentinel included

#: bit of the bottom cell of each column
BOTTOM_BITS = tuple(1 << (col * _H1) for col in range(COLS))
#: bit of the top cell of each column
TOP_BITS = tuple(1 << (ROWS - 1 + col * _H1) for col in range(COLS))
#: all cells of each column
COLUMN_BITS = tuple(((1 << ROWS) - 1) << (col * _H1) for col in range(COLS))
BOTTOM_MASK = sum(BOTTOM_BITS)
BOARD_MASK = BOTTOM_MASK * ((1 << ROWS) - 1)
#: columns from the centre out (ties to the left): central cells take part in more lines
CENTRE_FIRST = (3, 2, 4, 1, 5, 0, 6)

# Bit index of each cell laid out as [row_from_top, col]: used by encode/decode.
_CELL_BIT = np.array([[col * _H1 + (ROWS - 1 - row) for col in range(COLS)] for row in range(ROWS)], dtype=np.uint64)
_TOP_BITS_U64 = np.array(TOP_BITS, dtype=np.uint64)
_BOTTOM_BITS_U64 = np.array(BOTTOM_BITS, dtype=np.uint64)


def initial() -> tuple[int, int]:
    """The empty board as ``(position, mask)``."""
    return 0, 0


def _u64(x):
    """Numpy arrays become uint64; Python ints stay exact ints."""
    return x if isinstance(x, int) else np.asarray(x, dtype=np.uint64)


def is_legal(mask, col: int):
    """True where column ``col`` still has room (int or bool array)."""
    return (mask & TOP_BITS[col]) == 0


def legal_mask(mask) -> np.ndarray:
    """``bool[..., 7]``: which columns can be played."""
    mask = np.asarray(mask, dtype=np.uint64)
    return (mask[..., None] & _TOP_BITS_U64) == 0


def legal_cols(mask: int) -> list[int]:
    """Playable columns of one position, left to right."""
    return [col for col in range(COLS) if (mask & TOP_BITS[col]) == 0]


def play(position, mask, col):
    """Drop a stone for the side to move in ``col`` (int or array, legal); returns the next ``(position, mask)``."""
    if isinstance(mask, int):
        return position ^ mask, mask | (mask + BOTTOM_BITS[col])
    mask = np.asarray(mask, dtype=np.uint64)
    bottom = _BOTTOM_BITS_U64[np.asarray(col, dtype=np.intp)]
    return np.asarray(position, dtype=np.uint64) ^ mask, mask | (mask + bottom)


def is_win(stones):
    """True where ``stones`` hold four in a row (int or bool array): the rule, for the search and the solver alike.

    A line steps 1 bit (vertical), 6 (/), 7 (horizontal) or 8 (\\); unrolled: the pure-Python solver's hot path."""
    stones = _u64(stones)
    vertical = stones & (stones >> 1)
    rising = stones & (stones >> 6)
    horizontal = stones & (stones >> 7)
    falling = stones & (stones >> 8)
    return ((vertical & (vertical >> 2)) | (rising & (rising >> 12)) | (horizontal & (horizontal >> 14))
            | (falling & (falling >> 16))) != 0


def mover_stones(position, mask):
    """Stones of the player who made the last move (the side *not* to move)."""
    return position ^ mask


def is_full(mask):
    """True where the board has no empty cell."""
    return mask == BOARD_MASK


def outcome(position: int, mask: int) -> int | None:
    """Result for the side to move: ``-1`` lost, ``0`` drawn, ``None`` not over (it never has already won)."""
    if is_win(mover_stones(position, mask)):
        return -1
    if is_full(mask):
        return 0
    return None


def num_stones(mask) -> int:
    """Number of stones on the board (the ply)."""
    return int(mask).bit_count()


def wins_now(position: int, mask: int, col: int) -> bool:
    """True when the side to move wins at once by playing ``col`` (a legal column)."""
    return bool(is_win(position | (mask + BOTTOM_BITS[col]) & COLUMN_BITS[col]))


def winning_cols(position: int, mask: int) -> list[int]:
    """Columns where the side to move wins at once."""
    return [c for c in legal_cols(mask) if wins_now(position, mask, c)]


def forced_move(position: int, mask: int) -> tuple[int, str] | None:
    """``(col, reason)`` of the move the agent plays without its book or a search, else ``None``.

    In order: the only legal column (``"only move"``), the most central win now (``"win now"``), the
    block of the opponent's single threat (``"block"``); against two threats nothing is forced.  The
    game must not be over.  The agent and ``tools.book_build`` share this rule."""
    legal = legal_cols(mask)
    if len(legal) == 1:
        return legal[0], "only move"
    wins = winning_cols(position, mask)
    if wins:
        return next(c for c in CENTRE_FIRST if c in wins), "win now"
    threats = winning_cols(position ^ mask, mask)
    return (threats[0], "block") if len(threats) == 1 else None


def encode(position, mask) -> np.ndarray:
    """``uint8[..., 2, 6, 7]`` planes (side to move, opponent), row 0 at the top."""
    position = np.asarray(position, dtype=np.uint64)
    mask = np.asarray(mask, dtype=np.uint64)
    own = (position[..., None, None] >> _CELL_BIT) & np.uint64(1)
    opp = ((position ^ mask)[..., None, None] >> _CELL_BIT) & np.uint64(1)
    return np.stack([own, opp], axis=-3).astype(np.uint8)


def decode(planes: np.ndarray) -> tuple[int, int] | tuple[np.ndarray, np.ndarray]:
    """Inverse of ``encode``: ``(position, mask)``, ints for one position ``uint8[2, 6, 7]``, ``uint64[...]``
    arrays for ``uint8[..., 2, 6, 7]``."""
    planes = np.asarray(planes)
    bits = np.uint64(1) << _CELL_BIT
    position = np.bitwise_or.reduce(np.where(planes[..., 0, :, :] != 0, bits, np.uint64(0)), axis=(-2, -1))
    opponent = np.bitwise_or.reduce(np.where(planes[..., 1, :, :] != 0, bits, np.uint64(0)), axis=(-2, -1))
    if planes.ndim == 3:
        return int(position), int(position | opponent)
    return position, position | opponent


def mirror(position, mask):
    """Reflect a position left to right (column ``c`` becomes ``6 - c``)."""
    if isinstance(mask, int):
        out_p, out_m = mirror(np.uint64(position), np.uint64(mask))
        return int(out_p), int(out_m)
    position = np.asarray(position, dtype=np.uint64)
    mask = np.asarray(mask, dtype=np.uint64)
    out_p = np.zeros_like(position)
    out_m = np.zeros_like(mask)
    for col in range(COLS):
        shift = (COLS - 1 - 2 * col) * _H1
        col_bits = np.uint64(COLUMN_BITS[col])
        if shift >= 0:
            out_p |= (position & col_bits) << np.uint64(shift)
            out_m |= (mask & col_bits) << np.uint64(shift)
        else:
            out_p |= (position & col_bits) >> np.uint64(-shift)
            out_m |= (mask & col_bits) >> np.uint64(-shift)
    return out_p, out_m


def from_moves(moves: str | Sequence[int], *, one_based: bool = True) -> tuple[int, int]:
    """Position after a sequence of columns (Pons' ``"4453"`` is 1-based); ``ValueError`` on an illegal move."""
    cols = [int(ch) for ch in moves] if isinstance(moves, str) else [int(c) for c in moves]
    position, mask = initial()
    for i, col in enumerate(cols):
        c = col - 1 if one_based else col
        if not 0 <= c < COLS:
            raise ValueError(f"move {i}: column {col} is out of range")
        if not is_legal(mask, c):
            raise ValueError(f"move {i}: column {col} is full")
        if outcome(position, mask) is not None:
            raise ValueError(f"move {i}: the game is already over")
        position, mask = play(position, mask, c)
    return position, mask


def from_kaggle(board: Sequence[int], mark: int) -> tuple[int, int]:
    """``(position, mask)`` from Kaggle's observation, seen from player ``mark``.

    ``board``: 42 cells, row 0 at the top, 0 empty, 1/2 the marks.  ``ValueError`` (with the reason) for a
    wrong size or cell value, floating stones, impossible counts, a ``mark`` not to move, or a won board."""
    cells = list(board)
    if len(cells) != NUM_CELLS:
        raise ValueError(f"board has {len(cells)} cells, expected {NUM_CELLS} (6 rows x 7 columns)")
    if mark not in (1, 2):
        raise ValueError(f"mark must be 1 or 2, got {mark!r}")
    own = opp = 0
    counts = {1: 0, 2: 0}
    for index, value in enumerate(cells):
        if value not in (0, 1, 2):
            raise ValueError(f"cell {index} holds {value!r}; cells must be 0, 1 or 2")
        if value == 0:
            continue
        row, col = divmod(index, COLS)
        if row + 1 < ROWS and cells[index + COLS] == 0:
            raise ValueError(f"stone at row {row}, column {col} floats above an empty cell")
        counts[value] += 1
        bit = 1 << (col * _H1 + ROWS - 1 - row)
        if value == mark:
            own |= bit
        else:
            opp |= bit
    if counts[1] - counts[2] not in (0, 1):
        raise ValueError(f"impossible stone counts: {counts[1]} of player 1, {counts[2]} of player 2")
    to_move = 1 if counts[1] == counts[2] else 2
    if mark != to_move:
        raise ValueError(f"mark {mark} is not the side to move (player {to_move} is)")
    if is_win(own):
        raise ValueError(f"player {mark} already has four in a row but is to move: impossible board")
    return own, own | opp


def to_kaggle(position: int, mask: int, mark: int) -> list[int]:
    """Kaggle's 42-cell board for a position whose side to move is ``mark``."""
    other = 3 - mark
    board = [0] * NUM_CELLS
    for row in range(ROWS):
        for col in range(COLS):
            bit = 1 << (col * _H1 + ROWS - 1 - row)
            if mask & bit:
                board[row * COLS + col] = mark if position & bit else other
    return board


def to_ascii(position: int, mask: int) -> str:
    """Board drawing, top row first: ``x`` side to move, ``o`` opponent, ``.`` empty."""
    lines = []
    for row in range(ROWS - 1, -1, -1):
        line = ""
        for col in range(COLS):
            bit = 1 << (col * _H1 + row)
            line += "." if not mask & bit else ("x" if position & bit else "o")
        lines.append(line)
    return "\n".join(lines)


def from_ascii(text: str) -> tuple[int, int]:
    """Parse ``to_ascii``'s drawing (``x`` = side to move); blank lines and spaces ignored."""
    rows = [line.replace(" ", "") for line in text.strip().splitlines() if line.strip()]
    if len(rows) != ROWS or any(len(r) != COLS for r in rows):
        raise ValueError(f"expected {ROWS} rows of {COLS} cells")
    position = mask = 0
    for i, line in enumerate(rows):
        row = ROWS - 1 - i
        for col, ch in enumerate(line):
            bit = 1 << (col * _H1 + row)
            if ch in "xX":
                position |= bit
                mask |= bit
            elif ch in "oO":
                mask |= bit
            elif ch != ".":
                raise ValueError(f"unknown cell {ch!r}")
    return position, mask
