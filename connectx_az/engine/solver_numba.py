"""The exact solver compiled by numba, with the pure-Python ``solver.Solver`` as its fallback.

numba is imported inside ``compile_kernel`` alone, so where it is missing or fails ``make_solver``
hands back the pure-Python solver.  Positions and scores follow ``solver``'s conventions.

``CompiledSolver`` replaces only ``solver.Solver._negamax`` by ``_negamax_kernel``: the root logic
(immediate wins, the null-window probes of ``solve``, ``best_move``, ``move_scores``) is the same
Python code, so both solvers give the same scores.  The kernel is Pons' search on an explicit stack
(at most 42 frames) that stops at once when its node budget runs out; compiled code cannot read a
clock cheaply, so it runs in slices sized by the measured node rate to last about ``SLICE_SECONDS``,
Python checking the deadline between them (a stopped slice keeps its stored bounds).

Transposition table: ``uint64`` entries (a power of two) in buckets of two, each packing the key
(``position + mask``, 49 bits: a hit is exact), the bound's kind and score, and the log2 of the nodes
its subtree took.  Replacement as in Tromp's Fhourstones: the first slot keeps the costlier of two
entries, the other goes to the second slot, so a small table keeps its expensive proofs.  Keys are
mirror-symmetric (``min(key, mirror(key))``): a position and its reflection share an entry.
The measurements behind these choices: ``docs/agent.md``, *The figures behind the constants*."""

from __future__ import annotations

import hashlib
import marshal
import sys
import threading
import time
import types
from collections.abc import Callable

import numpy as np

from connectx_az.engine import game, solver

#: target seconds of one kernel slice between deadline checks
SLICE_SECONDS = 0.004
_MIN_SLICE_NODES = 2_000
_FIRST_RATE = 2_000_000.0  # nodes/s assumed before the first slice is timed
_NO_LIMIT = 1 << 62

# game's board constants as numpy scalars and arrays: numba compiles them in as constants
_COLS, _NUM_CELLS = game.COLS, game.NUM_CELLS
_H1 = game.ROWS + 1
_U = np.uint64
_ZERO = _U(0)
_ONE = _U(1)
_BOTTOM_MASK = _U(game.BOTTOM_MASK)
_BOARD_MASK = _U(game.BOARD_MASK)
_COLUMN_BITS = np.array(game.COLUMN_BITS, np.uint64)
_COL_ORDER = np.array(game.CENTRE_FIRST, np.int64)
_COL_0, _COL_1, _COL_2, _COL_3 = (_U(((1 << _H1) - 1) << (col * _H1)) for col in range(4))  # with sentinels
# shift counts as uint64: numba types a uint64 shifted by an int64 as a float
_S1, _S2, _S3, _S6, _S7, _S8 = _U(1), _U(2), _U(3), _U(6), _U(7), _U(8)
_S12, _S14, _S16, _S18, _S21, _S24, _S28, _S42 = _U(12), _U(14), _U(16), _U(18), _U(21), _U(24), _U(28), _U(42)

# Table entry: key in bits 0-48, lower-bound flag bit 49, score + 32 in bits 50-55, log2 work in 56-61.
# A filled entry is never 0 (the score field is at least 32 - 21).
_KEY_MASK = _U((1 << 49) - 1)
_LOWER_BIT = _U(1 << 49)
_SCORE_SHIFT = _U(50)
_WORK_SHIFT = _U(56)
_SIX_BITS = _U(63)
_HASH_MUL = _U(0x9E3779B97F4A7C15)  # Fibonacci hashing: the top bits of key * 2^64 / phi

# stats[] slots shared with the kernel
_NODES, _LIMIT, _STOPPED = 0, 1, 2


def _winning_cells(stones: np.uint64, mask: np.uint64) -> np.uint64:
    """Empty cells (possibly not yet playable) that would give ``stones`` four in a row.

    Twin of ``solver._winning_cells`` on numpy scalars (uint64 shift counts) for numba; tests/test_solver.py
    holds both to ``game.is_win``, cell by cell."""
    r = (stones << _S1) & (stones << _S2) & (stones << _S3)
    p = (stones << _S7) & (stones << _S14)
    r |= p & (stones << _S21)
    r |= p & (stones >> _S7)
    p = (stones >> _S7) & (stones >> _S14)
    r |= p & (stones << _S7)
    r |= p & (stones >> _S21)
    p = (stones << _S6) & (stones << _S12)
    r |= p & (stones << _S18)
    r |= p & (stones >> _S6)
    p = (stones >> _S6) & (stones >> _S12)
    r |= p & (stones << _S6)
    r |= p & (stones >> _S18)
    p = (stones << _S8) & (stones << _S16)
    r |= p & (stones << _S24)
    r |= p & (stones >> _S8)
    p = (stones >> _S8) & (stones >> _S16)
    r |= p & (stones << _S8)
    r |= p & (stones >> _S24)
    return r & (_BOARD_MASK ^ mask)


def _negamax_kernel(position: np.uint64, mask: np.uint64, plies: int, alpha: int, beta: int,
                    table: np.ndarray, stats: np.ndarray) -> int:
    """Fail-soft score bound within ``(alpha, beta)`` of a position whose side to move cannot win at once.

    ``solver.Solver._negamax`` on an explicit stack, frame ``d`` the position ``d`` plies below the root.
    ``table``: ``uint64[2^k]`` entries; ``stats``: ``int64[3]`` of nodes visited (updated), the node count
    at which to stop, and a flag set to 1 when it stopped (the returned score is then meaningless)."""
    num_bits = 0
    while (2 << num_bits) <= table.shape[0]:
        num_bits += 1
    hash_shift = _U(65 - num_bits)  # the top log2(num_slots / 2) bits of the hash pick a bucket of two slots
    depth_max = _NUM_CELLS - plies + 1
    pos_s = np.empty(depth_max, np.uint64)
    mask_s = np.empty(depth_max, np.uint64)
    key_s = np.empty(depth_max, np.uint64)
    alpha_s = np.empty(depth_max, np.int64)
    beta_s = np.empty(depth_max, np.int64)
    start_s = np.empty(depth_max, np.int64)  # node count on entry: the subtree's work
    num_moves_s = np.empty(depth_max, np.int64)
    next_s = np.empty(depth_max, np.int64)
    moves_s = np.empty(depth_max * _COLS, np.uint64)
    order = np.empty(_COLS, np.int64)

    nodes = stats[_NODES]
    limit = stats[_LIMIT]
    pos_s[0] = position
    mask_s[0] = mask
    alpha_s[0] = alpha
    beta_s[0] = beta
    d = 0
    value = 0
    entering = True
    while True:
        if entering:
            # ---- a node: solver.Solver._negamax's early exits, bounds and move order
            nodes += 1
            if nodes > limit:
                stats[_NODES] = nodes
                stats[_STOPPED] = 1
                return 0
            start_s[d] = nodes
            p = pos_s[d]
            m = mask_s[d]
            ply = plies + d
            a = alpha_s[d]
            b = beta_s[d]
            possible = (m + _BOTTOM_MASK) & _BOARD_MASK
            opponent_wins = _winning_cells(p ^ m, m)
            forced = possible & opponent_wins
            entering = False
            if forced != _ZERO:
                if forced & (forced - _ONE) != _ZERO:
                    value = -((_NUM_CELLS - ply) // 2)
                    continue
                possible = forced
            possible &= ~(opponent_wins >> _S1)
            if possible == _ZERO:
                value = -((_NUM_CELLS - ply) // 2)
                continue
            if ply >= _NUM_CELLS - 2:
                value = 0
                continue
            low = -((_NUM_CELLS - 2 - ply) // 2)
            if a < low:
                a = low
                if a >= b:
                    value = a
                    continue
            high = (_NUM_CELLS - 1 - ply) // 2
            # mirror-symmetric key: a position and its reflection share an entry
            key = p + m
            mirrored = (((key & _COL_0) << _S42) | ((key & _COL_1) << _S28) | ((key & _COL_2) << _S14)
                        | (key & _COL_3) | ((key >> _S14) & _COL_2) | ((key >> _S28) & _COL_1) | (key >> _S42))
            if mirrored < key:
                key = mirrored
            key_s[d] = key
            slot = int((key * _HASH_MUL) >> hash_shift) * 2
            for s in range(slot, slot + 2):
                entry = table[s]
                if entry & _KEY_MASK == key and entry != _ZERO:
                    bound = int((entry >> _SCORE_SHIFT) & _SIX_BITS) - 32
                    if entry & _LOWER_BIT != _ZERO:
                        if a < bound:
                            a = bound
                    elif bound < high:
                        high = bound
                    break
            if a >= b:
                value = a
                continue
            if b > high:
                b = high
                if a >= b:
                    value = b
                    continue
            alpha_s[d] = a
            beta_s[d] = b
            # moves ordered by the winning cells they create, then centre first (stable insertion sort)
            n = 0
            base = d * _COLS
            for rank in range(_COLS):
                move = possible & _COLUMN_BITS[_COL_ORDER[rank]]
                if move != _ZERO:
                    threats = _winning_cells(p | move, m)
                    count = 0
                    while threats != _ZERO:
                        threats &= threats - _ONE
                        count += 1
                    i = n
                    while i > 0 and order[i - 1] < count:
                        order[i] = order[i - 1]
                        moves_s[base + i] = moves_s[base + i - 1]
                        i -= 1
                    order[i] = count
                    moves_s[base + i] = move
                    n += 1
            num_moves_s[d] = n
            next_s[d] = 1
            pos_s[d + 1] = p ^ m
            mask_s[d + 1] = m | moves_s[base]
            alpha_s[d + 1] = -b
            beta_s[d + 1] = -a
            d += 1
            entering = True
            continue

        # ---- a child returned ``value`` (from its side): back in its parent, or done at the root
        if d == 0:
            stats[_NODES] = nodes
            return value
        d -= 1
        score = -value
        store = False
        lower = False
        if score >= beta_s[d]:
            store = True
            lower = True
            value = score
        else:
            if score > alpha_s[d]:
                alpha_s[d] = score
            i = next_s[d]
            if i < num_moves_s[d]:
                next_s[d] = i + 1
                pos_s[d + 1] = pos_s[d] ^ mask_s[d]
                mask_s[d + 1] = mask_s[d] | moves_s[d * _COLS + i]
                alpha_s[d + 1] = -beta_s[d]
                beta_s[d + 1] = -alpha_s[d]
                d += 1
                entering = True
                continue
            store = True
            lower = False
            value = alpha_s[d]
        if store:
            work = nodes - start_s[d]
            log_work = 0
            while work > 0:
                work >>= 1
                log_work += 1
            key = key_s[d]
            entry = key | (_U(value + 32) << _SCORE_SHIFT) | (_U(log_work) << _WORK_SHIFT)
            if lower:
                entry |= _LOWER_BIT
            slot = int((key * _HASH_MUL) >> hash_shift) * 2
            first = table[slot]
            if first & _KEY_MASK == key or first == _ZERO:
                table[slot] = entry
            elif table[slot + 1] & _KEY_MASK == key:
                table[slot + 1] = entry
            elif _U(log_work) >= (first >> _WORK_SHIFT):
                table[slot + 1] = first
                table[slot] = entry
            else:
                table[slot + 1] = entry


_SIGNATURE = "int64(uint64, uint64, int64, int64, int64, uint64[::1], int64[::1])"
_KERNEL: Callable | None = None
_KERNEL_ERROR: str | None = None
_COMPILE_LOCK = threading.Lock()
#: seconds the compile took in this process (``None`` until it ran)
compile_seconds: float | None = None

#: name of the module in ``sys.modules`` that keeps compiled kernels for the whole process
KERNEL_CACHE_MODULE = "connectx_az_kernels"
# The kernel's identity: its code, its helper's, and the board it was built for.  Two copies of this
# module (the package's, a submission's) share a compiled kernel only if these match.
_KERNEL_KEY = hashlib.sha256(marshal.dumps(
    (_negamax_kernel.__code__, _winning_cells.__code__, _SIGNATURE, game.ROWS, game.COLS))).hexdigest()


def _process_cache() -> dict:
    """Compiled kernels kept for the process by ``_KERNEL_KEY``, shared by every copy of this module: Kaggle executes
    ``submission.py`` again for every game (a fresh copy of this module), and a process compiles once."""
    cache = sys.modules.get(KERNEL_CACHE_MODULE)
    if cache is None:
        cache = sys.modules[KERNEL_CACHE_MODULE] = types.ModuleType(KERNEL_CACHE_MODULE)
    return cache.__dict__.setdefault("kernels", {})


def forget_compiled() -> None:
    """Drop the process's compiled kernels (any module copy made afterwards compiles again)."""
    sys.modules.pop(KERNEL_CACHE_MODULE, None)


def cached_kernel() -> Callable | None:
    """The compiled kernel if this module or an earlier copy in the process compiled it; never compiles."""
    global _KERNEL
    if _KERNEL is None:
        _KERNEL = _process_cache().get(_KERNEL_KEY)
    return _KERNEL


def compile_kernel() -> Callable | None:
    """The compiled ``_negamax_kernel``, compiled on the first call of the process; ``None`` if numba is
    missing or fails (``kernel_error()`` says why).  No cache on disk (Kaggle's file system is read-only);
    thread-safe."""
    global _KERNEL, _KERNEL_ERROR, compile_seconds
    with _COMPILE_LOCK:
        if cached_kernel() is not None or _KERNEL_ERROR is not None:
            return _KERNEL
        start = time.perf_counter()
        try:
            import numba

            helper = numba.njit("uint64(uint64, uint64)", cache=False, nogil=True)(_winning_cells)
            # numba resolves the kernel's globals when it compiles: give it a copy of this module's
            # globals where ``_winning_cells`` is the compiled helper (the module itself is unchanged)
            kernel_globals = {**_negamax_kernel.__globals__, "_winning_cells": helper}
            source = types.FunctionType(_negamax_kernel.__code__, kernel_globals, _negamax_kernel.__name__)
            kernel = numba.njit(_SIGNATURE, cache=False, nogil=True)(source)
        except Exception as exc:  # any compile failure means: play on in pure Python
            _KERNEL_ERROR = f"{type(exc).__name__}: {exc}"
            return None
        finally:
            compile_seconds = time.perf_counter() - start
        _KERNEL = _process_cache()[_KERNEL_KEY] = kernel
        return _KERNEL


def kernel_error() -> str | None:
    """Why the compile failed in this process (``None`` if it did not fail or did not run yet)."""
    return _KERNEL_ERROR


def compile_in_background() -> threading.Thread:
    """Start ``compile_kernel`` in a daemon thread and return it (``make_solver`` finds the result).  The compile
    holds the GIL nearly throughout: it overlaps only with time the main thread spends waiting."""
    thread = threading.Thread(target=compile_kernel, name="solver-compile", daemon=True)
    thread.start()
    return thread


class CompiledSolver(solver.Solver):
    """``solver.Solver`` whose inner search runs compiled: same methods, arguments and scores.

    ``kernel`` is what ``compile_kernel`` returns.  ``table_size`` is rounded down to a power of two (at
    least 4) of ``uint64`` entries; the default (2 MiB) fits a core's L2 cache.  ``deadline`` is honoured to
    within about ``SLICE_SECONDS``; ``nodes`` counts re-walks after a stopped slice too."""

    def __init__(self, kernel: Callable, *, table_size: int = 1 << 18) -> None:
        super().__init__(table_size=table_size)
        self._kernel = kernel
        self._entries = np.zeros(max(4, 1 << (table_size.bit_length() - 1)), np.uint64)
        self._stats = np.zeros(3, np.int64)
        self.rate = _FIRST_RATE  # nodes/s of the latest timed slice

    def clear(self) -> None:
        """Empty the transposition table."""
        self._entries[:] = 0

    def _negamax(self, position: int, mask: int, plies: int, alpha: int, beta: int) -> int:
        """``solver.Solver._negamax`` compiled, in slices; raises ``solver._OutOfBudget`` past a budget."""
        stats = self._stats
        while True:
            limit = _NO_LIMIT if self._node_limit is None else self._node_limit
            if self._deadline is not None:
                left = self._deadline - time.perf_counter()
                if left <= 0:
                    raise solver._OutOfBudget
                budget = max(_MIN_SLICE_NODES, int(self.rate * min(left, SLICE_SECONDS)))
                limit = min(limit, self.nodes + budget)
            stats[_NODES] = self.nodes
            stats[_LIMIT] = limit
            stats[_STOPPED] = 0
            start = time.perf_counter()
            score = self._kernel(_U(position), _U(mask), plies, alpha, beta, self._entries, stats)
            elapsed = time.perf_counter() - start
            visited = int(stats[_NODES]) - self.nodes
            self.nodes = int(stats[_NODES])
            if elapsed > 1e-3:
                self.rate = visited / elapsed
            if not stats[_STOPPED]:
                return int(score)
            if self._node_limit is not None and self.nodes > self._node_limit:
                raise solver._OutOfBudget


def make_solver(*, table_size: int | None = None, wait: bool = True) -> solver.Solver:
    """A ``CompiledSolver`` if numba compiles the kernel, else the pure-Python ``solver.Solver``.

    ``table_size``: entries of the table (``None``: each solver's own default).  The first call of the
    process compiles (``compile_seconds``; docs/results.md, *Speed*) unless ``compile_in_background`` did;
    with ``wait=False`` a compile running in another thread is not waited for (pure Python meanwhile)."""
    kernel = cached_kernel()
    if kernel is None and (wait or not _COMPILE_LOCK.locked()):
        kernel = compile_kernel()
    sizes = {} if table_size is None else {"table_size": table_size}
    if kernel is None:
        return solver.Solver(**sizes)
    return CompiledSolver(kernel, **sizes)
