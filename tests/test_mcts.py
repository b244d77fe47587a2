"""Search: tactics, symmetry, the solver bookkeeping, batching and tree reuse."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import UniformEvaluator

from connectx_az.engine import game, mcts, search_tree


class SymmetricEvaluator:
    """Random but mirror-equivariant: mirroring the board mirrors the logits, keeps the value."""

    def __init__(self, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        half = rng.normal(size=(2, 6, 4))
        self.kernel = np.concatenate([half[:, :, :0:-1], half], axis=2)  # [2, 6, 7], symmetric in dc
        w = rng.normal(size=(2, 6, 7))
        self.value_w = (w + w[:, :, ::-1]) / 2

    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = obs.astype(np.float64)
        padded = np.pad(x, ((0, 0), (0, 0), (0, 0), (3, 3)))
        logits = np.stack([(padded[:, :, :, c:c + 7] * self.kernel).sum(axis=(1, 2, 3)) for c in range(7)], axis=1)
        value = np.tanh((x * self.value_w).sum(axis=(1, 2, 3)) / 4)
        return logits.astype(np.float32), value.astype(np.float32)


def _tree(*positions: tuple[int, int]) -> search_tree.Tree:
    return search_tree.Tree(np.array([p for p, _ in positions], np.uint64),
                            np.array([m for _, m in positions], np.uint64))


def test_takes_an_immediate_win() -> None:
    # x (to move) wins in column 0; o threatens column 2 as well.
    position, mask = game.from_ascii("""
        .......
        .......
        .......
        x.o....
        x.o....
        x.o.o..
    """)
    tree = _tree((position, mask))
    mcts.search(tree, UniformEvaluator(), search_tree.SearchConfig(num_simulations=50))
    assert mcts.best_cols(tree)[0] == 0
    assert tree.root_proven()[0] == 1


def test_blocks_an_immediate_loss() -> None:
    # Side to move (x) must block o's three in column 3.
    position, mask = game.from_moves("4142437")
    assert game.to_ascii(position, mask) == "\n".join(
        [".......", ".......", ".......", "...o...", "...o...", "xxxo..o"])
    tree = _tree((position, mask))
    mcts.search(tree, UniformEvaluator(), search_tree.SearchConfig(num_simulations=300))
    assert mcts.best_cols(tree)[0] == 3
    # Every other move loses at once, and the search has proven it.
    values = tree.proven_child_values()[0]
    assert all(values[c] == -1 for c in range(7) if c != 3)


def test_double_threat_is_proven_lost() -> None:
    position, mask = game.from_moves("41526")  # o (to move) faces open threes on both sides
    tree = _tree((position, mask))
    sims = mcts.search(tree, UniformEvaluator(), search_tree.SearchConfig(num_simulations=2000))
    assert tree.root_proven()[0] == -1
    assert sims < 2000  # the search stops once the root is decided


def test_mirrored_positions_give_mirrored_visits() -> None:
    rng = np.random.default_rng(3)
    evaluator = SymmetricEvaluator()
    config = search_tree.SearchConfig(num_simulations=300)
    for _ in range(5):
        position, mask = game.initial()
        for _ in range(int(rng.integers(2, 12))):
            position, mask = game.play(position, mask, int(rng.choice(game.legal_cols(mask))))
            if game.outcome(position, mask) is not None:
                break
        if game.outcome(position, mask) is not None:
            continue
        tree = _tree((position, mask), game.mirror(position, mask))
        mcts.search(tree, evaluator, config)
        visits = tree.root_visits()
        np.testing.assert_array_equal(visits[0], visits[1][::-1])


def test_batched_trees_match_single_trees() -> None:
    evaluator = SymmetricEvaluator(1)
    config = search_tree.SearchConfig(num_simulations=64)
    positions = [game.from_moves(m) for m in ("4", "44", "3312", "445566")]
    together = _tree(*positions)
    mcts.search(together, evaluator, config)
    for i, pos in enumerate(positions):
        alone = _tree(pos)
        mcts.search(alone, evaluator, config)
        np.testing.assert_array_equal(alone.root_visits()[0], together.root_visits()[i])


def test_one_network_call_per_step_for_all_trees() -> None:
    evaluator = UniformEvaluator()
    tree = _tree(*[game.initial()] * 16)
    mcts.search(tree, evaluator, search_tree.SearchConfig(num_simulations=10))
    assert evaluator.num_calls == 11  # the roots, then one call per simulation step
    assert np.all(tree.root_visits().sum(axis=1) == 10)


@pytest.mark.parametrize("num_parallel", [2, 8])
def test_virtual_loss_batches_leave_consistent_counts(num_parallel: int) -> None:
    evaluator = SymmetricEvaluator(2)
    tree = _tree(game.from_moves("44"))
    sims = mcts.search(tree, evaluator, search_tree.SearchConfig(num_simulations=400, num_parallel=num_parallel))
    visits = tree.root_visits()[0]
    assert visits.sum() == sims
    assert np.all(tree.visits >= 0)
    # Edge visits add up: each node's incoming visits >= the visits of its own edges.
    b = 0
    for node in range(1, int(tree.num_nodes[0])):
        parent_edge = np.argwhere(tree.children[b] == node)
        incoming = tree.visits[b, parent_edge[0][0], parent_edge[0][1]]
        assert tree.visits[b, node].sum() <= incoming


def test_capacity_grows_and_deadline_stops() -> None:
    import time

    tree = search_tree.Tree(np.zeros(1, np.uint64), np.zeros(1, np.uint64), capacity=4)
    sims = mcts.search(tree, UniformEvaluator(), search_tree.SearchConfig(num_simulations=10**9),
                       deadline=time.perf_counter() + 0.2)
    assert 10 < sims < 10**9
    assert tree.capacity >= tree.num_nodes[0]


def test_advance_keeps_the_subtree() -> None:
    tree = _tree(game.initial())
    config = search_tree.SearchConfig(num_simulations=200)
    mcts.search(tree, SymmetricEvaluator(), config)
    col = int(mcts.best_cols(tree)[0])
    reply = int(np.argmax(tree.visits[0, tree.children[0, 0, col]]))
    kept = tree.visits[0, tree.children[0, tree.children[0, 0, col], reply]].sum()
    assert tree.advance(0, [col, reply])
    assert tree.root_visits()[0].sum() == kept
    assert game.num_stones(int(tree.mask[0, tree.root[0]])) == 2
    assert not tree.advance(0, [6, 6, 6, 6, 6])  # a line the tree never explored


def test_root_noise_is_reproducible_and_legal_only() -> None:
    position, mask = game.from_moves("1111112")
    trees = [_tree((position, mask)) for _ in range(2)]
    for tree in trees:
        mcts.search(tree, UniformEvaluator(), search_tree.SearchConfig(num_simulations=20),
                    rng=np.random.default_rng(7))
    np.testing.assert_array_equal(trees[0].prior[0, 0], trees[1].prior[0, 0])
    assert trees[0].prior[0, 0, 0] == 0  # column 1 is full
    assert abs(trees[0].prior[0, 0].sum() - 1) < 1e-5


_TREE_FIELDS = ("position", "mask", "net_value", "is_expanded", "proven", "node_visits", "node_value_sum",
                "children", "legal_mask", "prior", "visits", "value_sum", "edge_proven", "score_bias")


@pytest.mark.parametrize(("num_parallel", "fpu_reduction"), [(1, 0.2), (8, 0.2), (8, -0.3)])
@pytest.mark.parametrize("moves", ["44", "41526", "43443322"])
def test_single_tree_walk_matches_the_batched_walk(moves: str, num_parallel: int, fpu_reduction: float) -> None:
    # One tree takes the scalar walk (_select_one); two trees take the batched one.
    config = search_tree.SearchConfig(num_simulations=240, num_parallel=num_parallel, fpu_reduction=fpu_reduction)
    position = game.from_moves(moves)
    alone = _tree(position)
    together = _tree(position, game.from_moves("3"))
    sims_alone = mcts.search(alone, SymmetricEvaluator(5), config)
    sims_together = mcts.search(together, SymmetricEvaluator(5), config, num_simulations=sims_alone)
    assert sims_together == sims_alone
    assert alone.num_nodes[0] == together.num_nodes[0]
    for name in _TREE_FIELDS:
        np.testing.assert_array_equal(getattr(alone, name)[0], getattr(together, name)[0], err_msg=name)


@pytest.mark.parametrize("num_parallel", [1, 8])
def test_cached_sums_and_proofs_agree_with_the_edges(num_parallel: int) -> None:
    tree = _tree(game.from_moves("43443322"), game.from_moves("41526"), game.initial())
    mcts.search(tree, SymmetricEvaluator(6), search_tree.SearchConfig(num_simulations=400, num_parallel=num_parallel))
    for b in range(tree.batch_size):
        n = int(tree.num_nodes[b])
        np.testing.assert_array_equal(tree.node_visits[b, :n], tree.visits[b, :n].sum(axis=1))
        np.testing.assert_allclose(tree.node_value_sum[b, :n], tree.value_sum[b, :n].sum(axis=1), atol=1e-3)
        np.testing.assert_array_equal(tree.legal_mask[b, :n], game.legal_mask(tree.mask[b, :n]))
        child = tree.children[b, :n]
        expected = np.where(child >= 0, -tree.proven[b, np.maximum(child, 0)], np.nan)
        np.testing.assert_array_equal(tree.edge_proven[b, :n], expected)
        bias = np.where(expected == 1, 1e9, np.where(expected == -1, -1e6, 0.0))
        np.testing.assert_array_equal(tree.score_bias[b, :n], np.where(tree.legal_mask[b, :n], bias, -np.inf))
    assert all((~np.isnan(tree.proven[b])).sum() > 10 for b in (0, 1))  # the solver was exercised


@pytest.mark.parametrize("fpu_reduction", [0.3, -0.4])
def test_scalar_scores_match_the_batched_scores(fpu_reduction: float) -> None:
    # Rows with visited and unvisited edges, illegal and proven moves, and exact ties.
    rng = np.random.default_rng(8)
    config = search_tree.SearchConfig(c_puct=1.7, fpu_reduction=fpu_reduction)
    m = 500
    visits = rng.integers(0, 4, (m, 7)).astype(np.float32) * rng.integers(0, 2, (m, 7))
    value_sum = (rng.uniform(-1, 1, (m, 7)) * visits).astype(np.float32)
    prior = rng.dirichlet(np.ones(7), m).astype(np.float32)
    prior[::3] = np.float32(1 / 7)
    score_bias = rng.choice(np.array([0, 0, 0, 1e9, -1e6, -np.inf], np.float32), (m, 7))
    score_bias[:, 3] = 0
    node_visits = visits.sum(axis=1)
    node_value = rng.uniform(-1, 1, m)
    expected = mcts._puct_score(visits, value_sum, prior, score_bias, node_visits, node_value, config).argmax(axis=1)
    for i in range(m):
        got = mcts._puct_argmax(visits[i].tolist(), value_sum[i].tolist(), prior[i].tolist(), score_bias[i].tolist(),
                                float(node_visits[i]), float(node_value[i]), config.c_puct, config.fpu_reduction)
        assert got == expected[i], i


def test_first_play_urgency_is_relative_to_the_parent() -> None:
    # One node: 4 visits of value +0.5 on column 0, the net's value 0.5; the other columns unvisited.
    visits = np.array([[4, 0, 0, 0, 0, 0, 0]], np.float32)
    value_sum = np.array([[2, 0, 0, 0, 0, 0, 0]], np.float32)
    prior = np.full((1, 7), 1 / 7, np.float32)
    bias = np.zeros((1, 7), np.float32)
    node_value = np.array([0.5 + 2.0])  # net value + backed-up sum: a mean of 0.5 over 1 + 4
    u = 1 / 7 * (1.5 * np.sqrt(4.0))  # the prior term of an unvisited edge at c_puct 1.5
    relative = search_tree.SearchConfig(c_puct=1.5, fpu_reduction=0.2)
    score = mcts._puct_score(visits, value_sum, prior, bias, visits.sum(axis=1), node_value, relative)
    np.testing.assert_allclose(score[0, 1:], 0.5 - 0.2 + u)
    assert score[0, 0] == pytest.approx(0.5 + 1 / 7 * 1.5 * 2 / 5)
    with pytest.raises(ValueError, match="fpu_reduction"):
        search_tree.SearchConfig(fpu_reduction=3.0)


def test_single_tree_walk_matches_the_batched_walk_after_advancing() -> None:
    # The agent's pattern: search, keep the subtree below two plies, search again.
    config = search_tree.SearchConfig(num_simulations=160, num_parallel=8)
    alone, together = _tree(game.from_moves("44")), _tree(game.from_moves("44"), game.from_moves("3"))
    for tree in (alone, together):
        mcts.search(tree, SymmetricEvaluator(7), config)
    col = int(mcts.best_cols(alone)[0])
    reply = int(np.argmax(alone.visits[0, alone.children[0, 0, col]]))
    assert alone.advance(0, [col, reply]) and together.advance(0, [col, reply])
    sims = mcts.search(alone, SymmetricEvaluator(7), config)
    assert mcts.search(together, SymmetricEvaluator(7), config, num_simulations=sims) == sims
    for name in _TREE_FIELDS:
        np.testing.assert_array_equal(getattr(alone, name)[0], getattr(together, name)[0], err_msg=name)



class StoneValues:
    """Equal priors, and a value for the stones on given cells: ``values[cells]`` is what a position holding
    ``x`` (the first player) on every cell of ``cells`` is worth to ``x``, 0 elsewhere; the evaluator gives it
    from the side to move (negated when ``o`` is to move).  ``cells``: ``((player, col), ...)``, the bottom cell
    of ``col`` held by ``player`` (``"x"`` or ``"o"``)."""

    def __init__(self, values: dict[tuple[tuple[str, int], ...], float]) -> None:
        self.values = values

    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        value = np.zeros(len(obs), np.float32)
        for i, planes in enumerate(obs):
            x_to_move = int(planes.sum()) % 2 == 0
            own, opponent = planes[:, -1]  # the bottom row of each plane
            held = {"x": own if x_to_move else opponent, "o": opponent if x_to_move else own}
            worth = sum(v for cells, v in self.values.items() if all(held[p][c] for p, c in cells))
            value[i] = worth if x_to_move else -worth
        return np.zeros((len(obs), 7), np.float32), value


@pytest.mark.parametrize("num_parallel", [1, 8])
def test_the_backup_credits_a_value_one_ply_down_to_the_player_who_moved(num_parallel: int) -> None:
    # x to move.  The net says x's stone at the foot of column 0 is worth +0.8 to x (o, to move after it, hears
    # -0.8), and x's stone at the foot of column 5 -0.8: the search must seek the first move and shun the second.
    tree = _tree(game.from_moves("44"))
    evaluator = StoneValues({(("x", 0),): 0.8, (("x", 5),): -0.8})
    mcts.search(tree, evaluator, search_tree.SearchConfig(num_simulations=200, num_parallel=num_parallel))
    visits = tree.root_visits()[0]
    assert mcts.best_cols(tree)[0] == 0 and visits[0] > 0.5 * visits.sum(), visits
    assert visits[5] == visits.min(), visits
    assert tree.root_value()[0] > 0  # x, to move at the root, expects to gain from column 0


@pytest.mark.parametrize("num_parallel", [1, 8])
def test_the_backup_credits_a_value_two_plies_down_to_the_side_to_move_there(num_parallel: int) -> None:
    # x plays column 0, o replies in column 6: from then on the net says x (to move) stands badly, -0.8.  No other
    # stones have a value.  So after column 0 o must find the reply 6, and x, seeing it, must avoid column 0.
    tree = _tree(game.from_moves("44"))
    evaluator = StoneValues({(("x", 0), ("o", 6)): -0.8})
    mcts.search(tree, evaluator, search_tree.SearchConfig(num_simulations=400, num_parallel=num_parallel))
    visits = tree.root_visits()[0]
    assert visits[0] == visits.min() and mcts.best_cols(tree)[0] != 0, visits
    child = int(tree.children[0, tree.root[0], 0])
    replies = tree.visits[0, child]
    assert replies[6] > 2 * np.delete(replies, 6).max(), replies
    # the edge into column 0 holds a loss for x, the reply 6 a gain for o
    assert tree.value_sum[0, tree.root[0], 0] < 0 < tree.value_sum[0, child, 6]


def test_the_move_played_is_never_one_proven_lost_while_another_is_not() -> None:
    # Root statistics set by hand: column 2 has the most visits, but its subtree was proven lost late; the root
    # itself is still open.  The most visited of the other moves is played.
    tree = _tree(game.from_moves("44"))
    tree.visits[0, 0] = [10, 5, 90, 40, 30, 5, 5]
    tree.edge_proven[0, 0, 2] = -1
    assert np.isnan(tree.root_proven()[0])
    assert mcts.best_cols(tree)[0] == 3
    # once every move (and so the root) is proven lost, the most visited is played all the same
    tree.edge_proven[0, 0] = -1
    tree.proven[0, 0] = -1
    assert mcts.best_cols(tree)[0] == 2
