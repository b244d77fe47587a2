"""PUCT Monte Carlo tree search over many Connect Four positions at once. numpy only.

Walks, backs up and searches ``search_tree.Tree`` (edge statistics from the side to move at the
edge's parent).  A value handed to ``_backup`` is from the side to move at the leaf; the sign flips
in exactly one place, in ``_backup``.

One simulation step selects ``num_parallel`` leaves in every tree (a virtual loss between them),
evaluates all new leaves in **one** network call, then backs up: self-play runs many trees with one
leaf each, the agent one tree with several.  Terminal positions are scored by the rules, never by
the network.  Proven results (MCTS-solver, Winands et al. 2008) are carried up the tree: a node with
a child lost for the opponent is won, a node whose children are all proven takes the best of them."""

from __future__ import annotations

import time

import numpy as np

from connectx_az.engine import game, mcts_numba, search_tree

A = game.NUM_ACTIONS

_MAX_DEPTH = search_tree.MAX_DEPTH
_WIN_BIAS, _LOSS_BIAS = search_tree.WIN_BIAS, search_tree.LOSS_BIAS


# Twins: each batched function (numpy over all trees) has a single-tree twin (``*_one``, Python floats:
# numpy's per-call cost outweighs the arithmetic on one tree's 7-wide rows) right after it, giving the
# same results bit for bit (float64, same operation order); tests/test_mcts.py holds them equal.


def _puct_score(visits: np.ndarray, value_sum: np.ndarray, prior: np.ndarray, score_bias: np.ndarray,
                node_visits: np.ndarray, node_value: np.ndarray, config: search_tree.SearchConfig) -> np.ndarray:
    """``float64[M, A]`` PUCT score of each edge of ``M`` nodes, from the side to move at each node.  Edge statistics
    are ``float32[M, A]``, ``node_visits`` ``float32[M]``, ``node_value`` (the net value plus ``node_value_sum``)
    ``float64[M]``."""
    visits = visits.astype(np.float64)
    node_visits = node_visits.astype(np.float64)[:, None]
    fpu_value = node_value[:, None] / (1.0 + node_visits) - config.fpu_reduction
    visited = visits > 0
    q = np.where(visited, value_sum.astype(np.float64) / np.where(visited, visits, 1.0), fpu_value)
    u = prior.astype(np.float64) * ((config.c_puct * np.sqrt(np.maximum(node_visits, 1.0))) / (1.0 + visits))
    return q + u + score_bias.astype(np.float64)


def _puct_argmax(visits: list[float], value_sum: list[float], prior: list[float], score_bias: list[float],
                 node_visits: float, node_value: float, c_puct: float, fpu_reduction: float) -> int:
    """``_puct_score(...).argmax()`` for one node, on Python floats (lists of ``A``); the first of equal maxima."""
    fpu_value = node_value / (1.0 + node_visits) - fpu_reduction
    scale = c_puct * float(np.sqrt(node_visits if node_visits > 1.0 else 1.0))
    best, best_score = 0, -np.inf
    for action in range(A):
        n = visits[action]
        score = (value_sum[action] / n if n > 0 else fpu_value) + prior[action] * (scale / (1.0 + n)) \
            + score_bias[action]
        if score > best_score:
            best, best_score = action, score
    return best


def _select(tree: search_tree.Tree, config: search_tree.SearchConfig, virtual_loss: float, path_node: np.ndarray,
            path_action: np.ndarray, depth: np.ndarray) -> None:
    """Walk ``K`` times down from every root by PUCT to a leaf, writing the paths.

    Fills ``path_node``/``path_action int[K, B, D]`` and ``depth int[K, B]``: walk ``k`` of tree ``b``
    crossed edges ``(path_node[k, b, d], path_action[k, b, d])`` for ``d < depth[k, b]``, the last
    leading to a node not yet created, not yet expanded, or proven (a proven root: ``depth == 0``).
    Each crossed edge gets ``virtual_loss`` so that later walks spread out."""
    n_slots = tree.capacity
    # Gathers use ``take`` on flat ``b * N + node`` rows and ``row * A + action`` edges: faster than fancy indexing.
    visits, value_sum = tree.visits.reshape(-1, A), tree.value_sum.reshape(-1, A)
    prior, score_bias = tree.prior.reshape(-1, A), tree.score_bias.reshape(-1, A)
    children = tree.children.reshape(-1)
    node_visits, node_value_sum = tree.node_visits.reshape(-1), tree.node_value_sum.reshape(-1)
    net_value, proven = tree.net_value.reshape(-1), tree.proven.reshape(-1)
    is_expanded = tree.is_expanded.reshape(-1)
    edge_arrays = (tree.visits.reshape(-1), tree.value_sum.reshape(-1), node_visits, node_value_sum)
    depth[:] = 0
    for walk in range(path_node.shape[0]):
        walk_node, walk_action, walk_depth = path_node[walk].T, path_action[walk].T, depth[walk]
        idx = np.arange(tree.batch_size)
        node = tree.root.astype(np.intp)
        row = idx * n_slots + node
        live = np.isnan(proven.take(row))
        idx, node, row = idx[live], node[live], row[live]
        for d in range(_MAX_DEPTH):
            if idx.size == 0:
                break
            node_value = net_value.take(row).astype(np.float64) + node_value_sum.take(row)
            score = _puct_score(visits.take(row, axis=0), value_sum.take(row, axis=0), prior.take(row, axis=0),
                                score_bias.take(row, axis=0), node_visits.take(row), node_value, config)
            action = score.argmax(axis=1)
            edge = row * A + action
            if virtual_loss:
                _add_virtual_loss(*edge_arrays, edge, row, virtual_loss)
            walk_node[d, idx] = node
            walk_action[d, idx] = action
            walk_depth[idx] = d + 1
            node = children.take(edge).astype(np.intp)
            row = idx * n_slots + node
            safe = np.maximum(row, 0)
            go = (node >= 0) & is_expanded.take(safe) & np.isnan(proven.take(safe))
            idx, node, row = idx[go], node[go], row[go]


def _select_one(tree: search_tree.Tree, config: search_tree.SearchConfig, virtual_loss: float, path_node: np.ndarray,
                path_action: np.ndarray, depth: np.ndarray) -> None:
    """``_select`` for a single tree (``B == 1``), one node at a time on Python floats (``_puct_argmax``)."""
    visits, value_sum, prior, score_bias = tree.visits[0], tree.value_sum[0], tree.prior[0], tree.score_bias[0]
    children, is_expanded, proven = tree.children[0], tree.is_expanded[0], tree.proven[0]
    node_visits, node_value_sum, net_value = tree.node_visits[0], tree.node_value_sum[0], tree.net_value[0]
    edge_arrays = (visits.reshape(-1), value_sum.reshape(-1), node_visits, node_value_sum)
    c_puct, fpu_reduction = config.c_puct, config.fpu_reduction
    root = int(tree.root[0])
    for walk in range(path_node.shape[0]):
        nodes, actions = path_node[walk, 0], path_action[walk, 0]
        node = root
        d = 0
        if proven[node] != proven[node]:  # NaN: not proven
            while True:
                action = _puct_argmax(visits[node].tolist(), value_sum[node].tolist(), prior[node].tolist(),
                                      score_bias[node].tolist(), float(node_visits[node]),
                                      float(net_value[node]) + float(node_value_sum[node]), c_puct,
                                      fpu_reduction)
                if virtual_loss:
                    _add_virtual_loss(*edge_arrays, node * A + action, node, virtual_loss)
                nodes[d] = node
                actions[d] = action
                d += 1
                nxt = int(children[node, action])
                if nxt < 0 or not is_expanded[nxt] or proven[nxt] == proven[nxt]:
                    break
                node = nxt
        depth[walk, 0] = d


def _add_leaves(tree: search_tree.Tree, trees: np.ndarray, path_node: np.ndarray, path_action: np.ndarray,
                depth: np.ndarray) -> np.ndarray:
    """``int[M]``: the node each walk reached, creating the nodes the walks stopped in front of.

    Walk ``i`` of tree ``trees[i]`` is ``path_node``/``path_action int[M, D]``, ``depth int[M]`` (depth 0
    stays at the root).  Each distinct new edge gets one node; a tree's new nodes are numbered after its
    existing ones in the order of their ``(parent, action)``."""
    bsz = tree.batch_size
    rows = np.arange(trees.size)
    parent = path_node[rows, np.maximum(depth - 1, 0)]
    action = path_action[rows, np.maximum(depth - 1, 0)]
    has_edge = depth > 0
    child = np.where(has_edge, tree.children[trees, parent, action], -1).astype(np.intp)
    new = has_edge & (child < 0)
    if new.any():
        key = (trees[new] * tree.capacity + parent[new]) * A + action[new]
        uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        ub = trees[new][first]
        up = parent[new][first]
        ua = action[new][first]
        order = np.argsort(ub, kind="stable")
        rank = np.empty_like(order)
        counts = np.bincount(ub, minlength=bsz)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        rank[order] = np.arange(order.size) - starts[ub[order]]
        ids = tree.num_nodes[ub] + rank
        tree.num_nodes += counts.astype(np.int32)
        tree._init_nodes(ub, ids, *game.play(tree.position[ub, up], tree.mask[ub, up], ua))
        tree.children[ub, up, ua] = ids
        child[new] = ids[inverse.reshape(-1)]
    return np.where(has_edge, child, tree.root[trees])


def _add_leaves_one(tree: search_tree.Tree, path_node: np.ndarray, path_action: np.ndarray,
                    depth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_add_leaves`` for tree 0 alone (``B == 1``; ``path_node``/``path_action int[K, D]``, ``depth int[K]``), in
    Python; returns ``leaf int[K]`` and the leaves that still need the network, ascending as ``expand`` orders them."""
    children, proven, is_expanded = tree.children[0], tree.proven[0], tree.is_expanded[0]
    root = int(tree.root[0])
    ends = [(int(nodes[d - 1]), int(actions[d - 1])) if d else None
            for nodes, actions, d in zip(path_node, path_action, depth.tolist(), strict=True)]
    new = sorted({end for end in ends if end is not None and children[end] < 0})
    if new:
        first = int(tree.num_nodes[0])
        parent, action = np.array(new, np.intp).T
        ids = np.arange(first, first + len(new), dtype=np.intp)
        tree._init_nodes(np.zeros(len(new), np.intp), ids,
                         *game.play(tree.position[0, parent], tree.mask[0, parent], action))
        children[parent, action] = ids
        tree.num_nodes[0] = first + len(new)
    leaf = [root if end is None else int(children[end]) for end in ends]
    open_leaves = sorted({node for node in leaf if proven[node] != proven[node] and not is_expanded[node]})
    return np.array(leaf, np.intp), np.array(open_leaves, np.intp)


def _path_edges(trees: np.ndarray, path_node: np.ndarray, path_action: np.ndarray,
                depth: np.ndarray) -> tuple[np.ndarray, ...]:
    """``(row, d, b, node, action)``, each ``int[E]``: edge ``(b, node, action)`` is step ``d`` of path ``row``."""
    on = np.arange(int(depth.max(initial=0))) < depth[:, None]
    row, d = np.nonzero(on)
    return row, d, trees[row], path_node[row, d], path_action[row, d]


def _add_virtual_loss(visits: np.ndarray, value_sum: np.ndarray, node_visits: np.ndarray,
                      node_value_sum: np.ndarray, edge: np.ndarray | int, row: np.ndarray | int,
                      amount: float) -> None:
    """Make distinct edges look like ``amount`` lost visits for their chooser.  The tree's arrays come flattened:
    ``visits``/``value_sum`` ``[B * N * A]`` indexed by ``edge``, ``node_visits``/``node_value_sum`` ``[B * N]`` by
    ``row`` (``edge == row * A + action``)."""
    visits[edge] += amount
    value_sum[edge] -= amount
    node_visits[row] += amount
    node_value_sum[row] -= amount


def _backup(tree: search_tree.Tree, trees: np.ndarray, path_node: np.ndarray, path_action: np.ndarray,
            depth: np.ndarray, leaf_value: np.ndarray, virtual_loss: float) -> None:
    """Add one visit and the leaf value to every edge of each path, taking back the virtual loss.

    ``leaf_value float32[M]`` is from the side to move at the leaf.  The edge at depth ``d`` belongs to
    the side to move at ``path_node[:, d]``: the leaf's when ``depth - d`` is even, else the opponent
    (the one place where the perspective flips).  ``virtual_loss``: what each path carries (0 for none)."""
    row, d, b, node, action = _path_edges(trees, path_node, path_action, depth)
    if row.size == 0:
        return
    value = np.where((depth[row] - d) % 2 == 1, -leaf_value[row], leaf_value[row]) + np.float32(virtual_loss)
    value = value.astype(np.float32)
    visits = np.float32(1.0 - virtual_loss)
    # Paths of one tree share edges when several leaves are selected per step.
    if trees.size == tree.batch_size:
        tree.visits[b, node, action] += visits
        tree.value_sum[b, node, action] += value
        tree.node_visits[b, node] += visits
        tree.node_value_sum[b, node] += value
    else:
        np.add.at(tree.visits, (b, node, action), visits)
        np.add.at(tree.value_sum, (b, node, action), value)
        np.add.at(tree.node_visits, (b, node), visits)
        np.add.at(tree.node_value_sum, (b, node), value)


def _proven_from_edges(edge_proven: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """``float32[...]`` a node's proven value from its ``[..., A]`` move values, NaN if open."""
    wins = (edge_proven == 1).any(axis=-1)
    settled = (~legal | ~np.isnan(edge_proven)).all(axis=-1)
    best = np.where(legal, edge_proven, -np.inf).max(axis=-1)
    return np.where(wins, 1.0, np.where(settled, best, np.nan)).astype(np.float32)


def _propagate_proofs(tree: search_tree.Tree, trees: np.ndarray, path_node: np.ndarray, path_action: np.ndarray,
                      depth: np.ndarray, leaf: np.ndarray) -> None:
    """Carry newly proven leaves up their paths (MCTS-solver), stopping at the first parent that stays open."""
    i = np.flatnonzero(depth > 0)
    last = depth[i] - 1
    i = i[~np.isnan(tree.proven[trees[i], leaf[i]])
          & np.isnan(tree.edge_proven[trees[i], path_node[i, last], path_action[i, last]])]
    child, d = leaf[i], depth[i] - 1
    while i.size:
        b, node, action = trees[i], path_node[i, d], path_action[i, d]
        value = -tree.proven[b, child]
        tree.edge_proven[b, node, action] = value
        tree.score_bias[b, node, action] = np.where(value == 1, _WIN_BIAS, np.where(value == -1, _LOSS_BIAS, 0))
        derived = _proven_from_edges(tree.edge_proven[b, node], tree.legal_mask[b, node])
        newly = ~np.isnan(derived) & np.isnan(tree.proven[b, node])
        tree.proven[b[newly], node[newly]] = derived[newly]
        up = newly & (d > 0)
        i, child, d = i[up], node[up], d[up] - 1


def simulate(tree: search_tree.Tree, evaluator: search_tree.Evaluator, config: search_tree.SearchConfig,
             kernels: mcts_numba.Kernels | None = None) -> int:
    """One batched step: ``num_parallel`` leaves per tree, one network call, backup; returns the simulations added
    over all trees.  With ``kernels`` (``mcts_numba.compile_kernels()``) the step runs compiled, to the same tree."""
    if kernels is not None:
        return kernels.simulate(tree, evaluator, config)
    k = config.num_parallel
    bsz = tree.batch_size
    tree.ensure_capacity(k)
    virtual_loss = config.virtual_loss if k > 1 else 0.0
    path_node = np.zeros((k, bsz, _MAX_DEPTH), np.intp)
    path_action = np.zeros((k, bsz, _MAX_DEPTH), np.intp)
    depth = np.zeros((k, bsz), np.intp)
    if bsz == 1:
        _select_one(tree, config, virtual_loss, path_node, path_action, depth)
        path_node, path_action, depth = path_node[:, 0], path_action[:, 0], depth[:, 0]
        trees = np.zeros(k, np.intp)
        leaf, open_leaves = _add_leaves_one(tree, path_node, path_action, depth)
        if open_leaves.size:
            search_tree.evaluate_nodes(tree, np.zeros(open_leaves.size, np.intp), open_leaves, evaluator)
    else:
        _select(tree, config, virtual_loss, path_node, path_action, depth)
        trees = np.tile(np.arange(bsz), k)
        path_node = path_node.reshape(k * bsz, _MAX_DEPTH)
        path_action = path_action.reshape(k * bsz, _MAX_DEPTH)
        depth = depth.reshape(-1)
        leaf = _add_leaves(tree, trees, path_node, path_action, depth)
        search_tree.expand(tree, trees, leaf, evaluator)
    proven = tree.proven[trees, leaf]
    leaf_value = np.where(np.isnan(proven), tree.net_value[trees, leaf], proven).astype(np.float32)
    _backup(tree, trees, path_node, path_action, depth, leaf_value, virtual_loss)
    _propagate_proofs(tree, trees, path_node, path_action, depth, leaf)
    return int(trees.size)


def search(tree: search_tree.Tree, evaluator: search_tree.Evaluator, config: search_tree.SearchConfig, *,
           num_simulations: int | None = None, deadline: float | None = None, rng: np.random.Generator | None = None,
           kernels: mcts_numba.Kernels | None = None) -> int:
    """Run simulations on every tree from its current root; returns simulations per tree.

    Stops after ``num_simulations`` (default ``config.num_simulations``) per tree, at the
    ``time.perf_counter()`` ``deadline``, or once every root is proven.  ``rng`` mixes Dirichlet noise
    into the root priors (self-play); without it the search is deterministic.  ``kernels``: see ``simulate``."""
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
        simulate(tree, evaluator, config, kernels)
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
