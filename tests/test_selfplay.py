"""Self-play records: consistent targets, adjudication, Gumbel policies."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_consistent_records

from connectx_az import config, game, mcts, selfplay, solver
from connectx_az.network import NetConfig, PolicyValueNet, TorchEvaluator


def test_selfplay_records_have_consistent_targets() -> None:
    cfg = config.make_config("smoke")
    net = PolicyValueNet(cfg.net)
    records, stats = selfplay.play_games(TorchEvaluator(net), 6, cfg.selfplay, cfg.mcts, np.random.default_rng(0))
    assert stats.num_games == 6 == len(records)
    assert_consistent_records(records)
    assert all(r.adjudicated_ply == -1 for r in records) and stats.adjudicated_rate == 0  # off by default


def test_adjudication_labels_the_earlier_positions_with_the_solved_result(make_net) -> None:
    empty = 20
    cfg = config.make_config("smoke", overrides=[f"selfplay.adjudicate_empty={empty}"])
    records, stats = selfplay.play_games(TorchEvaluator(make_net(0)), 8, cfg.selfplay, cfg.mcts,
                                         np.random.default_rng(0))
    assert_consistent_records(records)
    adjudicated = [r for r in records if r.adjudicated_ply >= 0]
    assert adjudicated and stats.adjudicated_rate == len(adjudicated) / len(records)
    # only games that reached `empty` empty cells, at the first such position, and by the solver's result
    assert all(r.num_plies > game.NUM_CELLS - empty for r in adjudicated)
    assert all(r.adjudicated_ply == -1 for r in records if r.num_plies <= game.NUM_CELLS - empty)
    judge = solver.Solver()
    for r in adjudicated:
        assert r.adjudicated_ply == game.NUM_CELLS - empty
        score = judge.solve(*game.decode(r.obs[r.adjudicated_ply]), weak=True)
        assert r.adjudicated_result == (score if r.adjudicated_ply % 2 == 0 else -score)
    flips = [r for r in adjudicated if r.adjudicated_result != r.first_player_result]
    assert flips, "no game was blundered after the adjudication: the test does not show the labels change"
    assert stats.adjudication_flip_rate == len(flips) / len(adjudicated)
    with pytest.raises(config.ConfigError, match="adjudicate_empty"):
        config.make_config("smoke", overrides=[f"selfplay.adjudicate_empty={game.NUM_CELLS}"])


def test_gumbel_selfplay_records_improved_policies_over_legal_moves(make_net) -> None:
    cfg = config.make_config("smoke", overrides=["mcts.gumbel=true", "mcts.gumbel_considered=4",
                                                 "mcts.num_simulations=16", "mcts.gumbel_c_scale=0.1"])
    assert cfg.selfplay.gumbel.enabled is True and cfg.selfplay.gumbel.considered == 4
    evaluator = TorchEvaluator(make_net(0))  # fixed weights: its games fill some columns
    records, _ = selfplay.play_games(evaluator, 6, cfg.selfplay, cfg.mcts, np.random.default_rng(0))
    assert len(records) == 6
    assert_consistent_records(records)
    policy = np.concatenate([r.policy for r in records])
    obs = np.concatenate([r.obs for r in records])
    full = obs[:, :, 0, :].any(axis=1)  # row 0 is the top: a stone there fills the column
    assert full.any()  # the check below is exercised
    assert np.all(policy[full] == 0)
    # Completed Q values: every legal move keeps some mass, though only 4 of them were searched.
    assert np.all(policy[~full] > 0)
    again, _ = selfplay.play_games(evaluator, 6, cfg.selfplay, cfg.mcts, np.random.default_rng(0))
    for a, b in zip(records, again, strict=True):
        np.testing.assert_array_equal(a.obs, b.obs)
    with pytest.raises(config.ConfigError, match="expected true or false"):
        config.make_config("smoke", overrides=["mcts.gumbel=maybe"])
    with pytest.raises(config.ConfigError, match="gumbel.considered"):
        config.make_config("smoke", overrides=["mcts.gumbel_considered=0"])


def test_mcts_with_a_network_is_legal_everywhere() -> None:
    net = PolicyValueNet(NetConfig(num_blocks=1, num_filters=8))
    position, mask = game.from_moves("1111112222223")
    tree = mcts.Tree(np.array([position], np.uint64), np.array([mask], np.uint64))
    mcts.search(tree, TorchEvaluator(net), mcts.SearchConfig(num_simulations=50))
    assert game.is_legal(mask, int(mcts.best_cols(tree)[0]))
    assert tree.root_visits()[0, 0] == 0 and tree.root_visits()[0, 1] == 0
