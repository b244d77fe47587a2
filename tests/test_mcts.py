"""Search: tactics, visits worked out by hand, proofs, golden trees, symmetry, batching and tree reuse.

Every test runs twice through the ``search_path`` fixture (tests/conftest.py): the search as plain Python, then
compiled by numba; the same functions either way."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import UniformEvaluator

from connectx_az.engine import game, mcts, search_tree

pytestmark = pytest.mark.usefixtures("search_path")

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


def test_a_finished_game_is_scored_by_the_rules_and_not_searched() -> None:
    # x has four in a row: o, to move, has lost; a full board without four in a row is a draw
    won = game.from_moves("1212121")
    drawn = game.from_moves("666165577462463234152541333211132724554777")
    assert game.outcome(*won) == -1 and game.outcome(*drawn) == 0
    evaluator = UniformEvaluator()
    tree = _tree(won, drawn)
    assert mcts.search(tree, evaluator, search_tree.SearchConfig(num_simulations=50)) == 0
    assert tree.root_proven().tolist() == [-1, 0] and evaluator.num_positions == 0


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


def render(tree: search_tree.Tree, b: int = 0) -> str:
    """Tree ``b`` as text, depth first from its root: one line a visited edge, ``col visits mean-value [proven]``,
    indented by depth (columns 0-based, values from the side to move at the edge's parent)."""
    lines: list[str] = []

    def walk(node: int, depth: int) -> None:
        for col in range(game.COLS):
            n = float(tree.visits[b, node, col])
            if n > 0:
                proven = tree.edge_proven[b, node, col]
                mark = "" if np.isnan(proven) else f" proven {int(proven):+d}"
                lines.append(f"{'  ' * depth}{col} {n:g} {tree.value_sum[b, node, col] / n:+.3f}{mark}")
                child = int(tree.children[b, node, col])
                if child >= 0:
                    walk(child, depth + 1)

    walk(int(tree.root[b]), 0)
    return "\n".join(lines)


def test_visits_worked_out_by_hand_first_play_urgency() -> None:
    """Equal priors (1/7) and value 0 everywhere, c_puct 2, fpu_reduction 0.2, from the empty board.

    Simulation 1: nothing visited, every move scores FPU -0.2 + 2 * 1/7 = 0.086: the first, column 0.
    Simulation 2 (1 visit at the root): column 0 scores Q 0 + 2 * 1 * 1/7 / 2 = 0.143, the others
    -0.2 + 0.286 = 0.086: column 0 again, on to column 0 of its (expanded) child.
    Simulation 3 (2 visits, scale 2 sqrt 2 = 2.83): column 0 0.135, the others 0.204: column 1; then at
    N visits the unvisited score -0.2 + 2 sqrt(N) / 7 against 2 sqrt(N) / 7 / 2 for a once-visited move, so
    columns 2 to 6 follow in order.  Without the reduction, simulation 2 already prefers column 1."""
    config = search_tree.SearchConfig(num_simulations=2, c_puct=2.0, fpu_reduction=0.2)
    tree = _tree(game.initial())
    mcts.search(tree, UniformEvaluator(), config)
    assert tree.root_visits()[0].tolist() == [2, 0, 0, 0, 0, 0, 0]
    assert int(tree.num_nodes[0]) == 3 and tree.visits[0, int(tree.children[0, 0, 0]), 0] == 1
    mcts.search(tree, UniformEvaluator(), config, num_simulations=6)
    assert tree.root_visits()[0].tolist() == [2, 1, 1, 1, 1, 1, 1]
    no_reduction = _tree(game.initial())
    mcts.search(no_reduction, UniformEvaluator(), search_tree.SearchConfig(num_simulations=7, fpu_reduction=0.0))
    assert no_reduction.root_visits()[0].tolist() == [1, 1, 1, 1, 1, 1, 1]


def test_visits_worked_out_by_hand_virtual_loss() -> None:
    """Two walks a step, virtual loss 1, equal priors, value 0.  Walk 1 takes column 0 (all tie) and leaves a
    lost visit on it: the root then holds 1 visit and a value sum of -1.  Walk 2: column 0 scores Q -1 + 2 *
    1/7 / 2 = -0.857, the others FPU (0 - 1) / 2 - 0.2 + 2/7 = -0.414: column 1.  Both leaves go to the
    network in one call; the backup takes the virtual loss back: 1 visit of value 0 on each."""
    evaluator = UniformEvaluator()
    tree = _tree(game.initial())
    sims = mcts.search(tree, evaluator, search_tree.SearchConfig(num_simulations=2, num_parallel=2))
    assert sims == 2 and evaluator.num_calls == 2 and evaluator.num_positions == 3  # the root, then 2 leaves
    assert tree.root_visits()[0].tolist() == [1, 1, 0, 0, 0, 0, 0]
    assert tree.value_sum[0, 0].tolist() == [0] * 7 and tree.node_visits[0, 0] == 2 and tree.node_value_sum[0, 0] == 0


def _puct_choice(score_bias: list[float], fpu_reduction: float) -> int:
    """The move ``_walk`` picks at a lone root: 4 visits of mean +0.5 on column 0, a net value of 0.5, equal
    priors, c_puct 1.5."""
    row = lambda values: np.array([values], np.float32)  # noqa: E731
    path_node, path_action = np.zeros((1, 3), np.int64), np.zeros((1, 3), np.int64)
    depth = np.zeros(1, np.int64)
    mcts._walk(row([4.0] + [0.0] * 6), row([2.0] + [0.0] * 6), row([1 / 7] * 7), row(score_bias),
               np.full((1, 7), -1, np.int32), np.ones(1, bool), np.full(1, np.nan, np.float32),
               np.array([4.0], np.float32), np.array([2.0], np.float32), np.array([0.5], np.float32), 0, 1.5,
               fpu_reduction, 0.0, path_node, path_action, depth)
    assert depth[0] == 1 and path_node[0, 0] == 0
    return int(path_action[0, 0])


def test_the_move_with_the_best_prior_term_wins_a_tie_of_values() -> None:
    """PUCT at a node with 4 visits of mean +0.5 on column 0 and a net value 0.5: an unvisited move scores the
    parent's mean (0.5 + 2) / 5 = 0.5 less the reduction, plus 1/7 * 1.5 * 2; column 0 scores 0.5 + 1/7 * 1.5 *
    2 / 5.  A reduction of 0.2 leaves the unvisited first (0.729 > 0.586), one of 0.4 not (0.529)."""
    assert _puct_choice([0.0] * 7, 0.2) == 1
    assert _puct_choice([0.0] * 7, 0.4) == 0
    # a move into a proven win outranks everything, an illegal one nothing
    assert _puct_choice([0.0, 0.0, 0.0, 1e9, 0.0, 0.0, 0.0], 0.2) == 3
    assert _puct_choice([0.0] + [-np.inf] * 6, 0.2) == 0


def test_a_proof_three_plies_deep_is_carried_to_the_root() -> None:
    # x to move: column 3 makes an open three on the bottom row (columns 1-3, 0 and 4 empty): o cannot block
    # both ends.  Every o reply is proven lost by x's win after it, so column 3 is proven won, so the root.
    position, mask = game.from_moves("2233")
    assert game.to_ascii(position, mask).splitlines()[-2:] == [".oo....", ".xx...."]
    tree = _tree((position, mask))
    sims = mcts.search(tree, UniformEvaluator(), search_tree.SearchConfig(num_simulations=5000))
    assert tree.root_proven()[0] == 1 and sims < 5000
    assert tree.proven_child_values()[0, 3] == 1 and mcts.best_cols(tree)[0] in (0, 3)
    child = int(tree.children[0, tree.root[0], int(mcts.best_cols(tree)[0])])
    assert tree.proven[0, child] == -1  # o, to move there, is proven lost


@pytest.mark.parametrize("num_parallel", [1, 8])
def test_cached_sums_and_proofs_agree_with_the_edges(num_parallel: int) -> None:
    tree = _tree(game.from_moves("43443322"), game.from_moves("41526"), game.initial())
    mcts.search(tree, SymmetricEvaluator(6), search_tree.SearchConfig(num_simulations=400, num_parallel=num_parallel))
    for b in range(tree.batch_size):
        n = int(tree.num_nodes[b])
        np.testing.assert_array_equal(tree.node_visits[b, :n], tree.visits[b, :n].sum(axis=1))
        np.testing.assert_allclose(tree.node_value_sum[b, :n], tree.value_sum[b, :n].sum(axis=1), atol=1e-3)
        np.testing.assert_array_equal(tree.legal_mask[b, :n], game.legal_mask(tree.mask[b, :n]))
        terminal = [game.outcome(int(p), int(m)) for p, m in zip(tree.position[b, :n], tree.mask[b, :n], strict=True)]
        leaves = tree.children[b, :n].max(axis=1) < 0
        np.testing.assert_array_equal(tree.proven[b, :n][leaves],
                                      np.array([np.nan if t is None else t for t in terminal], np.float32)[leaves])
        child = tree.children[b, :n]
        expected = np.where(child >= 0, -tree.proven[b, np.maximum(child, 0)], np.nan)
        np.testing.assert_array_equal(tree.edge_proven[b, :n], expected)
        bias = np.where(expected == 1, 1e9, np.where(expected == -1, -1e6, 0.0))
        np.testing.assert_array_equal(tree.score_bias[b, :n], np.where(tree.legal_mask[b, :n], bias, -np.inf))
    assert all((~np.isnan(tree.proven[b])).sum() > 10 for b in (0, 1))  # the solver was exercised


def test_the_compiled_win_rule_is_the_games() -> None:
    rng = np.random.default_rng(4)
    stones = rng.integers(0, 1 << 63, 3000, dtype=np.uint64) & np.uint64(game.BOARD_MASK)
    stones &= rng.integers(0, 1 << 63, 3000, dtype=np.uint64)  # sparser boards: both answers occur
    expected = game.is_win(stones)
    assert 0 < expected.sum() < len(stones)
    assert [bool(mcts._is_win(s)) for s in stones] == expected.tolist()


GOLDEN_ONE_LEAF = """\
0 1 -0.287
2 11 +0.149
  0 6 -0.166
    2 5 +0.101
      0 3 -0.224
        2 2 +0.049
          5 1 -0.339
      5 1 -0.250
  5 3 -0.139
    2 2 +0.067
      0 1 -0.250
  6 1 -0.489
4 11 +0.149
  0 1 -0.489
  1 3 -0.139
    4 2 +0.067
      6 1 -0.250
  6 6 -0.166
    4 5 +0.101
      1 1 -0.250
      6 3 -0.224
        4 2 +0.049
          1 1 -0.339
6 1 -0.287"""

GOLDEN_FOUR_LEAVES = """\
0 1 -0.287
2 11 +0.095
  0 5 -0.131
    2 4 +0.041
      0 2 -0.166
        2 1 -0.240
      5 1 -0.250
  5 3 -0.139
    2 2 +0.067
      0 1 -0.250
  6 1 -0.489
4 11 +0.095
  0 1 -0.489
  1 3 -0.139
    4 2 +0.067
      6 1 -0.250
  6 5 -0.131
    4 4 +0.041
      1 1 -0.250
      6 2 -0.166
        4 1 -0.240
6 1 -0.287"""


@pytest.mark.parametrize(("num_parallel", "golden"), [(1, GOLDEN_ONE_LEAF), (4, GOLDEN_FOUR_LEAVES)])
def test_golden_trees(num_parallel: int, golden: str) -> None:
    """Whole trees, recorded from the search at 45a8a96 (its compiled kernels, which this search reproduces bit
    for bit): 24 simulations from "44" with ``SymmetricEvaluator(0)``, one leaf a step, and four with a virtual
    loss of 1.  A change to any rule of the search shows here, edge by edge."""
    tree = _tree(game.from_moves("44"))
    config = search_tree.SearchConfig(num_simulations=24, num_parallel=num_parallel, virtual_loss=1.0)
    mcts.search(tree, SymmetricEvaluator(0), config)
    assert render(tree) == golden


def test_a_tree_kept_across_moves_searches_as_a_fresh_batch_member_does() -> None:
    # The agent's pattern: search, keep the subtree below two plies, search again; alone or beside another tree.
    config = search_tree.SearchConfig(num_simulations=160, num_parallel=8)
    alone, together = _tree(game.from_moves("44")), _tree(game.from_moves("44"), game.from_moves("3"))
    for tree in (alone, together):
        mcts.search(tree, SymmetricEvaluator(7), config)
    col = int(mcts.best_cols(alone)[0])
    reply = int(np.argmax(alone.visits[0, alone.children[0, 0, col]]))
    assert alone.advance(0, [col, reply]) and together.advance(0, [col, reply])
    sims = mcts.search(alone, SymmetricEvaluator(7), config)
    assert mcts.search(together, SymmetricEvaluator(7), config, num_simulations=sims) == sims
    assert render(alone, 0) == render(together, 0)
    n = int(alone.num_nodes[0])
    np.testing.assert_array_equal(alone.visits[0, :n], together.visits[0, :n])


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
