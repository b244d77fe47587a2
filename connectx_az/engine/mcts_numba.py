"""``mcts.simulate``'s tree work compiled by numba, where numba imports; ``mcts`` itself is the numpy fallback.

numba is imported inside ``compile_kernels`` alone, which returns ``None`` where it is missing.  A second
copy of the search because numpy's steps over the batch one Python call at a time, ply after ply
(docs/results.md, *Speed*).  The kernels are the same rules as loops over the trees:

- ``_walk_kernel`` is ``mcts._select`` then ``mcts._add_leaves``: the same walks (float64 PUCT, same
  operation order, first of equal maxima), virtual loss, node numbers, and open leaves in ``expand``'s order;
- ``_encode_kernel`` is ``game.encode`` of those leaves;
- ``_backup_kernel`` is the rest of ``mcts.simulate``: ``evaluate_nodes`` (the softmax stays numpy's, for
  the same float32 ``exp``), ``_backup`` (same float32 sums, same order) and ``_propagate_proofs``;
- ``_lookup_kernel`` is ``selfplay.CachedEvaluator``'s memory as an array hash table instead of a dict.

Self-play and ``testsets.pons``'s graded searches pass the kernels to ``mcts.search``; the pasted agent
searches with numpy.  ``tests/test_mcts_numba.py`` holds the two searches equal, node for node and visit
for visit, and the two memories equal, answer for answer."""

from __future__ import annotations

import threading
import time

import numpy as np

from connectx_az.engine import game, search_tree

# game's constants as numpy scalars and arrays: numba compiles them in as constants
_A = game.NUM_ACTIONS
_H1 = game.ROWS + 1
_U = np.uint64
_BOTTOM_BITS = np.array(game.BOTTOM_BITS, np.uint64)
_TOP_BITS = np.array(game.TOP_BITS, np.uint64)
_BOARD_MASK = _U(game.BOARD_MASK)
_ONE = _U(1)
# shift counts as uint64: numba types a uint64 shifted by an int64 as a float
_S1, _S2, _S6, _S7, _S8, _S12, _S14, _S16 = _U(1), _U(2), _U(6), _U(7), _U(8), _U(12), _U(14), _U(16)
#: bit of the solver's bitboard of each cell of a plane laid out as [row from the top, column]
_CELL_BITS = np.array([[_H1 * col + game.ROWS - 1 - row for col in range(game.COLS)] for row in range(game.ROWS)],
                      np.uint64).reshape(-1)
_NUM_CELLS = game.NUM_CELLS
_WIN_BIAS, _LOSS_BIAS = search_tree.WIN_BIAS, search_tree.LOSS_BIAS
_NAN = np.float32(np.nan)
_NEG_INF = np.float32(-np.inf)
_HASH = _U(0x9E3779B97F4A7C15)  # Fibonacci hashing: the key times 2^64 / golden ratio, its top bits
_MAX_DEPTH = search_tree.MAX_DEPTH


def _walk_kernel(visits, value_sum, prior, score_bias, children, is_expanded, proven, node_visits, node_value_sum,
                 net_value, position, mask, legal_mask, root, num_nodes, c_puct, fpu_reduction, virtual_loss,
                 num_walks, path_node, path_action, depth, leaf, open_b, open_node):  # pragma: no cover (compiled)
    """``mcts._select`` and ``mcts._add_leaves`` over every tree; returns how many leaves need the network.

    Walk ``w`` of tree ``b`` is row ``w * B + b`` of ``path_node``/``path_action int64[K*B, D]``, ``depth``
    and ``leaf int64[K*B]``; the open leaves, distinct, by tree then node, go to ``open_b``/``open_node``."""
    bsz = root.shape[0]
    vl = np.float32(virtual_loss)
    ends = np.empty(num_walks, np.int64)
    n_open = 0
    for b in range(bsz):
        for w in range(num_walks):
            r = w * bsz + b
            node = root[b]
            d = 0
            if proven[b, node] != proven[b, node]:  # NaN: not proven
                while True:
                    nv = np.float64(node_visits[b, node])
                    fpu_value = (np.float64(net_value[b, node]) + np.float64(node_value_sum[b, node])) / (1.0 + nv) \
                        - fpu_reduction
                    scale = c_puct * np.sqrt(max(nv, 1.0))
                    best = 0
                    best_score = -np.inf
                    for a in range(_A):
                        n = np.float64(visits[b, node, a])
                        q = np.float64(value_sum[b, node, a]) / n if n > 0 else fpu_value
                        score = q + np.float64(prior[b, node, a]) * (scale / (1.0 + n)) \
                            + np.float64(score_bias[b, node, a])
                        if score > best_score:
                            best = a
                            best_score = score
                    if virtual_loss != 0:
                        visits[b, node, best] += vl
                        value_sum[b, node, best] -= vl
                        node_visits[b, node] += vl
                        node_value_sum[b, node] -= vl
                    path_node[r, d] = node
                    path_action[r, d] = best
                    d += 1
                    nxt = children[b, node, best]
                    if nxt < 0 or not is_expanded[b, nxt] or proven[b, nxt] == proven[b, nxt]:
                        break
                    node = nxt
            depth[r] = d
        # the distinct edges the walks stopped in front of, sorted: their new nodes are numbered in this order
        count = 0
        for w in range(num_walks):
            r = w * bsz + b
            d = depth[r]
            if d > 0 and children[b, path_node[r, d - 1], path_action[r, d - 1]] < 0:
                key = path_node[r, d - 1] * _A + path_action[r, d - 1]
                i = 0
                while i < count and ends[i] < key:
                    i += 1
                if i < count and ends[i] == key:
                    continue
                for j in range(count, i, -1):
                    ends[j] = ends[j - 1]
                ends[i] = key
                count += 1
        first = num_nodes[b]
        for i in range(count):
            parent = ends[i] // _A
            a = ends[i] % _A
            child = first + i
            children[b, parent, a] = child
            m = mask[b, parent]
            pos = position[b, parent] ^ m  # game.play: the new side to move's stones
            m = m | (m + _BOTTOM_BITS[a])
            position[b, child] = pos
            mask[b, child] = m
            stones = pos ^ m  # the mover's (game.mover_stones); game.is_win:
            vertical = stones & (stones >> _S1)
            rising = stones & (stones >> _S6)
            horizontal = stones & (stones >> _S7)
            falling = stones & (stones >> _S8)
            if ((vertical & (vertical >> _S2)) | (rising & (rising >> _S12)) | (horizontal & (horizontal >> _S14))
                    | (falling & (falling >> _S16))) != 0:
                proven[b, child] = -1.0
            elif m == _BOARD_MASK:
                proven[b, child] = 0.0
            else:
                proven[b, child] = _NAN
            for c in range(_A):
                legal = (m & _TOP_BITS[c]) == 0
                legal_mask[b, child, c] = legal
                score_bias[b, child, c] = 0.0 if legal else _NEG_INF
        num_nodes[b] = first + count
        # each walk's leaf; the open ones of this tree, distinct and sorted
        start = n_open
        for w in range(num_walks):
            r = w * bsz + b
            d = depth[r]
            lf = children[b, path_node[r, d - 1], path_action[r, d - 1]] if d > 0 else root[b]
            leaf[r] = lf
            if proven[b, lf] != proven[b, lf] and not is_expanded[b, lf]:
                i = start
                while i < n_open and open_node[i] < lf:
                    i += 1
                if i < n_open and open_node[i] == lf:
                    continue
                for j in range(n_open, i, -1):
                    open_node[j] = open_node[j - 1]
                open_node[i] = lf
                open_b[n_open] = b
                n_open += 1
    return n_open


def _encode_kernel(position, mask, open_b, open_node, count, out):  # pragma: no cover (compiled)
    """``game.encode`` of nodes ``(open_b[i], open_node[i])``, ``i < count``, into ``out uint8[count, 2 * 42]``."""
    for i in range(count):
        own = position[open_b[i], open_node[i]]
        opp = own ^ mask[open_b[i], open_node[i]]
        for cell in range(_NUM_CELLS):
            out[i, cell] = (own >> _CELL_BITS[cell]) & _ONE
            out[i, _NUM_CELLS + cell] = (opp >> _CELL_BITS[cell]) & _ONE


def _backup_kernel(visits, value_sum, prior, score_bias, is_expanded, proven, node_visits, node_value_sum, net_value,
                   legal_mask, edge_proven, open_b, open_node, count, priors, values, num_walks, path_node,
                   path_action, depth, leaf, virtual_loss):  # pragma: no cover (compiled)
    """``mcts.simulate`` after the network: the open leaves' priors and values, the backup, the proofs."""
    for i in range(count):
        b = open_b[i]
        node = open_node[i]
        for a in range(_A):
            prior[b, node, a] = priors[i, a]
        v = values[i]
        if v > 1.0:
            v = np.float32(1.0)
        elif v < -1.0:
            v = np.float32(-1.0)
        net_value[b, node] = v
        is_expanded[b, node] = True
    bsz = net_value.shape[0]
    vl = np.float32(virtual_loss)
    add = np.float32(1.0 - virtual_loss)
    for w in range(num_walks):
        for b in range(bsz):
            r = w * bsz + b
            lf = leaf[r]
            p = proven[b, lf]
            lv = net_value[b, lf] if p != p else p
            for d in range(depth[r]):
                v = -lv if (depth[r] - d) % 2 == 1 else lv
                v = np.float32(v + vl)
                node = path_node[r, d]
                a = path_action[r, d]
                visits[b, node, a] += add
                value_sum[b, node, a] += v
                node_visits[b, node] += add
                node_value_sum[b, node] += v
    for w in range(num_walks):
        for b in range(bsz):
            r = w * bsz + b
            d = depth[r] - 1
            child = leaf[r]
            if d < 0 or proven[b, child] != proven[b, child] \
                    or edge_proven[b, path_node[r, d], path_action[r, d]] == edge_proven[b, path_node[r, d],
                                                                                          path_action[r, d]]:
                continue
            while True:
                node = path_node[r, d]
                a = path_action[r, d]
                value = -proven[b, child]
                edge_proven[b, node, a] = value
                score_bias[b, node, a] = _WIN_BIAS if value == 1 else (_LOSS_BIAS if value == -1 else 0.0)
                wins = False
                settled = True
                best = _NEG_INF
                for c in range(_A):
                    e = edge_proven[b, node, c]
                    if e == 1:
                        wins = True
                    if legal_mask[b, node, c]:
                        if e != e:
                            settled = False
                        elif e > best:
                            best = e
                if not (wins or settled) or proven[b, node] == proven[b, node]:
                    break
                proven[b, node] = 1.0 if wins else best
                if d == 0:
                    break
                child = node
                d -= 1


def _lookup_kernel(keys, table_keys, table_rows, shift, next_row, rows, first):  # pragma: no cover (compiled)
    """Look up position keys ``keys uint64[M]`` in the table, adding the new ones; returns how many are new.

    ``rows[i]`` is key ``i``'s row; new keys get rows ``next_row``, ``next_row + 1``, ... in order of first
    appearance, ``first`` their index in ``keys``.  A key is never 0 (the empty slot).  The table has ``2 **
    (64 - shift)`` slots; the caller keeps it at most half full."""
    last = _U(table_keys.shape[0] - 1)
    n_new = 0
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
                table_rows[slot] = next_row + n_new
                rows[i] = next_row + n_new
                first[n_new] = i
                n_new += 1
                break
            slot = (slot + _ONE) & last
    return n_new


class Kernels:
    """The compiled kernels (``compile_kernels``), and the search step and memory lookup built on them."""

    def __init__(self, walk, encode, backup, lookup) -> None:
        self._walk, self._encode, self._backup, self._lookup = walk, encode, backup, lookup

    def simulate(self, tree: search_tree.Tree, evaluator: search_tree.Evaluator,
                 config: search_tree.SearchConfig) -> int:
        """``mcts.simulate`` compiled: the same tree after the step, the same positions sent to ``evaluator``."""
        k = config.num_parallel
        bsz = tree.batch_size
        tree.ensure_capacity(k)
        virtual_loss = float(config.virtual_loss) if k > 1 else 0.0
        rows = k * bsz
        path_node = np.zeros((rows, _MAX_DEPTH), np.int64)
        path_action = np.zeros((rows, _MAX_DEPTH), np.int64)
        depth, leaf = np.zeros(rows, np.int64), np.zeros(rows, np.int64)
        open_b, open_node = np.zeros(rows, np.int64), np.zeros(rows, np.int64)
        count = self._walk(tree.visits, tree.value_sum, tree.prior, tree.score_bias, tree.children, tree.is_expanded,
                           tree.proven, tree.node_visits, tree.node_value_sum, tree.net_value, tree.position,
                           tree.mask, tree.legal_mask, tree.root, tree.num_nodes, float(config.c_puct),
                           float(config.fpu_reduction), virtual_loss, k, path_node, path_action, depth, leaf,
                           open_b, open_node)
        priors, values = _NO_PRIORS, _NO_VALUES
        if count:
            obs = np.empty((count, 2 * _NUM_CELLS), np.uint8)
            self._encode(tree.position, tree.mask, open_b, open_node, count, obs)
            logits, value = evaluator.evaluate(obs.reshape(count, 2, game.ROWS, game.COLS))
            priors = search_tree.masked_softmax(np.asarray(logits), tree.legal_mask[open_b[:count], open_node[:count]])
            values = np.ascontiguousarray(np.asarray(value, np.float32).reshape(-1))
        self._backup(tree.visits, tree.value_sum, tree.prior, tree.score_bias, tree.is_expanded, tree.proven,
                     tree.node_visits, tree.node_value_sum, tree.net_value, tree.legal_mask, tree.edge_proven,
                     open_b, open_node, count, np.ascontiguousarray(priors), values, k, path_node, path_action,
                     depth, leaf, virtual_loss)
        return rows

    def lookup(self, keys: np.ndarray, table_keys: np.ndarray, table_rows: np.ndarray, next_row: int,
               ) -> tuple[np.ndarray, np.ndarray]:
        """``_lookup_kernel`` of ``keys uint64[M]`` in a table of a power of two slots:
        ``(rows int64[M], first int64[new])``."""
        rows, first = np.empty(len(keys), np.int64), np.empty(len(keys), np.int64)
        shift = _U(64 - (table_keys.shape[0].bit_length() - 1))
        count = self._lookup(np.ascontiguousarray(keys, np.uint64), table_keys, table_rows, shift, next_row, rows,
                             first)
        return rows, first[:count]


_NO_PRIORS = np.zeros((0, _A), np.float32)
_NO_VALUES = np.zeros(0, np.float32)
_COMPILE_LOCK = threading.Lock()
_KERNELS: Kernels | None = None
_ERROR: str | None = None
#: seconds the compile (or the load from numba's cache on disk) took in this process
compile_seconds = 0.0


def compile_kernels(*, cache: bool = False) -> Kernels | None:
    """The kernels, compiled on the first call of the process; ``None`` where numba is missing or fails
    (``kernel_error()`` says why).  ``cache=True`` keeps the compiled code in numba's cache on disk (training's
    workers; not the pasted agent, whose file system may be read-only)."""
    global _KERNELS, _ERROR, compile_seconds
    with _COMPILE_LOCK:
        if _KERNELS is not None or _ERROR is not None:
            return _KERNELS
        start = time.perf_counter()
        try:
            import numba

            try:
                kernels = _compiled(numba, cache)
            except Exception:  # e.g. no folder numba may write its cache to: compile in memory
                if not cache:
                    raise
                kernels = _compiled(numba, False)
        except Exception as exc:  # any compile failure means: search with numpy
            _ERROR = f"{type(exc).__name__}: {exc}"
            return None
        finally:
            compile_seconds = time.perf_counter() - start
        _KERNELS = kernels
        return _KERNELS


def _compiled(numba, cache: bool) -> Kernels:
    jit = numba.njit(cache=cache, nogil=True)
    kernels = Kernels(*(jit(f) for f in (_walk_kernel, _encode_kernel, _backup_kernel, _lookup_kernel)))
    _warm_up(kernels)
    return kernels


def kernel_error() -> str | None:
    """Why the compile failed in this process (``None`` if it did not fail or did not run yet)."""
    return _ERROR


class _Uniform:
    """Equal logits and a zero value: enough to run every kernel once."""

    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((len(obs), _A), np.float32), np.zeros(len(obs), np.float32)


def _warm_up(kernels: Kernels) -> None:
    """Compile every kernel for the argument types the search and the memory pass, on two small trees."""
    tree = search_tree.Tree(np.zeros(2, np.uint64), np.zeros(2, np.uint64), capacity=8)
    search_tree.expand(tree, np.arange(2), tree.root.copy(), _Uniform())
    for parallel in (1, 2):
        kernels.simulate(tree, _Uniform(), search_tree.SearchConfig(num_parallel=parallel))
    kernels.lookup(np.ones(2, np.uint64), np.zeros(4, np.uint64), np.zeros(4, np.int64), 0)
