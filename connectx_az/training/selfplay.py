"""Self-play: many games in flight, one batched network call per simulation step.

The moves of all games in flight are searched together in one ``search_tree.Tree`` of ``B`` roots; finished
games are replaced until the quota is started (``workers`` spreads this over processes).  Every move is
searched with the full budget and recorded: the root visit distribution as policy target, the game's result
as value target, both from the side to move.

Openings: a game draws its moves from the root visits at ``temperature_early`` for its first
``temperature_plies`` board plies, then plays the most visited move.  A share starts from a random prefix
(``random_prefix``), a share from a position searched earlier in the call, or given as a source (the previous
generation's, ``SelfPlayConfig.fork_previous``), plus one random move (``fork_position``; KataGo's forking,
Wu 2019); those plies are neither searched nor recorded."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from connectx_az.engine import game, jit, mcts, search_tree
from connectx_az.training.config import MAX_PREFIX_PLIES, SelfPlayConfig


@dataclass(frozen=True)
class GameRecord:
    """One game: the training targets of each of its moves, and its statistics.

    ``obs uint8[T,2,6,7]`` (side to move first), ``policy float32[T,7]`` (root visits), ``value float32[T]``
    (the game's result: +1 win, 0 draw, -1 loss) and ``root_value float32[T]`` (search value), all from the
    side to move.  ``obs[t]`` is at ply ``start_ply + t``; ``opening`` is ``"empty"``, ``"prefix"`` or
    ``"fork"``.  ``num_leaves``, ``leaf_depth_sum``: the nodes its searches added, and their summed depths."""

    obs: np.ndarray
    policy: np.ndarray
    value: np.ndarray
    root_value: np.ndarray
    start_ply: int = 0
    opening: str = "empty"
    num_leaves: int = 0
    leaf_depth_sum: int = 0

    @property
    def num_plies(self) -> int:
        """The game's length: the stones on the board at its end."""
        return self.start_ply + len(self.value)

    @property
    def first_player_result(self) -> int:
        """The game's result for the player who moved first: +1, 0 or -1 (a game has at least one move)."""
        return int(self.value[0]) * (1 if self.start_ply % 2 == 0 else -1)


@dataclass(frozen=True)
class SelfPlayStats:
    """A batch of games' statistics: ``mean_leaf_depth`` in plies below the root, ``prefix_rate``/``fork_rate``
    the shares of those starts, ``mean_start_ply`` the stones at the first search; ``num_evaluations`` the
    positions the searches asked for, ``num_network_evaluations`` those the network scored (fewer: the cache)."""

    num_games: int
    num_positions: int
    num_evaluations: int
    mean_length: float
    first_player_win_rate: float
    draw_rate: float
    mean_leaf_depth: float = 0.0
    prefix_rate: float = 0.0
    fork_rate: float = 0.0
    mean_start_ply: float = 0.0
    num_network_evaluations: int = 0


# each cell's bit in the solver's bitboard (column c: bits 7c, bottom, to 7c + 5), twice for the side to move's
# plane; float64 holds every sum exactly (keys < 2 ** 51), so the key is one BLAS product
_KEY_WEIGHTS = np.array([[1 << ((game.ROWS + 1) * col + game.ROWS - 1 - row) for col in range(game.COLS)]
                         for row in range(game.ROWS)], np.float64).reshape(-1)
_KEY_WEIGHTS = np.concatenate([2 * _KEY_WEIGHTS, _KEY_WEIGHTS])


def position_keys(obs: np.ndarray) -> np.ndarray:
    """``uint64[M]``: the solver's key ``position + mask + game.BOTTOM_MASK`` of each of ``obs uint8[M,2,6,7]``,
    distinct for distinct positions."""
    planes = np.asarray(obs, np.uint8).reshape(len(obs), 2 * game.NUM_CELLS).astype(np.float64)
    return (planes @ _KEY_WEIGHTS).astype(np.uint64) + np.uint64(game.BOTTOM_MASK)


_HASH = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the key times 2^64 / golden ratio, its top bits
_ONE = np.uint64(1)


def _lookup(keys, table_keys, table_rows, shift, next_row, rows, first) -> int:
    """Look up position keys ``keys uint64[M]`` in the table, adding the new ones; returns how many are new.

    ``rows[i]`` is key ``i``'s row; new keys get rows ``next_row``, ``next_row + 1``, ... in order of first
    appearance, ``first`` their index in ``keys``.  A key is never 0 (the empty slot).  The table has ``2 **
    (64 - shift)`` slots (``table_keys``, ``table_rows``); the caller keeps it at most half full."""
    last = np.uint64(table_keys.shape[0] - 1)
    num_new = 0
    for i in range(keys.shape[0]):
        key = keys[i]
        slot = (key * _HASH) >> shift
        while True:
            held = table_keys[slot]
            if held == key:
                rows[i] = table_rows[slot]
                break
            if held == 0:
                table_keys[slot] = key
                table_rows[slot] = next_row + num_new
                rows[i] = next_row + num_new
                first[num_new] = i
                num_new += 1
                break
            slot = (slot + _ONE) & last
    return num_new


def _warm_up(compiled) -> None:
    """Run the compiled lookup once: numba compiles it now."""
    one = np.ones(1, np.uint64)
    compiled._lookup(one, np.zeros(4, np.uint64), np.zeros(4, np.int64), np.uint64(62), 0, np.zeros(1, np.int64),
                     np.zeros(1, np.int64))


_COMPILER = jit.Compiler("selfplay", (_lookup,), warm_up=_warm_up)


class CachedEvaluator:
    """An evaluator with a memory: each position's answer is computed once, for one network's weights.

    Positions not yet seen go to ``inner`` in one call, each once, in order of first appearance; the rest are
    answered from memory, an open-addressing hash table of position keys (``_lookup``, compiled where
    ``play_games`` compiled it).  A call that could take it past ``max_positions`` empties it first.  A new
    object for each set of weights.  It pays where the network's cost grows with the batch (a CPU;
    docs/history.md, 2026-11-27)."""

    def __init__(self, inner: search_tree.Evaluator, max_positions: int = 1 << 20) -> None:
        if max_positions < 1:
            raise ValueError("max_positions must be >= 1")
        self.inner = inner
        self.max_positions = max_positions
        self.num_evaluations = 0
        self.num_network_evaluations = 0
        self._logits = np.empty((0, game.NUM_ACTIONS), np.float32)
        self._value = np.empty(0, np.float32)
        self._size = 0  # positions in the table
        self._keys, self._rows = np.zeros(1 << 12, np.uint64), np.zeros(1 << 12, np.int64)

    @property
    def num_positions(self) -> int:
        """The positions held (a property, not ``len``: an empty memory must not read as false)."""
        return self._size

    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``obs uint8[M,2,6,7]`` -> ``(logits float32[M,7], value float32[M])``, side to move."""
        count = len(obs)
        self.num_evaluations += count
        if self._size + count > self.max_positions:
            self._size = 0  # before the lookups, so that no row found below is written over
            self._keys[:] = 0
        if 2 * (self._size + count) > len(self._keys):  # at most half full: grow, then put the keys back
            size = len(self._keys)
            while 2 * (self._size + count) > size:
                size *= 2
            held = self._keys != 0
            keys = self._keys[held][np.argsort(self._rows[held])]  # by row: put back, each gets its row again
            self._keys, self._rows = np.zeros(size, np.uint64), np.zeros(size, np.int64)
            self._lookup(keys, 0)
        start = self._size
        rows, first = self._lookup(position_keys(obs), start)
        if first.size:
            try:
                logits, value = self.inner.evaluate(obs[first])
            except BaseException:
                self._keys[:], self._size = 0, 0  # the new keys point to rows never written: forget everything
                raise
            self.num_network_evaluations += first.size
            self._grow(start + first.size)
            self._logits[start:start + first.size] = np.asarray(logits, np.float32).reshape(first.size, -1)
            self._value[start:start + first.size] = np.asarray(value, np.float32).reshape(-1)
            self._size = start + first.size
        return self._logits[rows], self._value[rows]

    def _lookup(self, keys: np.ndarray, next_row: int) -> tuple[np.ndarray, np.ndarray]:
        """``_lookup`` of ``keys uint64[M]`` in the table: ``(rows int64[M], first int64[new])``."""
        rows, first = np.empty(len(keys), np.int64), np.empty(len(keys), np.int64)
        shift = np.uint64(64 - (self._keys.shape[0].bit_length() - 1))
        keys = np.ascontiguousarray(keys, np.uint64)
        compiled = _COMPILER.cached()
        if compiled is not None:
            count = compiled._lookup(keys, self._keys, self._rows, shift, next_row, rows, first)
        else:
            with np.errstate(over="ignore"):  # the hash wraps around on purpose
                count = _lookup(keys, self._keys, self._rows, shift, next_row, rows, first)
        return rows, first[:count]

    def _grow(self, size: int) -> None:
        """Room for ``size`` answers: the arrays at least double, up to ``max_positions``."""
        if size > len(self._value):
            size = max(size, min(2 * len(self._value), self.max_positions), 1024)
            used = len(self._value)
            self._logits = np.concatenate([self._logits, np.empty((size - used, game.NUM_ACTIONS), np.float32)])
            self._value = np.concatenate([self._value, np.empty(size - used, np.float32)])


class _CountingEvaluator:
    """Wraps an evaluator and counts the positions it scores (all of them: no cache)."""

    def __init__(self, inner: search_tree.Evaluator) -> None:
        self.inner = inner
        self.num_evaluations = 0

    @property
    def num_network_evaluations(self) -> int:
        return self.num_evaluations

    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.num_evaluations += len(obs)
        return self.inner.evaluate(obs)


@dataclass
class _Game:
    position: int
    mask: int
    ply: int
    obs: list[np.ndarray]
    policy: list[np.ndarray]
    root_value: list[float]
    num_leaves: int = 0
    leaf_depth_sum: int = 0
    start_ply: int = 0
    opening: str = "empty"


def compile_selfplay() -> bool:
    """Compile the search and the memory's table where numba imports (numba's cache on disk: workers load it);
    False where it does not: both run as Python, to the same games."""
    compiled = mcts.compile_search(cache=True)
    return _COMPILER.compile(cache=True) is not None and compiled


def play_games(evaluator: search_tree.Evaluator, num_games: int, config: SelfPlayConfig,
               search: search_tree.SearchConfig, rng: np.random.Generator, *,
               on_game_done: Callable[[GameRecord], None] | None = None,
               sources: Sequence[tuple[int, int]] = ()) -> tuple[list[GameRecord], SelfPlayStats]:
    """Play ``num_games`` self-play games, ``config.num_parallel_games`` at a time, ``on_game_done`` after each.
    Forks branch from ``sources`` (``(position, mask)`` pairs; ``replay.shard_positions``) and the positions searched
    earlier in this call, so without sources the first wave of games never forks."""
    compile_selfplay()  # where numba imports; without it the same games, slower
    searched_with: CachedEvaluator | _CountingEvaluator = (
        CachedEvaluator(evaluator, config.cache_positions) if config.cache_positions
        else _CountingEvaluator(evaluator))
    records: list[GameRecord] = []
    in_flight: list[_Game] = []
    searched: list[tuple[int, int]] = list(sources)  # fork sources: those given, then every position searched
    started = 0
    while started < num_games or in_flight:
        while started < num_games and len(in_flight) < config.num_parallel_games:
            in_flight.append(_new_game(config, rng, searched))
            started += 1
        positions = np.array([g.position for g in in_flight], np.uint64)
        masks = np.array([g.mask for g in in_flight], np.uint64)
        tree = search_tree.Tree(positions, masks, capacity=search.num_simulations + 1)
        mcts.search(tree, searched_with, search, rng=rng)
        policy = mcts.policy_from_visits(tree.root_visits())
        greedy = mcts.best_cols(tree)
        root_value = tree.root_value()
        root_proven = tree.root_proven()
        obs = game.encode(positions, masks)
        num_leaves, leaf_depth_sum = _leaf_depths(tree)
        still = []
        for i, g in enumerate(in_flight):
            g.num_leaves += int(num_leaves[i])
            g.leaf_depth_sum += int(leaf_depth_sum[i])
            if config.fork_share > 0:
                searched.append((g.position, g.mask))
            g.obs.append(obs[i])
            g.policy.append(policy[i])
            g.root_value.append(float(root_value[i]))
            if g.ply < config.temperature_plies and config.temperature_early > 0 and np.isnan(root_proven[i]):
                col = sample_col(policy[i], config.temperature_early, rng)
            else:
                col = int(greedy[i])
            g.position, g.mask = game.play(g.position, g.mask, col)
            g.ply += 1
            result = game.outcome(g.position, g.mask)
            if result is None:
                still.append(g)
                continue
            record = _finish(g, result)
            records.append(record)
            if on_game_done is not None:
                on_game_done(record)
        in_flight = still
    return records, summarize(records, searched_with.num_evaluations, searched_with.num_network_evaluations)


def _new_game(config: SelfPlayConfig, rng: np.random.Generator, searched: list[tuple[int, int]]) -> _Game:
    """A game to start from the empty board, a random prefix or a fork of ``searched`` (else the empty board)."""
    opening, (position, mask) = "empty", game.initial()
    if config.prefix_share > 0 or config.fork_share > 0:
        u = rng.random()
        if u < config.fork_share:
            forked = fork_position(rng, searched)
            if forked is not None:
                opening, (position, mask) = "fork", forked
        elif u < config.fork_share + config.prefix_share:
            opening = "prefix"
            cols = random_prefix(rng, int(rng.integers(0, config.prefix_max_plies + 1)))
            position, mask = game.from_moves(cols, one_based=False)
    ply = game.num_stones(mask)
    return _Game(position, mask, ply, [], [], [], start_ply=ply, opening=opening)


def sample_col(probs: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """A column drawn with probability proportional to ``probs float32[7] ** (1 / temperature)`` (> 0)."""
    p = probs.astype(np.float64)
    if temperature != 1.0:  # at 1 the visits are drawn from exactly as they are
        p = (p / p.max()) ** (1.0 / temperature)
    return int(rng.choice(game.NUM_ACTIONS, p=p / p.sum()))


def _is_quiet(position: int, mask: int) -> bool:
    """True when the game goes on and the side to move cannot win at once."""
    return game.outcome(position, mask) is None and not game.winning_cols(position, mask)


def random_prefix(rng: np.random.Generator, num_plies: int) -> list[int]:
    """The columns of ``num_plies`` random moves from the empty board, first player first.

    Each move is uniform over the legal moves that neither end the game nor, but for the last, leave the
    opponent an immediate win; a prefix that runs out of them is drawn again.  Raises ``ValueError`` past
    ``MAX_PREFIX_PLIES``."""
    if not 0 <= num_plies <= MAX_PREFIX_PLIES:
        raise ValueError(f"a prefix has 0 to {MAX_PREFIX_PLIES} plies, not {num_plies}")
    while True:
        position, mask = game.initial()
        moves: list[int] = []
        for ply in range(num_plies):
            cols = game.legal_cols(mask)
            if ply < num_plies - 1:
                cols = [c for c in cols if _is_quiet(*game.play(position, mask, c))]
            else:
                cols = [c for c in cols if game.outcome(*game.play(position, mask, c)) is None]
            if not cols:
                break
            moves.append(cols[int(rng.integers(len(cols)))])
            position, mask = game.play(position, mask, moves[-1])
        else:
            return moves


def fork_position(rng: np.random.Generator, sources: list[tuple[int, int]], *,
                  num_tries: int = 8) -> tuple[int, int] | None:
    """A random position of ``sources`` with no immediate win, plus one random move that does not end the game;
    None after ``num_tries`` draws (or without sources)."""
    for _ in range(num_tries if sources else 0):
        position, mask = sources[int(rng.integers(len(sources)))]
        if not _is_quiet(position, mask):
            continue
        cols = [c for c in game.legal_cols(mask) if game.outcome(*game.play(position, mask, c)) is None]
        if cols:
            return game.play(position, mask, cols[int(rng.integers(len(cols)))])
    return None


def _popcount(x: np.ndarray) -> np.ndarray:
    """Set bits of each element of uint64 array ``x`` (int64, same shape)."""
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        return np.bitwise_count(x).astype(np.int64)
    return np.unpackbits(x.view(np.uint8).reshape(*x.shape, 8), axis=-1).sum(axis=-1, dtype=np.int64)


def _leaf_depths(tree: search_tree.Tree) -> tuple[np.ndarray, np.ndarray]:
    """``(num_leaves int64[B], leaf_depth_sum int64[B])`` of a fresh tree after its search (depth in stones)."""
    used = np.arange(tree.capacity) < tree.num_nodes[:, None]
    stones = _popcount(tree.mask)
    depth = np.where(used, stones - stones[:, :1], 0)
    return tree.num_nodes.astype(np.int64) - 1, depth.sum(axis=1)


def _finish(g: _Game, result: int) -> GameRecord:
    """Turn a finished game into targets; ``result`` is for the side to move at the end."""
    # the side to move at the end is the one to move at every ply of the same parity
    value = np.where(np.arange(g.start_ply, g.ply) % 2 == g.ply % 2, result, -result).astype(np.float32)
    return GameRecord(obs=np.stack(g.obs), policy=np.stack(g.policy).astype(np.float32), value=value,
                      root_value=np.array(g.root_value, np.float32), start_ply=g.start_ply, opening=g.opening,
                      num_leaves=g.num_leaves, leaf_depth_sum=g.leaf_depth_sum)


def summarize(records: list[GameRecord], num_evaluations: int,
              num_network_evaluations: int | None = None) -> SelfPlayStats:
    """``SelfPlayStats`` of finished games (``num_network_evaluations`` default: ``num_evaluations``)."""
    n = max(len(records), 1)
    return SelfPlayStats(
        num_games=len(records), num_positions=sum(len(r.value) for r in records), num_evaluations=num_evaluations,
        num_network_evaluations=num_evaluations if num_network_evaluations is None else num_network_evaluations,
        mean_length=sum(r.num_plies for r in records) / n,
        first_player_win_rate=sum(r.first_player_result == 1 for r in records) / n,
        draw_rate=sum(r.first_player_result == 0 for r in records) / n,
        mean_leaf_depth=sum(r.leaf_depth_sum for r in records) / max(sum(r.num_leaves for r in records), 1),
        prefix_rate=sum(r.opening == "prefix" for r in records) / n,
        fork_rate=sum(r.opening == "fork" for r in records) / n, mean_start_ply=sum(r.start_ply for r in records) / n)
