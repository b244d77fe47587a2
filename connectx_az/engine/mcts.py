"""PUCT Monte Carlo tree search, written once for one tree; many trees are a loop over it.

Walks, grows, backs up and searches ``search_tree.Tree`` (edge statistics from the side to move at the edge's
parent).  Each rule is one plain function on one tree's arrays (node arrays ``[N]``, edge arrays ``[N, A]``):
``_walk`` (PUCT with first-play urgency, virtual loss, the proof biases), ``_add_leaves``
and ``_new_node`` (the nodes the walks stopped in front of), ``_backup`` (the one sign flip) and ``_prove``
(proven results carried up, MCTS-solver, Winands et al. 2008: a node with a child lost for the opponent is won,
a node whose moves are all proven takes the best of them).  ``_walk_trees`` and ``_backup_trees`` loop them over
the ``B`` trees, as mctx ``vmap``s one tree's step.

The functions use only what numba compiles: ``compile_search`` njits them (``jit.Compiler``) where numba
imports, and from then on ``simulate`` runs them compiled; before, or without numba, the same functions run as
Python.  Both give the same trees, bit for bit (float64 scores, float32 sums, the same order).

One simulation step selects ``num_parallel`` leaves in every tree (a virtual loss between them), evaluates all
new leaves in **one** network call (``_encode_leaves`` before it, ``_set_leaves`` after), then backs up:
self-play runs many trees with one leaf each, the agent one tree with several.  A value backed up is from the
side to move at the leaf; terminal positions are scored by the rules, never by the network."""

from __future__ import annotations

import math
import time
import types

import numpy as np

from connectx_az.engine import game, jit, search_tree

A = game.NUM_ACTIONS

_MAX_DEPTH = search_tree.MAX_DEPTH
# constants as numpy scalars and arrays: numba compiles them in
_U = np.uint64
_BOTTOM_BITS = np.array(game.BOTTOM_BITS, np.uint64)
_TOP_BITS = np.array(game.TOP_BITS, np.uint64)
_BOARD_MASK = _U(game.BOARD_MASK)
# shift counts as uint64: numba types a uint64 shifted by an int64 as a float
_S1, _S2, _S6, _S7, _S8, _S12, _S14, _S16 = _U(1), _U(2), _U(6), _U(7), _U(8), _U(12), _U(14), _U(16)
_WIN_BIAS, _LOSS_BIAS = search_tree.WIN_BIAS, search_tree.LOSS_BIAS
_NAN = np.float32(np.nan)
_NEG_INF = np.float32(-np.inf)
_ONE = _U(1)
_NUM_CELLS = game.NUM_CELLS
#: the bitboard bit of each cell of an encoded plane, laid out as ``game.encode``'s [row from the top, column]
_CELL_BITS = np.array([[(game.ROWS + 1) * col + game.ROWS - 1 - row for col in range(game.COLS)]
                       for row in range(game.ROWS)], np.uint64).reshape(-1)


def _walk(visits, value_sum, prior, score_bias, children, is_expanded, proven, node_visits, node_value_sum,
          net_value, root, c_puct, fpu_reduction, virtual_loss, path_node, path_action, depth) -> None:
    """``K`` walks down one tree from ``root`` by PUCT, each to a node not yet created, not expanded, or proven.

    Walk ``w`` crosses edges ``(path_node[w, d], path_action[w, d])`` for ``d < depth[w]`` (``int64[K, D]``,
    ``int64[K]``; a proven root: depth 0).  Each crossed edge takes ``virtual_loss`` (0: none): it looks like
    that many lost visits to its chooser, so that later walks spread out."""
    vl = np.float32(virtual_loss)
    for w in range(depth.shape[0]):
        node = root
        d = 0
        if proven[node] != proven[node]:  # NaN: not proven
            while True:
                # PUCT: the first move of the highest score (``search_tree.SearchConfig``), float64; first-play
                # urgency: an unvisited move takes the node's mean less the reduction.  Read in place: compiled,
                # a row taken as a view, or a call, a node costs more than the scores
                visits_sum = float(node_visits[node])
                node_value = float(net_value[node]) + float(node_value_sum[node])
                fpu_value = node_value / (1.0 + visits_sum) - fpu_reduction
                scale = c_puct * math.sqrt(max(visits_sum, 1.0))
                best = 0
                best_score = -math.inf
                for action in range(A):
                    n = float(visits[node, action])
                    q = float(value_sum[node, action]) / n if n > 0 else fpu_value
                    score = q + float(prior[node, action]) * (scale / (1.0 + n)) + float(score_bias[node, action])
                    if score > best_score:
                        best = action
                        best_score = score
                if virtual_loss != 0:
                    visits[node, best] += vl
                    value_sum[node, best] -= vl
                    node_visits[node] += vl
                    node_value_sum[node] -= vl
                path_node[w, d] = node
                path_action[w, d] = best
                d += 1
                nxt = children[node, best]
                if nxt < 0 or not is_expanded[nxt] or proven[nxt] == proven[nxt]:
                    break
                node = nxt
        depth[w] = d


def _is_win(stones: np.uint64) -> bool:
    """``game.is_win`` of one ``uint64`` (numba needs uint64 shift counts); tests/test_mcts.py holds them equal."""
    vertical = stones & (stones >> _S1)
    rising = stones & (stones >> _S6)
    horizontal = stones & (stones >> _S7)
    falling = stones & (stones >> _S8)
    return ((vertical & (vertical >> _S2)) | (rising & (rising >> _S12)) | (horizontal & (horizontal >> _S14))
            | (falling & (falling >> _S16))) != 0


def _new_node(position, mask, children, proven, legal_mask, score_bias, parent, action, child) -> None:
    """Make node ``child`` the position after ``action`` at ``parent`` (``game.play``), proven by the rules."""
    children[parent, action] = child
    m = mask[parent]
    stones = position[parent] ^ m  # the new side to move's
    m = m | (m + _BOTTOM_BITS[action])
    position[child] = stones
    mask[child] = m
    if _is_win(stones ^ m):  # the player who just moved
        proven[child] = -1.0
    elif m == _BOARD_MASK:
        proven[child] = 0.0
    else:
        proven[child] = _NAN
    for col in range(A):
        legal = (m & _TOP_BITS[col]) == 0
        legal_mask[child, col] = legal
        score_bias[child, col] = 0.0 if legal else _NEG_INF


def _insert(keys, count, key) -> int:
    """Put ``key`` into ``keys[:count]`` (ascending, distinct) unless it is there; returns the new count."""
    i = 0
    while i < count and keys[i] < key:
        i += 1
    if i < count and keys[i] == key:
        return count
    for j in range(count, i, -1):
        keys[j] = keys[j - 1]
    keys[i] = key
    return count + 1


def _add_leaves(position, mask, children, is_expanded, proven, legal_mask, score_bias, root, num_nodes, path_node,
                path_action, depth, leaf, ends, open_node) -> tuple[int, int]:
    """Create the nodes one tree's walks stopped in front of; returns ``(num_nodes, num_open)`` after.

    Each distinct new edge gets one node, numbered from ``num_nodes`` in the order of ``parent * A + action``
    (``ends``: scratch, ``int64[K]``).  ``leaf[w]`` is the node walk ``w`` reached (the root at depth 0); the
    open ones (neither proven nor expanded), distinct and ascending, go to ``open_node[:num_open]``."""
    count = 0
    for w in range(depth.shape[0]):
        d = depth[w]
        if d > 0 and children[path_node[w, d - 1], path_action[w, d - 1]] < 0:
            count = _insert(ends, count, path_node[w, d - 1] * A + path_action[w, d - 1])
    for i in range(count):
        _new_node(position, mask, children, proven, legal_mask, score_bias, ends[i] // A, ends[i] % A,
                  num_nodes + i)
    num_open = 0
    for w in range(depth.shape[0]):
        d = depth[w]
        node = children[path_node[w, d - 1], path_action[w, d - 1]] if d > 0 else root
        leaf[w] = node
        if proven[node] != proven[node] and not is_expanded[node]:
            num_open = _insert(open_node, num_open, node)
    return num_nodes + count, num_open


def _backup(visits, value_sum, node_visits, node_value_sum, net_value, proven, path_node, path_action, depth, leaf,
            virtual_loss) -> None:
    """Add one visit and its leaf's value to every edge of each walk of one tree, taking back the virtual loss.

    A leaf's value is its proven value, else its net value, from the side to move at the leaf.  The edge at
    depth ``d`` belongs to the side to move at ``path_node[w, d]``: the leaf's when ``depth - d`` is even, else
    the opponent (the one place where the perspective flips).  float32 sums, walk by walk, edge by edge."""
    vl = np.float32(virtual_loss)
    add = np.float32(1.0 - virtual_loss)
    for w in range(depth.shape[0]):
        node = leaf[w]
        value = net_value[node] if proven[node] != proven[node] else proven[node]
        for_leaf_side = np.float32(value + vl)
        for_other_side = np.float32(-value + vl)
        num_edges = depth[w]
        for d in range(num_edges):
            v = for_other_side if (num_edges - d) % 2 == 1 else for_leaf_side
            node = path_node[w, d]
            action = path_action[w, d]
            visits[node, action] += add
            value_sum[node, action] += v
            node_visits[node] += add
            node_value_sum[node] += v


def _prove(proven, edge_proven, score_bias, legal_mask, path_node, path_action, depth, leaf) -> None:
    """Carry newly proven leaves of one tree up their walks, stopping at the first node that stays open.

    A move into a proven child takes ``-proven[child]`` (``edge_proven``) and a score bias (a win first, a loss
    last); a node is won by any won move, and otherwise proven once every legal move is, at the best of them."""
    for w in range(depth.shape[0]):
        d = depth[w] - 1
        child = leaf[w]
        if d < 0 or proven[child] != proven[child] \
                or edge_proven[path_node[w, d], path_action[w, d]] == edge_proven[path_node[w, d], path_action[w, d]]:
            continue
        while True:
            node = path_node[w, d]
            action = path_action[w, d]
            value = -proven[child]
            edge_proven[node, action] = value
            score_bias[node, action] = _WIN_BIAS if value == 1 else (_LOSS_BIAS if value == -1 else 0.0)
            wins = False
            settled = True
            best = _NEG_INF
            for col in range(A):
                e = edge_proven[node, col]
                if e == 1:
                    wins = True
                if legal_mask[node, col]:
                    if e != e:
                        settled = False
                    elif e > best:
                        best = e
            if not (wins or settled) or proven[node] == proven[node]:
                break
            proven[node] = 1.0 if wins else best
            if d == 0:
                break
            child = node
            d -= 1


def _encode_leaves(position, mask, open_b, open_node, count, out) -> None:
    """``game.encode`` of the open leaves ``(open_b[i], open_node[i])``, ``i < count``, into ``out uint8[>= count,
    2 * cells]``: numpy's ``game.encode`` in Python, bit by bit when compiled (``_encode_leaves_compiled`` takes its
    place).  The bytes are the same."""
    b, node = open_b[:count], open_node[:count]
    out[:count] = game.encode(position[b, node], mask[b, node]).reshape(count, 2 * _NUM_CELLS)


def _encode_leaves_compiled(position, mask, open_b, open_node, count, out) -> None:
    """``_encode_leaves`` compiled: each leaf's two planes, cell by cell."""
    for i in range(count):
        own = position[open_b[i], open_node[i]]
        opp = own ^ mask[open_b[i], open_node[i]]
        for cell in range(_NUM_CELLS):
            out[i, cell] = (own >> _CELL_BITS[cell]) & _ONE
            out[i, _NUM_CELLS + cell] = (opp >> _CELL_BITS[cell]) & _ONE


def _set_leaves(prior, net_value, is_expanded, open_b, open_node, count, priors, values) -> None:
    """The evaluated leaves' priors (``priors float32[count, A]``, already softmaxed over their legal moves) and
    net values (``values float32[count]``, clipped to [-1, 1]); they become expanded."""
    for i in range(count):
        b = open_b[i]
        node = open_node[i]
        for action in range(A):
            prior[b, node, action] = priors[i, action]
        v = values[i]
        if v > 1.0:
            v = np.float32(1.0)
        elif v < -1.0:
            v = np.float32(-1.0)
        net_value[b, node] = v
        is_expanded[b, node] = True


def _walk_trees(visits, value_sum, prior, score_bias, children, is_expanded, proven, node_visits, node_value_sum,
                net_value, position, mask, legal_mask, root, num_nodes, c_puct, fpu_reduction, virtual_loss,
                path_node, path_action, depth, leaf, ends, open_b, open_node, obs) -> int:
    """``_walk`` then ``_add_leaves`` in each of the ``B`` trees (the ``Tree``'s arrays); returns how many open
    leaves there are: ``(open_b[i], open_node[i])``, by tree, then node, encoded into ``obs[i]``
    (``_encode_leaves``).  Walk ``w`` of tree ``b`` is ``path_node[b, w]``/``path_action[b, w]``
    (``int64[B, K, D]``), ``depth[b, w]``, ``leaf[b, w]``."""
    num_open = 0
    for b in range(root.shape[0]):
        _walk(visits[b], value_sum[b], prior[b], score_bias[b], children[b], is_expanded[b], proven[b],
              node_visits[b], node_value_sum[b], net_value[b], root[b], c_puct, fpu_reduction, virtual_loss,
              path_node[b], path_action[b], depth[b])
        nodes, count = _add_leaves(position[b], mask[b], children[b], is_expanded[b], proven[b], legal_mask[b],
                                   score_bias[b], root[b], num_nodes[b], path_node[b], path_action[b], depth[b],
                                   leaf[b], ends, open_node[num_open:])
        num_nodes[b] = nodes
        open_b[num_open:num_open + count] = b
        num_open += count
    _encode_leaves(position, mask, open_b, open_node, num_open, obs)
    return num_open


def _backup_trees(visits, value_sum, node_visits, node_value_sum, net_value, proven, edge_proven, score_bias,
                  legal_mask, prior, is_expanded, open_b, open_node, count, priors, values, path_node, path_action,
                  depth, leaf, virtual_loss) -> None:
    """The open leaves' evaluations set (``_set_leaves``), then ``_backup`` and ``_prove`` in each tree (arrays
    as in ``_walk_trees``)."""
    _set_leaves(prior, net_value, is_expanded, open_b, open_node, count, priors, values)
    for b in range(leaf.shape[0]):
        _backup(visits[b], value_sum[b], node_visits[b], node_value_sum[b], net_value[b], proven[b], path_node[b],
                path_action[b], depth[b], leaf[b], virtual_loss)
        _prove(proven[b], edge_proven[b], score_bias[b], legal_mask[b], path_node[b], path_action[b], depth[b],
               leaf[b])


_STEPS = (_walk, _is_win, _new_node, _insert, _add_leaves, _set_leaves, _backup, _prove,
          _walk_trees, _backup_trees)


class _Uniform:
    """Equal logits and a zero value: enough to run every step once."""

    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((len(obs), A), np.float32), np.zeros(len(obs), np.float32)


def _warm_up(steps) -> None:
    """Run the compiled steps on a small tree, with and without virtual loss: numba compiles them now."""
    tree = search_tree.Tree(np.zeros(2, np.uint64), np.zeros(2, np.uint64), capacity=8)
    search_tree.expand(tree, np.arange(2), tree.root.copy(), _Uniform())
    for parallel in (1, 2):
        _simulate(tree, _Uniform(), search_tree.SearchConfig(num_parallel=parallel), steps)


_COMPILER = jit.Compiler("mcts", _STEPS, overrides={"_encode_leaves": _encode_leaves_compiled},
                         key=(game.ROWS, game.COLS), warm_up=_warm_up, makes_no_arrays=True)


def compile_search(*, cache: bool = False) -> bool:
    """Compile the search where numba imports (once a process; ``compile_seconds()`` says how long it took);
    from then on ``simulate`` runs compiled.  False where numba is missing or fails (``compile_error()``):
    the search runs as Python, to the same trees.  ``cache=True``: numba's cache on disk (training)."""
    return _COMPILER.compile(cache=cache) is not None


def compile_search_in_background() -> bool:
    """Start compiling the search in a daemon thread (``jit.Compiler.compile_in_background``) unless it is
    compiled, failed or under way; True if a compile started.  ``simulate`` switches to the compiled steps at
    the first step after it ends (the same trees either way)."""
    return _COMPILER.compile_in_background() is not None


def is_compiled() -> bool:
    """True once this process compiled the search (this module or an earlier copy of it)."""
    return _COMPILER.cached() is not None


def compile_error() -> str | None:
    """Why the compile failed in this process (``None``: it did not, or did not run)."""
    return _COMPILER.error


def compile_seconds() -> float:
    """Seconds this module's compile took in this process (0 if it did not compile)."""
    return _COMPILER.seconds


def _steps():
    """The step functions ``simulate`` runs: compiled if this process compiled them, else this module's own."""
    compiled = _COMPILER.cached()
    return _PYTHON_STEPS if compiled is None else compiled


_PYTHON_STEPS = types.SimpleNamespace(**{f.__name__: f for f in _STEPS})


def simulate(tree: search_tree.Tree, evaluator: search_tree.Evaluator, config: search_tree.SearchConfig) -> int:
    """One step: ``num_parallel`` walks per tree, their new leaves evaluated in one call, the backup; returns the
    simulations added over all trees."""
    return _simulate(tree, evaluator, config, _steps())


def _simulate(tree: search_tree.Tree, evaluator: search_tree.Evaluator, config: search_tree.SearchConfig,
              steps) -> int:
    """``simulate`` with ``steps``: this module's functions, or the same compiled."""
    k = config.num_parallel
    bsz = tree.batch_size
    tree.ensure_capacity(k)
    virtual_loss = float(config.virtual_loss) if k > 1 else 0.0
    path_node = np.zeros((bsz, k, _MAX_DEPTH), np.int64)
    path_action = np.zeros((bsz, k, _MAX_DEPTH), np.int64)
    depth, leaf = np.zeros((bsz, k), np.int64), np.zeros((bsz, k), np.int64)
    open_b, open_node = np.zeros(bsz * k, np.int64), np.zeros(bsz * k, np.int64)
    obs = np.empty((bsz * k, 2 * _NUM_CELLS), np.uint8)
    count = steps._walk_trees(tree.visits, tree.value_sum, tree.prior, tree.score_bias, tree.children,
                              tree.is_expanded, tree.proven, tree.node_visits, tree.node_value_sum, tree.net_value,
                              tree.position, tree.mask, tree.legal_mask, tree.root, tree.num_nodes,
                              float(config.c_puct), float(config.fpu_reduction), virtual_loss, path_node,
                              path_action, depth, leaf, np.zeros(k, np.int64), open_b, open_node, obs)
    priors, values = _NO_PRIORS, _NO_VALUES
    if count:  # the one network call of the step (the softmax is numpy's on both paths: the same float32 exp)
        logits, value = evaluator.evaluate(obs[:count].reshape(count, 2, game.ROWS, game.COLS))
        priors = np.ascontiguousarray(search_tree.masked_softmax(
            np.asarray(logits), tree.legal_mask[open_b[:count], open_node[:count]]))
        values = np.ascontiguousarray(np.asarray(value, np.float32).reshape(-1))
    steps._backup_trees(tree.visits, tree.value_sum, tree.node_visits, tree.node_value_sum, tree.net_value,
                        tree.proven, tree.edge_proven, tree.score_bias, tree.legal_mask, tree.prior,
                        tree.is_expanded, open_b, open_node, count, priors, values, path_node, path_action, depth,
                        leaf, virtual_loss)
    return bsz * k


_NO_PRIORS = np.zeros((0, A), np.float32)
_NO_VALUES = np.zeros(0, np.float32)


def search(tree: search_tree.Tree, evaluator: search_tree.Evaluator, config: search_tree.SearchConfig, *,
           num_simulations: int | None = None, deadline: float | None = None,
           rng: np.random.Generator | None = None) -> int:
    """Run simulations on every tree from its current root; returns simulations per tree.

    Stops after ``num_simulations`` (default ``config.num_simulations``) per tree, at the
    ``time.perf_counter()`` ``deadline``, or once every root is proven.  ``rng`` mixes Dirichlet noise
    into the root priors (self-play); without it the search is deterministic."""
    budget = config.num_simulations if num_simulations is None else num_simulations
    bsz = tree.batch_size
    b = np.arange(bsz)
    search_tree.expand(tree, b, tree.root.copy(), evaluator)
    if rng is not None:
        search_tree.add_root_noise(tree, rng, config)
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


def best_cols(tree: search_tree.Tree) -> np.ndarray:
    """``int64[B]``: the move each root should play.  A proven root plays a move that achieves its proven value;
    otherwise the most visited (ties to the better mean value), and a move proven lost only when every move is."""
    b = np.arange(tree.batch_size)
    visits = tree.visits[b, tree.root]
    legal = tree.legal_mask[b, tree.root]
    score = visits + 1e-3 * tree.value_sum[b, tree.root] / np.maximum(visits, 1e-9)
    move_value = tree.proven_child_values()
    root_value = tree.proven[b, tree.root]
    achieves = move_value == root_value[:, None]
    use_proof = ~np.isnan(root_value) & (achieves & legal).any(axis=1)
    score = np.where(use_proof[:, None] & ~achieves, -1e12, score)
    score = np.where(move_value == -1, score - 1e9, score)
    return np.where(legal, score, -np.inf).argmax(axis=1)
