"""Exact Connect Four solver: Pascal Pons' negamax on bitboards, on Python ints. Standard library only.

Positions are ``game``'s ``(position, mask)`` ints, ``position`` the stones of the **side to move**.
Every score is from the side to move, in Pons' convention: winning with one's own k-th stone scores
``22 - k`` (``(43 - plies) // 2`` for a win played at ply ``plies + 1``), ``0`` is a draw and a loss
is the negative of the opponent's win; weak mode returns only the sign.

As in Pons' tutorial (http://blog.gamesolver.org): alpha-beta with null-window probes, a
transposition table keyed by ``position + mask`` holding upper or lower bounds, moves ordered by the
winning cells they create then centre-first, and no move that lets the opponent win at once.  The
table persists across calls: its bounds are facts about positions, not about one search."""

from __future__ import annotations

import time

from connectx_az.engine import game

_ROWS, _COLS, _NUM_CELLS = game.ROWS, game.COLS, game.NUM_CELLS
_BOTTOM_BITS, _TOP_BITS, _COLUMN_BITS = game.BOTTOM_BITS, game.TOP_BITS, game.COLUMN_BITS
_BOTTOM_MASK, _BOARD_MASK = game.BOTTOM_MASK, game.BOARD_MASK
_COL_ORDER = game.CENTRE_FIRST
_is_win = game.is_win

# Sort keys pack (threats, centrality, move) into one int so that a plain int sort orders moves.
_MOVE_BITS = 49
_MOVE_MASK = (1 << _MOVE_BITS) - 1
_ORDER_KEYS = tuple((_COLUMN_BITS[col], (_COLS - rank) << _MOVE_BITS) for rank, col in enumerate(_COL_ORDER))
_CHECK_EVERY = 4096  # nodes between deadline checks: perf_counter() is not free


class _OutOfBudget(Exception):
    """Raised inside the search when the deadline or node budget runs out."""


def _winning_cells(stones: int, mask: int) -> int:
    """Empty cells (possibly not yet playable) that would give ``stones`` four in a row.

    Twin of ``solver_numba._winning_cells`` (numba needs uint64 shift counts); tests/test_solver.py holds
    both to ``game.is_win``, cell by cell."""
    # Unrolled (hot path): vertical, then for horizontal (shift 7) and the diagonals (6, 8) the cell
    # completing a line from either end or from a gap.
    r = (stones << 1) & (stones << 2) & (stones << 3)
    p = (stones << 7) & (stones << 14)
    r |= p & (stones << 21)
    r |= p & (stones >> 7)
    p = (stones >> 7) & (stones >> 14)
    r |= p & (stones << 7)
    r |= p & (stones >> 21)
    p = (stones << 6) & (stones << 12)
    r |= p & (stones << 18)
    r |= p & (stones >> 6)
    p = (stones >> 6) & (stones >> 12)
    r |= p & (stones << 6)
    r |= p & (stones >> 18)
    p = (stones << 8) & (stones << 16)
    r |= p & (stones << 24)
    r |= p & (stones >> 8)
    p = (stones >> 8) & (stones >> 16)
    r |= p & (stones << 8)
    r |= p & (stones >> 24)
    return r & (_BOARD_MASK ^ mask)


def _can_win_next(position: int, mask: int) -> bool:
    """True when the side to move has a winning move now."""
    return bool(_winning_cells(position, mask) & (mask + _BOTTOM_MASK) & _BOARD_MASK)


def _num_plies(position: int, mask: int) -> int:
    """Stones on the board; raises ``ValueError`` for a malformed or finished position."""
    if mask & ~_BOARD_MASK or position & ~mask or (mask + _BOTTOM_MASK) & mask:
        raise ValueError("not a valid position: stray bits or floating stones")
    plies = mask.bit_count()
    if position.bit_count() != plies // 2:
        raise ValueError(f"{position.bit_count()} stones for the side to move after {plies} plies")
    if _is_win(position ^ mask) or _is_win(position):
        raise ValueError("the game is already over (four in a row)")
    if plies == _NUM_CELLS:
        raise ValueError("the game is already over (board full)")
    return plies


def _root_order(position: int, mask: int) -> list[int]:
    """The legal columns, wins now first, then in ``_negamax``'s move order (inlined there: the hot loop).
    ``best_move`` probes the root's columns in this order, so the column that proved the score comes first."""
    keys = []
    for rank, col in enumerate(_COL_ORDER):
        if mask & _TOP_BITS[col]:
            continue
        stones = position | ((mask + _BOTTOM_BITS[col]) & _COLUMN_BITS[col])
        keys.append((_is_win(stones), _winning_cells(stones, mask).bit_count(), -rank, col))
    return [key[-1] for key in sorted(keys, reverse=True)]


def _sign(x: int) -> int:
    return (x > 0) - (x < 0)


class Solver:
    """Perfect-play Connect Four solver with a persistent transposition table.

    ``nodes`` counts the positions visited by the latest public call.  Every public method takes
    ``(position, mask)`` from the side to move, raises ``ValueError`` if it is malformed or the game is
    over, and returns ``None`` if the ``deadline`` (``time.perf_counter()``) passes or ``max_nodes``
    positions are visited first."""

    def __init__(self, *, table_size: int = 1 << 20) -> None:
        """``table_size`` caps the transposition table; it is emptied when full."""
        if table_size < 1:
            raise ValueError(f"table_size must be positive, got {table_size}")
        self.table_size = table_size
        self.nodes = 0
        # key -> score << 1 | is_lower_bound; a stored score is an upper bound unless flagged
        self._table: dict[int, int] = {}
        self._next_check = 0
        self._deadline: float | None = None
        self._node_limit: int | None = None

    def clear(self) -> None:
        """Empty the transposition table."""
        self._table.clear()

    def solve(self, position: int, mask: int, *, weak: bool = False, deadline: float | None = None,
              max_nodes: int | None = None) -> int | None:
        """Exact Pons score of the position for the side to move (its sign only if ``weak``)."""
        plies = _num_plies(position, mask)
        self._start(deadline, max_nodes)
        try:
            return self._solve(position, mask, plies, weak)
        except _OutOfBudget:
            return None

    def move_scores(self, position: int, mask: int, *, weak: bool = False, deadline: float | None = None,
                    max_nodes: int | None = None) -> list[int | None] | None:
        """Score of playing each of the 7 columns (``None`` for a full column), side to move; ``weak``: signs."""
        plies = _num_plies(position, mask)
        self._start(deadline, max_nodes)
        scores: list[int | None] = []
        try:
            for col in range(_COLS):
                if mask & _TOP_BITS[col]:
                    scores.append(None)
                    continue
                move = (mask + _BOTTOM_BITS[col]) & _COLUMN_BITS[col]
                if _is_win(position | move):
                    scores.append(1 if weak else (_NUM_CELLS + 1 - plies) // 2)
                elif plies + 1 == _NUM_CELLS:
                    scores.append(0)
                else:
                    scores.append(-self._solve(position ^ mask, mask | move, plies + 1, weak))
        except _OutOfBudget:
            return None
        return scores

    def best_move(self, position: int, mask: int, *, weak: bool = False, deadline: float | None = None,
                  max_nodes: int | None = None) -> tuple[int, int] | None:
        """``(col, score)``: a 0-based column reaching the position's exact score, and that score.

        With ``weak`` the score is its sign (-1/0/+1) and the column one that keeps that result.  A win
        now is played at once; otherwise the first column in ``_root_order`` that reaches the score (found
        again from the table, not re-proven)."""
        plies = _num_plies(position, mask)
        self._start(deadline, max_nodes)
        try:
            score = self._solve(position, mask, plies, weak)
            order = _root_order(position, mask)
            if weak and score < 0:  # every move loses: which one is not asked in weak mode
                return order[0], score
            for col in order:
                move = (mask + _BOTTOM_BITS[col]) & _COLUMN_BITS[col]
                if _is_win(position | move) or plies + 1 == _NUM_CELLS:
                    return col, score  # a win now is the best score; a last move is the only one
                child, child_mask = position ^ mask, mask | move
                if _can_win_next(child, child_mask):
                    if not weak and -((_NUM_CELLS - plies) // 2) == score:
                        return col, score
                    continue
                # null window: does this move reach `score` (child's score <= -score)?  In weak
                # mode a win is any score >= 1, so "child <= -1" is the same probe.
                if self._negamax(child, child_mask, plies + 1, -score, 1 - score) <= -score:
                    return col, score
        except _OutOfBudget:
            return None
        raise AssertionError("no move reaches the solved score")  # unreachable for a valid table

    def _start(self, deadline: float | None, max_nodes: int | None) -> None:
        self.nodes = 0
        self._deadline = deadline
        self._node_limit = max_nodes
        self._next_check = 0  # the first node checks the limits and sets the next check

    def _check_budget(self) -> None:
        """Called every few thousand nodes: enforce limits and the table's size cap."""
        if self._node_limit is not None and self.nodes > self._node_limit:
            raise _OutOfBudget
        if self._deadline is not None and time.perf_counter() >= self._deadline:
            raise _OutOfBudget
        if len(self._table) > self.table_size:
            self._table.clear()
        self._next_check = self.nodes + _CHECK_EVERY
        if self._node_limit is not None:
            self._next_check = min(self._next_check, self._node_limit + 1)

    def _solve(self, position: int, mask: int, plies: int, weak: bool) -> int:
        """Score of a valid, unfinished position by null-window probes (Pons' ``solve``)."""
        if _can_win_next(position, mask):
            return 1 if weak else (_NUM_CELLS + 1 - plies) // 2
        if weak:
            low, high = -1, 1
        else:
            low, high = -((_NUM_CELLS - plies) // 2), (_NUM_CELLS + 1 - plies) // 2
        while low < high:
            # probe near zero first: wins and losses by a small margin are the common case
            med = low + (high - low) // 2
            if med <= 0 and -(-low // 2) < med:
                med = -(-low // 2)  # low / 2 rounded toward zero, as in Pons' C++
            elif med >= 0 and high // 2 > med:
                med = high // 2
            result = self._negamax(position, mask, plies, med, med + 1)
            if result <= med:
                high = result
            else:
                low = result
        return _sign(low) if weak else low

    def _negamax(self, position: int, mask: int, plies: int, alpha: int, beta: int) -> int:
        """Fail-soft score bound within ``(alpha, beta)``; the side to move cannot win at once."""
        self.nodes += 1
        if self.nodes >= self._next_check:
            self._check_budget()
        opponent = position ^ mask
        possible = (mask + _BOTTOM_MASK) & _BOARD_MASK
        opponent_wins = _winning_cells(opponent, mask)
        forced = possible & opponent_wins
        if forced:
            if forced & (forced - 1):  # two threats to block: lost next move
                return -((_NUM_CELLS - plies) // 2)
            possible = forced
        possible &= ~(opponent_wins >> 1)  # never play just below an opponent's winning cell
        if not possible:
            return -((_NUM_CELLS - plies) // 2)
        if plies >= _NUM_CELLS - 2:  # neither side can still win
            return 0

        low = -((_NUM_CELLS - 2 - plies) // 2)  # we cannot lose before our opponent's next move
        if alpha < low:
            alpha = low
            if alpha >= beta:
                return alpha
        high = (_NUM_CELLS - 1 - plies) // 2  # nor win with our next stone
        key = position + mask
        entry = self._table.get(key)
        if entry is not None:
            if entry & 1:
                if alpha < entry >> 1:
                    alpha = entry >> 1
                    if alpha >= beta:
                        return alpha
            elif entry >> 1 < high:
                high = entry >> 1
        if beta > high:
            beta = high
            if alpha >= beta:
                return beta

        moves = []
        for col_bits, centrality in _ORDER_KEYS:
            move = possible & col_bits
            if move:
                threats = _winning_cells(position | move, mask).bit_count()
                moves.append((threats << (_MOVE_BITS + 3)) | centrality | move)
        moves.sort(reverse=True)
        for key_move in moves:
            score = -self._negamax(opponent, mask | (key_move & _MOVE_MASK), plies + 1, -beta, -alpha)
            if score >= beta:
                self._table[key] = score << 1 | 1
                return score
            if score > alpha:
                alpha = score
        self._table[key] = alpha << 1
        return alpha
