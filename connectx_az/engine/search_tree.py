"""The search tree as a struct of arrays, its settings, and the expansion of its nodes. numpy only.

After DeepMind's mctx: ``B`` independent trees, ``N`` node slots each, ``A = 7`` actions, linked by
index.  Statistics live on the *edges* ``[B, N, A]``, seen from the side to move at the edge's parent
node.  Terminal positions are scored by the rules (``proven``, from the node's side to move; ``NaN``
while unknown), never by the network, which is seen only through ``Evaluator``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from connectx_az.engine import game

A = game.NUM_ACTIONS


_UNKNOWN = np.float32(np.nan)
#: added to the PUCT score of a move into a proven position (``Tree.score_bias``): a win first, a loss last
WIN_BIAS = np.float32(1e9)
LOSS_BIAS = np.float32(-1e6)
#: the longest walk from a root: one edge a stone, and one more
MAX_DEPTH = game.NUM_CELLS + 1


class Evaluator(Protocol):
    """Anything that scores positions: a torch net, onnxruntime, numpy, a test double."""

    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``obs uint8[M,2,6,7]`` -> ``(logits float32[M,7], value float32[M])``, side to move."""
        ...


@dataclass(frozen=True, kw_only=True)
class SearchConfig:
    """Search hyper-parameters; values on the ``[-1, 1]`` scale (loss to win), side to move at the edge's parent.

    ``c_puct`` weighs the prior in PUCT (Silver et al. 2017): ``score = Q + c_puct * P *
    sqrt(max(N_parent, 1)) / (1 + N_child)``, ``N_parent`` the sum of the node's edge visits.
    First-play urgency (Leela-style): an unvisited edge takes ``Q = (the parent's mean of its net value
    and backed-up values) - fpu_reduction``.  A constant published for a ``[0, 1]`` scale doubles here
    (``c_puct`` 1.5 -> 3.0, a reduction 0.1 -> 0.2).  Root noise (self-play, ``add_root_noise``): the
    root prior becomes ``(1 - dirichlet_fraction) * P + dirichlet_fraction * Dir(dirichlet_alpha)``."""

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
        if not -2 <= self.fpu_reduction <= 2:
            raise ValueError("fpu_reduction must be in [-2, 2] (values are on the [-1, 1] scale)")
        if self.dirichlet_alpha <= 0 or not 0 <= self.dirichlet_fraction <= 1:
            raise ValueError("dirichlet_alpha must be > 0 and dirichlet_fraction in [0, 1]")
        if self.num_parallel < 1:
            raise ValueError("num_parallel must be >= 1")


class Tree:
    """``B`` search trees of up to ``capacity`` (``N``) nodes each; node 0 of each is its first root.  Node arrays
    are ``[B, N]``, edge arrays ``[B, N, A]``; ``root`` is where the next search starts."""

    # nodes [B, N]
    position: np.ndarray  #: uint64 bitboard of the side to move's stones
    mask: np.ndarray  #: uint64 bitboard of every stone
    net_value: np.ndarray  #: float32, the evaluator's value, side to move
    is_expanded: np.ndarray  #: bool, priors and net value set
    proven: np.ndarray  #: float32 +1/0/-1 from the side to move, NaN while unknown
    node_visits: np.ndarray  #: float32, the sum of the node's edge ``visits``
    node_value_sum: np.ndarray  #: float32, the sum of the node's edge ``value_sum``, side to move
    # edges [B, N, A]
    children: np.ndarray  #: int32 node reached by the move, -1 = not created
    legal_mask: np.ndarray  #: bool, the column has room
    prior: np.ndarray  #: float32 probabilities, 0 for illegal columns
    visits: np.ndarray  #: float32, from the parent's side to move
    value_sum: np.ndarray  #: float32, from the parent's side to move
    edge_proven: np.ndarray  #: float32 ``-proven`` of the child: the move's proven value for the parent, NaN unknown
    score_bias: np.ndarray  #: float32 added to the PUCT score: -inf illegal, +1e9 proven win, -1e6 proven loss, else 0
    # trees [B]
    root: np.ndarray  #: int32
    num_nodes: np.ndarray  #: int32

    def __init__(self, position: np.ndarray, mask: np.ndarray, capacity: int = 64) -> None:
        position = np.atleast_1d(np.asarray(position, dtype=np.uint64))
        mask = np.atleast_1d(np.asarray(mask, dtype=np.uint64))
        if position.shape != mask.shape or position.ndim != 1:
            raise ValueError("position and mask must be 1-d arrays of the same length")
        b = position.shape[0]
        nodes, edges = (b, 0), (b, 0, A)  # no slots yet: ``_grow`` gives them their fill values
        self.position, self.mask = np.zeros(nodes, np.uint64), np.zeros(nodes, np.uint64)
        self.net_value, self.is_expanded = np.zeros(nodes, np.float32), np.zeros(nodes, bool)
        self.proven = np.zeros(nodes, np.float32)
        self.node_visits, self.node_value_sum = np.zeros(nodes, np.float32), np.zeros(nodes, np.float32)
        self.children, self.legal_mask = np.zeros(edges, np.int32), np.zeros(edges, bool)
        self.prior, self.visits, self.value_sum = (np.zeros(edges, np.float32) for _ in range(3))
        self.edge_proven, self.score_bias = np.zeros(edges, np.float32), np.zeros(edges, np.float32)
        self.root = np.zeros(b, np.int32)
        self.num_nodes = np.ones(b, np.int32)
        self._grow(max(int(capacity), 2))
        self._init_nodes(np.arange(b), np.zeros(b, np.intp), position, mask)

    def _grow(self, n: int) -> None:
        """Give every tree ``n`` node slots, keeping its nodes; the new slots hold each array's fill."""
        self.position, self.mask = _grown(self.position, n, 0), _grown(self.mask, n, 0)
        self.net_value, self.is_expanded = _grown(self.net_value, n, 0), _grown(self.is_expanded, n, False)
        self.proven = _grown(self.proven, n, _UNKNOWN)
        self.node_visits, self.node_value_sum = _grown(self.node_visits, n, 0), _grown(self.node_value_sum, n, 0)
        self.children, self.legal_mask = _grown(self.children, n, -1), _grown(self.legal_mask, n, False)
        self.prior, self.visits = _grown(self.prior, n, 0), _grown(self.visits, n, 0)
        self.value_sum = _grown(self.value_sum, n, 0)
        self.edge_proven, self.score_bias = _grown(self.edge_proven, n, _UNKNOWN), _grown(self.score_bias, n, 0)

    def _init_nodes(self, b: np.ndarray, node: np.ndarray, position: np.ndarray, mask: np.ndarray) -> None:
        """Fill the rules-derived fields of new nodes ``(b[i], node[i])``."""
        legal = game.legal_mask(mask)
        self.position[b, node] = position
        self.mask[b, node] = mask
        self.proven[b, node] = _terminal_value(position, mask)
        self.legal_mask[b, node] = legal
        self.score_bias[b, node] = np.where(legal, np.float32(0), np.float32(-np.inf))

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
        self._grow(max(need, 2 * self.capacity))

    def root_visits(self) -> np.ndarray:
        """``float32[B, 7]`` visit counts of the root edges."""
        b = np.arange(self.batch_size)
        return self.visits[b, self.root].copy()

    def root_value(self) -> np.ndarray:
        """``float32[B]`` mean value of each root, side to move (proven value where known)."""
        b = np.arange(self.batch_size)
        root = self.root
        mean = (self.net_value[b, root] + self.node_value_sum[b, root]) / (1.0 + self.node_visits[b, root])
        proven = self.proven[b, root]
        return np.where(np.isnan(proven), mean, proven).astype(np.float32)

    def root_proven(self) -> np.ndarray:
        """``float32[B]`` proven root value (+1/0/-1, side to move) or NaN."""
        return self.proven[np.arange(self.batch_size), self.root].copy()

    def proven_child_values(self) -> np.ndarray:
        """``float32[B, 7]`` proven value of each root move for the side to move, NaN if unknown."""
        return self.edge_proven[np.arange(self.batch_size), self.root].copy()

    def advance(self, index: int, cols: list[int]) -> bool:
        """Move tree ``index``'s root down the played ``cols``, keeping the subtree; False (the root unchanged) when a
        column leads to a node the tree never created."""
        node = int(self.root[index])
        for col in cols:
            child = int(self.children[index, node, col])
            if child < 0:
                return False
            node = child
        self.root[index] = node
        return True


def _grown(old: np.ndarray, n: int, fill: float) -> np.ndarray:
    """``old`` (``[B, M, ...]``) with ``n`` slots on its node axis: its own first, then ``fill``."""
    grown = np.full((old.shape[0], n) + old.shape[2:], fill, old.dtype)
    grown[:, : old.shape[1]] = old
    return grown


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


def expand(tree: Tree, b: np.ndarray, node: np.ndarray, evaluator: Evaluator) -> None:
    """Evaluate nodes ``(b[i], node[i])`` in one call, setting priors and net values; proven nodes are skipped."""
    live = np.isnan(tree.proven[b, node]) & ~tree.is_expanded[b, node]
    if not live.any():
        return
    key = np.unique(b[live].astype(np.int64) * tree.capacity + node[live])
    evaluate_nodes(tree, key // tree.capacity, key % tree.capacity, evaluator)


def evaluate_nodes(tree: Tree, b: np.ndarray, node: np.ndarray, evaluator: Evaluator) -> None:
    """``expand`` for distinct open nodes, in the order given (``expand`` sorts them)."""
    position, mask = tree.position[b, node], tree.mask[b, node]
    logits, value = evaluator.evaluate(game.encode(position, mask))
    tree.prior[b, node] = masked_softmax(np.asarray(logits), tree.legal_mask[b, node])
    tree.net_value[b, node] = np.clip(np.asarray(value, np.float32).reshape(-1), -1.0, 1.0)
    tree.is_expanded[b, node] = True


def add_root_noise(tree: Tree, rng: np.random.Generator, config: SearchConfig) -> None:
    """Mix Dirichlet(``config.dirichlet_alpha``) noise over the legal moves into each root's prior (self-play)."""
    b = np.arange(tree.batch_size)
    root = tree.root
    legal = tree.legal_mask[b, root]
    gamma = rng.gamma(config.dirichlet_alpha, size=legal.shape) * legal
    noise = gamma / np.maximum(gamma.sum(axis=1, keepdims=True), 1e-12)
    frac = config.dirichlet_fraction
    tree.prior[b, root] = ((1 - frac) * tree.prior[b, root] + frac * noise).astype(np.float32)
