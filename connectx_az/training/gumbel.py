"""Gumbel root selection with sequential halving, for self-play only (never pasted into the submission).

Danihelka et al. 2022 (as mctx's ``gumbel_muzero_policy``): each root draws
Gumbel(0, 1) noise ``g`` and considers the ``m = min(considered, legal moves)``
moves with the largest ``g + logits``.  Simulation ``k`` of the search forces its
root move through ``mcts.search``'s ``root_actions`` hook: among the considered
moves whose visits in this search equal ``_considered_visits(m, budget)[k]``, the
one with the largest ``g + logits + sigma(q)`` (see ``_root_terms``), which spends
the budget by sequential halving.  Below the root PUCT chooses as usual (a
simplification: the paper uses its deterministic improved-policy rule there).
``improved_policy`` is the policy target and ``choose_cols`` the move played.

Arrays are ``[B, 7]`` over the ``B`` roots of an ``mcts.Tree``, seen from the side
to move at each root; the noise is ``float64[B, 7]``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from connectx_az.engine import game, mcts


@dataclass(frozen=True, kw_only=True)
class GumbelConfig:
    """Gumbel root selection for self-play's full searches (``SelfPlayConfig.gumbel``).

    ``enabled`` (off by default) replaces the Dirichlet noise and the
    temperature sampling of the full searches.  ``considered`` is the number
    ``m`` of root moves considered; ``c_visit`` and ``c_scale`` the constants of
    ``sigma(q) = (c_visit + max_b N(b)) * c_scale * q`` (mctx's defaults, 50 and
    0.1: with ``q`` in ``[0, 1]`` a scale of 1 would make the policy targets
    nearly one-hot).
    """

    enabled: bool = False
    considered: int = 16
    c_visit: float = 50.0
    c_scale: float = 0.1

    def __post_init__(self) -> None:
        if self.considered < 1:
            raise ValueError("gumbel.considered must be >= 1")
        if self.c_visit < 0 or self.c_scale <= 0:
            raise ValueError("gumbel.c_visit must be >= 0 and gumbel.c_scale > 0")


def draw_noise(rng: np.random.Generator, batch_size: int) -> np.ndarray:
    """``float64[B, 7]`` Gumbel(0, 1) noise, one row per root."""
    return rng.gumbel(size=(batch_size, game.NUM_ACTIONS))


def search(tree: mcts.Tree, evaluator: mcts.Evaluator, search_config: mcts.SearchConfig, config: GumbelConfig,
           noise: np.ndarray, *, num_simulations: int | None = None, deadline: float | None = None) -> int:
    """``mcts.search`` with the root moves chosen by Gumbel sequential halving; returns simulations per tree.

    ``noise float64[B, 7]`` is each root's Gumbel noise (``draw_noise``); pass
    the same to ``choose_cols``.  No Dirichlet noise is added to the priors.
    """
    budget = search_config.num_simulations if num_simulations is None else num_simulations
    start_visits = tree.root_visits()
    schedule = np.array(_considered_visits(config.considered, max(budget, 1)), np.int64)
    return mcts.search(tree, evaluator, search_config, num_simulations=budget, deadline=deadline,
                       root_actions=lambda t: _root_actions(t, search_config, config, noise, schedule, start_visits))


@functools.lru_cache(maxsize=64)
def _considered_visits(max_considered: int, num_simulations: int) -> tuple[tuple[int, ...], ...]:
    """Sequential halving's visit schedule: row ``m`` (for ``m`` considered moves), entry ``k``.

    Simulation ``k`` goes to a considered move that has exactly ``row[k]``
    visits so far (mctx ``seq_halving.get_table_of_considered_visits``): each
    of ``log2(max_considered)`` phases shares about the same budget among the
    moves still considered, then the better half (at least two) goes on.
    """
    table = []
    for m in range(max_considered + 1):
        if m <= 1:
            table.append(tuple(range(num_simulations)))
            continue
        log2max = math.ceil(math.log2(m))
        sequence: list[int] = []
        visits = [0] * m
        num_considered = m
        while len(sequence) < num_simulations:
            num_extra_visits = max(1, int(num_simulations / (log2max * num_considered)))
            for _ in range(num_extra_visits):
                sequence.extend(visits[:num_considered])
                for i in range(num_considered):
                    visits[i] += 1
            num_considered = max(2, num_considered // 2)
        table.append(tuple(sequence[:num_simulations]))
    return tuple(table)


def _root_terms(tree: mcts.Tree, config: GumbelConfig) -> tuple[np.ndarray, ...]:
    """The root's ``(logits, sigma, legal, visits)``, each ``[B, 7]``, side to move at the root.

    ``logits`` (float64) are ``log(prior)`` on legal moves and ``-inf`` on
    illegal ones.  ``sigma`` (float64) is ``sigma(completed q)`` (mctx
    ``qtransform_completed_by_mix_value``): a visited move's ``q`` is its mean
    value (its proven value where known), an unvisited one takes the mixed
    value ``(v + N * sum_b pi(b) q(b) / sum_b pi(b)) / (1 + N)`` over visited
    ``b``; ``q`` is min-max normalised over the legal moves to ``[0, 1]`` and
    scaled by ``(c_visit + max_b N(b)) * c_scale``.
    """
    b, root = np.arange(tree.batch_size), tree.root
    legal = tree.legal_mask[b, root]
    prior = np.where(legal, np.maximum(tree.prior[b, root].astype(np.float64), 1e-30), 0.0)
    with np.errstate(divide="ignore"):
        logits = np.where(legal, np.log(prior), -np.inf)
    visits = tree.visits[b, root].astype(np.float64)
    visited = visits > 0
    q = np.where(visited, tree.value_sum[b, root] / np.where(visited, visits, 1.0), 0.0)
    proven = tree.edge_proven[b, root].astype(np.float64)
    q = np.where(np.isnan(proven), q, proven)
    visited_prior = np.where(visited, prior, 0.0)
    weighted_q = (visited_prior * q).sum(axis=1) / np.maximum(visited_prior.sum(axis=1), 1e-30)
    num_visits = visits.sum(axis=1)
    mixed = (tree.net_value[b, root] + num_visits * weighted_q) / (1.0 + num_visits)
    completed = np.where(visited, q, mixed[:, None])
    low = np.where(legal, completed, np.inf).min(axis=1, keepdims=True)
    high = np.where(legal, completed, -np.inf).max(axis=1, keepdims=True)
    normalized = (completed - low) / np.maximum(high - low, 1e-8)
    scale = (config.c_visit + visits.max(axis=1, keepdims=True)) * config.c_scale
    return logits, np.where(legal, scale * normalized, 0.0), legal, visits


def _considered_mask(score: np.ndarray, legal: np.ndarray, max_considered: int) -> np.ndarray:
    """``bool[B, 7]``: the ``max_considered`` legal moves of largest ``score`` (fewer if fewer are legal)."""
    order = np.argsort(-np.where(legal, score, -np.inf), axis=1, kind="stable")
    return legal & (order.argsort(axis=1) < max_considered)


def _root_actions(tree: mcts.Tree, search_config: mcts.SearchConfig, config: GumbelConfig, noise: np.ndarray,
                  schedule: np.ndarray, start_visits: np.ndarray) -> np.ndarray:
    """``int[num_parallel, B]``: the root move each walk of the next step must take (see the module doc).

    ``schedule`` is ``_considered_visits`` as an array ``[m + 1, budget]``,
    ``start_visits float32[B, 7]`` the root visits before this search.  A tree
    whose schedule asks for a visit count no considered move has (it can only
    happen past the budget) gets ``-1``: PUCT chooses.
    """
    logits, sigma, legal, visits = _root_terms(tree, config)
    considered = _considered_mask(noise + logits, legal, config.considered)
    score = np.where(considered, noise + logits + sigma, -np.inf)
    num_considered = considered.sum(axis=1)
    counts = (visits - start_visits).astype(np.int64)
    b = np.arange(tree.batch_size)
    actions = np.empty((search_config.num_parallel, tree.batch_size), np.intp)
    for walk in range(search_config.num_parallel):
        k = np.minimum(counts.sum(axis=1), schedule.shape[1] - 1)
        target = schedule[num_considered, k]
        candidate = considered & (counts == target[:, None])
        action = np.where(candidate, score, -np.inf).argmax(axis=1)
        found = candidate.any(axis=1)
        actions[walk] = np.where(found, action, -1)
        counts[b[found], action[found]] += 1
    return actions


def improved_policy(tree: mcts.Tree, config: GumbelConfig) -> np.ndarray:
    """``float32[B, 7]`` improved policy ``softmax(logits + sigma(completed q))`` over the legal moves.

    The policy target of a Gumbel search (Danihelka et al. 2022, eq. 11); see
    ``_root_terms``.  Illegal columns get 0.
    """
    logits, sigma, legal, _ = _root_terms(tree, config)
    return mcts.masked_softmax(logits + sigma, legal)


def choose_cols(tree: mcts.Tree, noise: np.ndarray, config: GumbelConfig) -> np.ndarray:
    """``int64[B]``: the move each root plays after a Gumbel ``search`` with ``noise``.

    As mctx: among the most visited considered moves, the one with the
    largest ``g + logits + sigma(q)``.  Moves proven lost are left out while
    any other move is legal (if every considered move is lost, the others
    compete), and a proven root plays ``mcts.best_cols``' move (a
    proven win is always taken).
    """
    logits, sigma, legal, visits = _root_terms(tree, config)
    considered = _considered_mask(noise + logits, legal, config.considered)
    open_or_won = legal & ~(tree.proven_child_values() == -1)
    candidate = considered & open_or_won
    candidate = np.where(candidate.any(axis=1, keepdims=True), candidate, open_or_won)
    candidate = np.where(candidate.any(axis=1, keepdims=True), candidate, considered)
    most = np.where(candidate, visits, -1.0).max(axis=1, keepdims=True)
    candidate &= visits == most
    cols = np.where(candidate, noise + logits + sigma, -np.inf).argmax(axis=1)
    return np.where(np.isnan(tree.root_proven()), cols, mcts.best_cols(tree))
