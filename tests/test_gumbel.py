"""Gumbel root selection for self-play: sequential halving, the improved policy, the move played."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import UniformEvaluator
from test_mcts import _TREE_FIELDS, SymmetricEvaluator, _tree

from connectx_az.engine import game, mcts
from connectx_az.training import gumbel


def test_sequential_halving_schedule_matches_mctx() -> None:
    # mctx seq_halving: m = 4, n = 16 gives two phases: 2 visits to each of 4 moves, then 4 more to each of 2.
    table = gumbel._considered_visits(4, 16)
    assert table[4] == (0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5)
    assert table[1] == tuple(range(16))
    assert all(len(row) == 16 for row in table)


@pytest.mark.parametrize("num_parallel", [1, 4])
@pytest.mark.parametrize(("moves", "considered", "expected"), [
    ("", 4, [6, 6, 2, 2, 0, 0, 0]),      # 7 legal moves, 4 considered
    ("", 16, [5, 5, 2, 1, 1, 1, 1]),     # every legal move considered
    ("1111112", 16, [6, 5, 2, 1, 1, 1]),  # column 0 full: 6 legal moves; the illegal one is never visited
])
def test_gumbel_search_spends_the_budget_by_sequential_halving(moves: str, considered: int, expected: list[int],
                                                                num_parallel: int) -> None:
    position = game.from_moves(moves) if moves else game.initial()
    search = mcts.SearchConfig(num_simulations=16, num_parallel=num_parallel)
    config = gumbel.GumbelConfig(enabled=True, considered=considered)
    together = _tree(position, game.from_moves("3"), game.from_moves("44"))
    noise = gumbel.draw_noise(np.random.default_rng(1), together.batch_size)
    assert gumbel.search(together, SymmetricEvaluator(4), search, config, noise) == 16
    visits = together.root_visits()
    legal = together.legal_mask[np.arange(3), together.root]
    logits = np.log(np.where(legal, together.prior[np.arange(3), together.root], 1e-30))
    for b in range(3):
        assert visits[b].sum() == 16
        assert not visits[b][~legal[b]].any()
        # The visited moves are exactly the top-m of g + logits among the legal ones.
        top = np.argsort(-np.where(legal[b], noise[b] + logits[b], -np.inf))[:min(considered,
                                                                                                   legal[b].sum())]
        assert set(np.flatnonzero(visits[b])) == set(top.tolist())
    assert sorted(visits[0].tolist(), reverse=True)[:len(expected)] == expected
    # The move played is one of the most visited.
    cols = gumbel.choose_cols(together, noise, config)
    assert all(visits[b, cols[b]] == visits[b].max() for b in range(3))
    # One tree alone (the scalar walk) draws the same noise for its root and grows alike.
    alone = _tree(position)
    alone_noise = gumbel.draw_noise(np.random.default_rng(1), alone.batch_size)
    gumbel.search(alone, SymmetricEvaluator(4), search, config, alone_noise)
    np.testing.assert_array_equal(alone_noise[0], noise[0])
    np.testing.assert_array_equal(alone.root_visits()[0], visits[0])


def test_gumbel_policy_is_a_distribution_over_legal_moves_that_follows_q() -> None:
    position, mask = game.from_moves("1111112")  # column 0 is full
    search = mcts.SearchConfig(num_simulations=32)
    config = gumbel.GumbelConfig(enabled=True, considered=4, c_scale=0.1)
    tree = _tree((position, mask), game.initial())
    gumbel.search(tree, SymmetricEvaluator(2), search, config, gumbel.draw_noise(np.random.default_rng(5), 2))
    policy = gumbel.improved_policy(tree, config)
    np.testing.assert_allclose(policy.sum(axis=1), 1, atol=1e-6)
    assert policy[0, 0] == 0
    # Completed Q values give every legal move some mass, visited or not.
    assert np.all(policy[0, 1:] > 0) and np.all(policy[1] > 0)
    # Among visited moves with equal visits, more probability goes with a better mean value.
    visits, q = tree.root_visits(), tree.value_sum[:, 0] / np.maximum(tree.visits[:, 0], 1)
    prior = tree.prior[:, 0]
    num_pairs = 0
    for b in range(2):
        for i in range(7):
            for j in range(7):
                if visits[b, i] == visits[b, j] > 0 and q[b, i] > q[b, j] and prior[b, i] >= prior[b, j]:
                    assert policy[b, i] > policy[b, j]
                    num_pairs += 1
    assert num_pairs >= 2


@pytest.mark.parametrize("seed", range(4))
def test_gumbel_search_takes_an_immediate_win(seed: int) -> None:
    position, mask = game.from_ascii("""
        .......
        .......
        .......
        x.o....
        x.o....
        x.o.o..
    """)
    config = gumbel.GumbelConfig(enabled=True)
    tree = _tree((position, mask))
    noise = gumbel.draw_noise(np.random.default_rng(seed), 1)
    gumbel.search(tree, UniformEvaluator(), mcts.SearchConfig(num_simulations=50), config, noise)
    assert tree.root_proven()[0] == 1
    assert gumbel.choose_cols(tree, noise, config)[0] == mcts.best_cols(tree)[0] == 0
    policy = gumbel.improved_policy(tree, config)[0]
    assert policy.argmax() == 0 and policy[0] > 0.9  # sigma spans (50 + 1) * 0.1 logits


def test_gumbel_cols_avoid_a_move_proven_lost() -> None:
    position = game.from_moves("44")
    config = gumbel.GumbelConfig(enabled=True, considered=2)
    tree = _tree(position)
    noise = gumbel.draw_noise(np.random.default_rng(0), 1)
    gumbel.search(tree, UniformEvaluator(), mcts.SearchConfig(num_simulations=16), config, noise)
    visits = tree.root_visits()[0]
    first = int(gumbel.choose_cols(tree, noise, config)[0])
    # Mark the chosen move proven lost (as the solver would): the other considered move is played.
    tree.edge_proven[0, 0, first] = -1
    second = int(gumbel.choose_cols(tree, noise, config)[0])
    assert second != first and visits[second] > 0


def test_gumbel_is_off_the_agent_search_and_is_checked() -> None:
    # The search the agent and evaluation run has no Gumbel switch at all (was: an rng-less search
    # ignored it): a plain search grows the same tree whatever the self-play settings.
    assert not any("gumbel" in f.name for f in dataclasses.fields(mcts.SearchConfig))
    position = game.from_moves("43443322")
    plain, again = _tree(position), _tree(position)
    mcts.search(plain, SymmetricEvaluator(3), mcts.SearchConfig(num_simulations=100))
    mcts.search(again, SymmetricEvaluator(3), mcts.SearchConfig(num_simulations=100))
    for name in _TREE_FIELDS:
        np.testing.assert_array_equal(getattr(plain, name), getattr(again, name), err_msg=name)
    # A Gumbel search leaves the root priors free of Dirichlet noise.
    noisy = _tree(position)
    gumbel.search(noisy, SymmetricEvaluator(3), mcts.SearchConfig(num_simulations=100),
                  gumbel.GumbelConfig(enabled=True), gumbel.draw_noise(np.random.default_rng(0), 1))
    np.testing.assert_array_equal(noisy.prior[0, 0], plain.prior[0, 0])
    with pytest.raises(ValueError, match="considered"):
        gumbel.GumbelConfig(considered=0)
    with pytest.raises(ValueError, match="c_scale"):
        gumbel.GumbelConfig(c_scale=0)
