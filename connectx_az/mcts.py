"""PUCT Monte Carlo tree search over many Connect Four positions at once. numpy only.

The tree is a struct of arrays (after DeepMind's mctx): ``B`` independent trees,
``N`` node slots each, ``A = 7`` actions, linked by index.  Statistics live on
the *edges* ``[B, N, A]`` and are seen from the side to move at the edge's
parent node, so the selection rule reads the numbers it needs without a sign.
A value handed to ``_backup`` is from the side to move at the leaf; the sign
flips in exactly one place, while walking the path up in ``_add_along_paths``.

One simulation step selects ``num_parallel`` leaves in every tree (with a
virtual loss between them), evaluates all new leaves in **one** network call,
then backs up.  Self-play runs hundreds of trees with one leaf each; the
single-game agent runs one tree with several leaves each, so both keep the
network busy with batches.

Terminal positions are scored by the rules, never by the network.  Proven
results (MCTS-solver, Winands et al. 2008) are carried up the tree: a node
with a child that is lost for the opponent is won, a node whose children are
all proven takes the best of them, and the search stops spending visits
inside decided lines.  ``proven`` is ``+1``/``0``/``-1`` from the node's side to
move, ``NaN`` while unknown.

The network is seen only through ``Evaluator.evaluate(obs) -> (logits, value)``
with ``obs uint8[M, 2, 6, 7]`` (see ``game.encode``), ``logits float32[M, 7]``
and ``value float32[M]``, the value from the side to move in ``[-1, 1]``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from connectx_az import game

A = game.NUM_ACTIONS
_UNKNOWN = np.float32(np.nan)


class Evaluator(Protocol):
    """Anything that scores positions: a torch net, onnxruntime, numpy, a test double."""

    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``obs uint8[M,2,6,7]`` -> ``(logits float32[M,7], value float32[M])``, side to move."""
        ...


@dataclass(frozen=True, kw_only=True)
class SearchConfig:
    """Search hyper-parameters.

    ``c_puct`` weighs the prior in PUCT (Silver et al. 2017):
    ``score = Q + c_puct * P * sqrt(N_parent) / (1 + N_child)``.
    Unvisited edges take ``Q = (parent value) - fpu_reduction``.
    """

    num_simulations: int = 200
    c_puct: float = 2.0
    fpu_reduction: float = 0.2
    dirichlet_alpha: float = 1.0
    dirichlet_fraction: float = 0.25
    num_parallel: int = 1
    virtual_loss: float = 1.0

    def __post_init__(self) -> None:
        if self.num_simulations < 1:
            raise ValueError("num_simulations must be >= 1")
        if self.c_puct <= 0:
            raise ValueError("c_puct must be > 0")
        if self.dirichlet_alpha <= 0 or not 0 <= self.dirichlet_fraction <= 1:
            raise ValueError("dirichlet_alpha must be > 0 and dirichlet_fraction in [0, 1]")
        if self.num_parallel < 1:
            raise ValueError("num_parallel must be >= 1")


class Tree:
    """``B`` search trees of up to ``capacity`` nodes each; node 0 of each is its first root.

    Node arrays ``[B, N]``: ``position``/``mask`` (uint64 bitboards, side to move),
    ``net_value`` (float32, evaluator's value, side to move), ``is_expanded`` (bool,
    priors set), ``proven`` (float32, see module doc).
    Edge arrays ``[B, N, A]``: ``children`` (int32, ``-1`` = not created),
    ``prior`` (float32 probabilities, 0 for illegal columns), ``visits`` and
    ``value_sum`` (float32, from the parent's side to move).
    ``root int32[B]`` is the node the next search starts from; ``num_nodes int32[B]``.
    """

    def __init__(self, position: np.ndarray, mask: np.ndarray, capacity: int = 64) -> None:
        position = np.atleast_1d(np.asarray(position, dtype=np.uint64))
        mask = np.atleast_1d(np.asarray(mask, dtype=np.uint64))
        if position.shape != mask.shape or position.ndim != 1:
            raise ValueError("position and mask must be 1-d arrays of the same length")
        b = position.shape[0]
        n = max(int(capacity), 2)
        self.position = np.zeros((b, n), np.uint64)
        self.mask = np.zeros((b, n), np.uint64)
        self.net_value = np.zeros((b, n), np.float32)
        self.is_expanded = np.zeros((b, n), bool)
        self.proven = np.full((b, n), _UNKNOWN, np.float32)
        self.children = np.full((b, n, A), -1, np.int32)
        self.prior = np.zeros((b, n, A), np.float32)
        self.visits = np.zeros((b, n, A), np.float32)
        self.value_sum = np.zeros((b, n, A), np.float32)
        self.root = np.zeros(b, np.int32)
        self.num_nodes = np.ones(b, np.int32)
        self.position[:, 0] = position
        self.mask[:, 0] = mask
        self.proven[:, 0] = _terminal_value(position, mask)

    @property
    def batch_size(self) -> int:
        return self.position.shape[0]

    @property
    def capacity(self) -> int:
        return self.position.shape[1]

    def ensure_capacity(self, num_new: int) -> None:
        """Grow the node axis (doubling) so every tree can take ``num_new`` more nodes."""
        need = int(self.num_nodes.max()) + num_new
        if need <= self.capacity:
            return
        new_n = max(need, 2 * self.capacity)
        for name, fill in (
            ("position", 0), ("mask", 0), ("net_value", 0), ("is_expanded", False),
            ("proven", _UNKNOWN), ("children", -1), ("prior", 0), ("visits", 0), ("value_sum", 0),
        ):
            old = getattr(self, name)
            grown = np.full((old.shape[0], new_n) + old.shape[2:], fill, old.dtype)
            grown[:, : old.shape[1]] = old
            setattr(self, name, grown)

    def root_visits(self) -> np.ndarray:
        """``float32[B, 7]`` visit counts of the root edges."""
        b = np.arange(self.batch_size)
        return self.visits[b, self.root].copy()

    def root_value(self) -> np.ndarray:
        """``float32[B]`` mean value of each root, side to move (proven value where known)."""
        b = np.arange(self.batch_size)
        visits = self.visits[b, self.root]
        total = visits.sum(axis=1)
        mean = (self.net_value[b, self.root] + self.value_sum[b, self.root].sum(axis=1)) / (1.0 + total)
        proven = self.proven[b, self.root]
        return np.where(np.isnan(proven), mean, proven).astype(np.float32)

    def root_proven(self) -> np.ndarray:
        """``float32[B]`` proven root value (+1/0/-1, side to move) or NaN."""
        return self.proven[np.arange(self.batch_size), self.root].copy()

    def proven_child_values(self) -> np.ndarray:
        """``float32[B, 7]`` proven value of each root move for the side to move, NaN if unknown."""
        b = np.arange(self.batch_size)
        child = self.children[b, self.root]
        values = -self.proven[b[:, None], np.maximum(child, 0)]
        return np.where(child >= 0, values, _UNKNOWN).astype(np.float32)

    def advance(self, index: int, cols: list[int]) -> bool:
        """Move tree ``index``'s root down the played ``cols``, keeping the subtree.

        Returns False (leaving the root unchanged) when a column leads to a
        node the tree never created; the caller then starts a new tree.
        """
        node = int(self.root[index])
        for col in cols:
            child = int(self.children[index, node, col])
            if child < 0:
                return False
            node = child
        self.root[index] = node
        return True


def _terminal_value(position: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``float32[...]``: -1 lost, 0 drawn for the side to move; NaN while the game goes on."""
    lost = game.is_win(game.mover_stones(position, mask))
    full = game.is_full(mask)
    return np.where(lost, -1.0, np.where(full, 0.0, np.nan)).astype(np.float32)


def masked_softmax(logits: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """``float32[..., 7]`` probabilities over legal columns only."""
    z = np.where(legal, logits.astype(np.float32), -np.inf)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.where(legal, np.exp(z), 0.0)
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


def expand(
    tree: Tree,
    b: np.ndarray,
    node: np.ndarray,
    evaluator: Evaluator,
) -> None:
    """Evaluate nodes ``(b[i], node[i])`` in one call; set their priors and net values.

    Proven (terminal) nodes are skipped: the rules score them.
    """
    live = np.isnan(tree.proven[b, node]) & ~tree.is_expanded[b, node]
    if not live.any():
        return
    key = np.unique(b[live].astype(np.int64) * tree.capacity + node[live])
    b, node = key // tree.capacity, key % tree.capacity
    position, mask = tree.position[b, node], tree.mask[b, node]
    logits, value = evaluator.evaluate(game.encode(position, mask))
    tree.prior[b, node] = masked_softmax(np.asarray(logits), game.legal_mask(mask))
    tree.net_value[b, node] = np.clip(np.asarray(value, np.float32).reshape(-1), -1.0, 1.0)
    tree.is_expanded[b, node] = True


def add_root_noise(tree: Tree, rng: np.random.Generator, config: SearchConfig) -> None:
    """Mix Dirichlet(alpha) noise over the legal moves into each root's prior (self-play)."""
    b = np.arange(tree.batch_size)
    root = tree.root
    legal = game.legal_mask(tree.mask[b, root])
    gamma = rng.gamma(config.dirichlet_alpha, size=legal.shape) * legal
    noise = gamma / np.maximum(gamma.sum(axis=1, keepdims=True), 1e-12)
    frac = config.dirichlet_fraction
    tree.prior[b, root] = ((1 - frac) * tree.prior[b, root] + frac * noise).astype(np.float32)


def _select(tree: Tree, trees: np.ndarray, config: SearchConfig) -> tuple[np.ndarray, ...]:
    """Walk down from the roots of ``trees`` (int[M]) by PUCT to one leaf each.

    Returns ``(path_node int32[M, D], path_action int32[M, D], depth int32[M],
    leaf_parent int32[M], leaf_action int32[M])``: the walk crossed edges
    ``(path_node[:, d], path_action[:, d])`` for ``d < depth``; the last of
    them, ``(leaf_parent, leaf_action)``, leads to a node that is either not yet
    created, not yet expanded, or proven.  A proven root gives ``depth == 0``.
    """
    m = trees.shape[0]
    max_depth = game.NUM_CELLS + 1
    path_node = np.zeros((m, max_depth), np.int32)
    path_action = np.zeros((m, max_depth), np.int32)
    depth = np.zeros(m, np.int32)
    node = tree.root[trees].copy()
    active = np.isnan(tree.proven[trees, node])
    rows = np.arange(m)
    for d in range(max_depth):
        idx = rows[active]
        if idx.size == 0:
            break
        b, n = trees[idx], node[idx]
        visits = tree.visits[b, n]
        value_sum = tree.value_sum[b, n]
        prior = tree.prior[b, n]
        child = tree.children[b, n]
        total = visits.sum(axis=1)
        parent_value = (tree.net_value[b, n] + value_sum.sum(axis=1)) / (1.0 + total)
        q = np.where(visits > 0, value_sum / np.maximum(visits, 1e-9), (parent_value - config.fpu_reduction)[:, None])
        u = config.c_puct * prior * (np.sqrt(np.maximum(total, 1.0))[:, None] / (1.0 + visits))
        score = q + u
        child_proven = np.where(child >= 0, tree.proven[b[:, None], np.maximum(child, 0)], np.nan)
        # A move into a lost position for the opponent wins outright; a move into a
        # won one is only played when nothing else is left.
        score = np.where(child_proven == -1, 1e9, score)
        score = np.where(child_proven == 1, score - 1e6, score)
        score = np.where(game.legal_mask(tree.mask[b, n]), score, -np.inf)
        action = score.argmax(axis=1).astype(np.int32)
        path_node[idx, d] = n
        path_action[idx, d] = action
        depth[idx] = d + 1
        nxt = child[np.arange(idx.size), action]
        stop = (nxt < 0) | ~tree.is_expanded[b, np.maximum(nxt, 0)] | ~np.isnan(tree.proven[b, np.maximum(nxt, 0)])
        node[idx] = np.where(stop, n, nxt)
        active[idx[stop]] = False
    last = np.maximum(depth - 1, 0)
    return path_node, path_action, depth, path_node[rows, last], path_action[rows, last]


def _add_along_paths(
    tree: Tree,
    trees: np.ndarray,
    path_node: np.ndarray,
    path_action: np.ndarray,
    depth: np.ndarray,
    visits: float,
    leaf_value: np.ndarray,
    *,
    alternate: bool = True,
) -> None:
    """Add ``visits`` and a value to every edge of each path.

    ``leaf_value float32[M]`` is from the side to move at the leaf.  The edge
    at depth ``d`` belongs to the player to move at ``path_node[:, d]``, who is
    the leaf's side to move when ``depth - d`` is even, else the opponent: this
    is the one place where the perspective flips.  With ``alternate=False`` the
    value is added as it is to every edge (virtual loss: every edge looks worse
    for the player choosing it).
    """
    for d in range(int(depth.max(initial=0))):
        on = depth > d
        value = leaf_value[on]
        if alternate:
            value = np.where((depth[on] - d) % 2 == 1, -value, value)
        key = (trees[on], path_node[on, d], path_action[on, d])
        np.add.at(tree.visits, key, np.float32(visits))
        np.add.at(tree.value_sum, key, value.astype(np.float32))


def _update_proven(tree: Tree, trees: np.ndarray, path_node: np.ndarray, depth: np.ndarray) -> None:
    """Re-derive proven values along the paths, deepest node first (MCTS-solver)."""
    for d in range(int(depth.max(initial=0)) - 1, -1, -1):
        on = depth > d
        b, n = trees[on], path_node[on, d]
        child = tree.children[b, n]
        legal = game.legal_mask(tree.mask[b, n])
        child_proven = np.where(child >= 0, tree.proven[b[:, None], np.maximum(child, 0)], np.nan)
        wins = np.any(child_proven == -1, axis=1)
        settled = np.all(~legal | ~np.isnan(child_proven), axis=1)
        best = np.max(np.where(legal, -np.nan_to_num(child_proven, nan=1.0), -np.inf), axis=1)
        value = np.where(wins, 1.0, np.where(settled, best, np.nan)).astype(np.float32)
        known = ~np.isnan(value)
        tree.proven[b[known], n[known]] = value[known]


def simulate(tree: Tree, evaluator: Evaluator, config: SearchConfig) -> int:
    """One batched step: ``num_parallel`` leaves per tree, one network call, backup.

    Returns the number of simulations added (over all trees).
    """
    k = config.num_parallel
    bsz = tree.batch_size
    tree.ensure_capacity(k)
    selections = []
    vl = config.virtual_loss
    for _ in range(k):
        trees = np.arange(bsz, dtype=np.int64)
        sel = _select(tree, trees, config)
        if k > 1:
            _add_along_paths(tree, trees, sel[0], sel[1], sel[2], vl, np.full(bsz, -vl, np.float32), alternate=False)
        selections.append(sel)
    trees = np.tile(np.arange(bsz, dtype=np.int64), k)
    path_node, path_action, depth, parent, action = (np.concatenate(part) for part in zip(*selections, strict=True))
    if k > 1:
        _add_along_paths(tree, trees, path_node, path_action, depth, -vl, np.full(trees.size, vl, np.float32),
                         alternate=False)

    has_edge = depth > 0
    # Create the child nodes the walks stopped in front of (once per distinct edge).
    child = np.full(trees.shape, -1, np.int64)
    child[has_edge] = tree.children[trees[has_edge], parent[has_edge], action[has_edge]]
    new = has_edge & (child < 0)
    if new.any():
        key = (trees[new] * tree.capacity + parent[new]) * A + action[new]
        uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        ub = trees[new][first]
        up = parent[new][first]
        ua = action[new][first]
        # Number the new nodes of each tree consecutively after its existing ones.
        order = np.argsort(ub, kind="stable")
        rank = np.empty_like(order)
        counts = np.bincount(ub, minlength=bsz)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        rank[order] = np.arange(order.size) - starts[ub[order]]
        ids = tree.num_nodes[ub] + rank
        tree.num_nodes += counts.astype(np.int32)
        pos, msk = game.play(tree.position[ub, up], tree.mask[ub, up], ua)
        tree.position[ub, ids] = pos
        tree.mask[ub, ids] = msk
        tree.proven[ub, ids] = _terminal_value(pos, msk)
        tree.children[ub, up, ua] = ids
        child[new] = ids[inverse.reshape(-1)]
    leaf = np.where(has_edge, child, tree.root[trees])
    expand(tree, trees, leaf, evaluator)
    proven = tree.proven[trees, leaf]
    leaf_value = np.where(np.isnan(proven), tree.net_value[trees, leaf], proven).astype(np.float32)
    _add_along_paths(tree, trees, path_node, path_action, depth, 1.0, leaf_value)
    _update_proven(tree, trees, path_node, depth)
    return int(trees.size)


def search(
    tree: Tree,
    evaluator: Evaluator,
    config: SearchConfig,
    *,
    num_simulations: int | None = None,
    deadline: float | None = None,
    rng: np.random.Generator | None = None,
) -> int:
    """Run simulations on every tree from its current root; returns simulations per tree.

    Stops after ``num_simulations`` (default ``config.num_simulations``) per
    tree, at the ``time.perf_counter()`` ``deadline``, or once every root is
    proven, whichever comes first.  With ``rng`` given, Dirichlet noise is
    mixed into the root priors (self-play); without it the search is
    deterministic.
    """
    budget = config.num_simulations if num_simulations is None else num_simulations
    bsz = tree.batch_size
    b = np.arange(bsz)
    expand(tree, b, tree.root.copy(), evaluator)
    if rng is not None:
        add_root_noise(tree, rng, config)
    done = 0
    while done < budget:
        if np.all(~np.isnan(tree.proven[b, tree.root])):
            break
        if deadline is not None and time.perf_counter() >= deadline:
            break
        simulate(tree, evaluator, config)
        done += config.num_parallel
    return done


def policy_from_visits(visits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """``float32[..., 7]`` move distribution from root visit counts (temperature 0 = argmax)."""
    visits = np.asarray(visits, np.float64)
    if temperature == 0:
        best = visits == visits.max(axis=-1, keepdims=True)
        return (best / best.sum(axis=-1, keepdims=True)).astype(np.float32)
    powered = visits ** (1.0 / temperature)
    return (powered / np.maximum(powered.sum(axis=-1, keepdims=True), 1e-12)).astype(np.float32)


def best_cols(tree: Tree) -> np.ndarray:
    """``int64[B]``: the move each root should play.

    A proven root plays a move that achieves its proven value; otherwise the
    most visited move wins (ties go to the better mean value), and a move
    proven lost is played only when every move is.
    """
    b = np.arange(tree.batch_size)
    visits = tree.visits[b, tree.root]
    legal = game.legal_mask(tree.mask[b, tree.root])
    score = visits + 1e-3 * tree.value_sum[b, tree.root] / np.maximum(visits, 1e-9)
    move_value = tree.proven_child_values()
    root_value = tree.proven[b, tree.root]
    achieves = move_value == root_value[:, None]
    use_proof = ~np.isnan(root_value) & (achieves & legal).any(axis=1)
    score = np.where(use_proof[:, None] & ~achieves, -1e12, score)
    score = np.where(move_value == -1, score - 1e9, score)
    return np.where(legal, score, -np.inf).argmax(axis=1)
