"""Self-play records: consistent targets, openings, the temperature, the cache."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import assert_consistent_records

from connectx_az.engine import game, mcts, search_tree
from connectx_az.training import config, selfplay
from connectx_az.training.network import NetConfig, PolicyValueNet, TorchEvaluator

#: the smoke preset's self-play as it was before the presets carried the recipe: plain games (no random-prefix
#: openings, no forks; tests of those switches set them), 8 games in flight
PLAIN = ["selfplay.prefix_share=0", "selfplay.prefix_max_plies=12", "selfplay.fork_share=0",
         "selfplay.num_parallel_games=8"]


def test_selfplay_records_have_consistent_targets() -> None:
    cfg = config.make_config("smoke", overrides=PLAIN)
    net = PolicyValueNet(cfg.net)
    records, stats = selfplay.play_games(TorchEvaluator(net), 6, cfg.selfplay, cfg.mcts, np.random.default_rng(0))
    assert stats.num_games == 6 == len(records)
    assert_consistent_records(records)


def test_mcts_with_a_network_is_legal_everywhere() -> None:
    net = PolicyValueNet(NetConfig(num_blocks=1, num_filters=8))
    position, mask = game.from_moves("1111112222223")
    tree = search_tree.Tree(np.array([position], np.uint64), np.array([mask], np.uint64))
    mcts.search(tree, TorchEvaluator(net), search_tree.SearchConfig(num_simulations=50))
    assert game.is_legal(mask, int(mcts.best_cols(tree)[0]))
    assert tree.root_visits()[0, 0] == 0 and tree.root_visits()[0, 1] == 0


# --------------------------------------------------------------------------- openings and temperature


def _replay_rules_hold(cols: list[int]) -> None:
    """No prefix move ends the game, and no side to move inside the prefix could have won at once."""
    position, mask = game.initial()
    for ply, col in enumerate(cols):
        assert ply == 0 or game.winning_cols(position, mask) == [], (cols, ply)
        position, mask = game.play(position, mask, col)
        assert game.outcome(position, mask) is None, (cols, ply)


def test_random_prefixes_keep_the_rules_and_spread_over_the_columns() -> None:
    rng = np.random.default_rng(0)
    for num_plies in (0, 1, 7, 12, 20, selfplay.MAX_PREFIX_PLIES):
        for _ in range(60):
            cols = selfplay.random_prefix(rng, num_plies)
            assert len(cols) == num_plies
            _replay_rules_hold(cols)
    # Each move is uniform over the allowed columns: the first one over all seven.
    first = np.bincount([selfplay.random_prefix(rng, 1)[0] for _ in range(3500)], minlength=7) / 3500
    np.testing.assert_allclose(first, 1 / 7, atol=0.025)
    with pytest.raises(ValueError, match="plies"):
        selfplay.random_prefix(rng, selfplay.MAX_PREFIX_PLIES + 1)


# x to move has three in a row at the bottom: a fork from here would leave the win unplayed.
THREAT = """
.......
.......
.......
.......
ooo....
xxx....
"""
# Nobody can win at once; column 6 is full.
QUIET = """
......x
......o
......x
......o
......x
...x..o
"""


def test_forks_branch_with_one_move_and_never_from_a_winning_position() -> None:
    rng = np.random.default_rng(1)
    assert selfplay.fork_position(rng, []) is None
    assert selfplay.fork_position(rng, [game.from_ascii(THREAT)]) is None
    source = game.from_ascii(QUIET)
    children = {game.play(*source, c) for c in game.legal_cols(source[1])}
    assert len(children) == 6
    seen = {selfplay.fork_position(rng, [source]) for _ in range(200)}
    assert seen == children  # every legal move, and only those, leads to a fork


def test_prefix_and_fork_games_start_where_they_say(make_net) -> None:
    cfg = config.make_config("smoke", overrides=[*PLAIN, "selfplay.prefix_share=0.5", "selfplay.fork_share=0.5",
                                                 "selfplay.prefix_max_plies=10", "selfplay.num_parallel_games=3"])
    records, stats = selfplay.play_games(TorchEvaluator(make_net(0)), 16, cfg.selfplay, cfg.mcts,
                                         np.random.default_rng(2))
    assert_consistent_records(records)
    kinds = [r.opening for r in records]
    assert "prefix" in kinds and "fork" in kinds
    assert stats.prefix_rate == kinds.count("prefix") / 16 and stats.fork_rate == kinds.count("fork") / 16
    assert stats.mean_start_ply == np.mean([r.start_ply for r in records])
    assert all(r.start_ply <= 10 for r in records if r.opening == "prefix")
    # A fork starts one move after a position searched in the same call (here all are recorded).
    searched = {game.decode(o) for r in records for o in r.obs}
    for r in (r for r in records if r.opening == "fork"):
        start = game.decode(r.obs[0])
        assert any(game.play(*parent, c) == start for parent in searched
                   if game.num_stones(parent[1]) == r.start_ply - 1 for c in game.legal_cols(parent[1]))
    with pytest.raises(config.ConfigError, match="prefix_share"):
        config.make_config("smoke", overrides=[*PLAIN, "selfplay.prefix_share=0.7", "selfplay.fork_share=0.5"])
    with pytest.raises(config.ConfigError, match="prefix_max_plies"):
        config.make_config("smoke", overrides=[*PLAIN, "selfplay.prefix_max_plies=31"])


def test_given_fork_sources_let_the_first_wave_fork(make_net) -> None:
    # One wave: every game starts before any is searched, so only given sources can be forked from.
    cfg = config.make_config("smoke", overrides=[*PLAIN, "selfplay.fork_share=0.5", "selfplay.num_parallel_games=12"])
    evaluator = TorchEvaluator(make_net(0))
    alone, _ = selfplay.play_games(evaluator, 12, cfg.selfplay, cfg.mcts, np.random.default_rng(4))
    assert all(r.opening == "empty" for r in alone)
    sources = [game.from_moves(moves) for moves in ("4", "44", "3", "453", "1234")]
    records, stats = selfplay.play_games(evaluator, 12, cfg.selfplay, cfg.mcts, np.random.default_rng(4),
                                         sources=sources)
    assert_consistent_records(records)
    forks = [r for r in records if r.opening == "fork"]
    assert forks and stats.fork_rate == len(forks) / 12
    children = {game.play(*source, c) for source in sources for c in game.legal_cols(source[1])}
    assert all(game.decode(r.obs[0]) in children for r in forks)  # one move from a source


def test_switches_off_play_the_same_games() -> None:
    # With no shares and the default temperatures nothing extra is drawn from the generator,
    # so the games do not depend on the settings that are switched off.
    base = config.make_config("smoke", overrides=PLAIN)
    other = config.make_config("smoke", overrides=[*PLAIN, "selfplay.prefix_max_plies=20"])
    net = PolicyValueNet(base.net)
    runs = [selfplay.play_games(TorchEvaluator(net), 4, c.selfplay, c.mcts, np.random.default_rng(3))[0]
            for c in (base, other)]
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a.obs, b.obs)
        np.testing.assert_array_equal(a.policy, b.policy)


def test_sampling_temperature_sharpens_the_visits() -> None:
    probs = np.array([0.5, 0.3, 0.2, 0, 0, 0, 0], np.float32)
    rng = np.random.default_rng(4)
    n = 4000
    for temperature in (1.0, 0.3):
        counts = np.bincount([selfplay.sample_col(probs, temperature, rng) for _ in range(n)], minlength=7)
        expected = probs.astype(np.float64) ** (1 / temperature)
        np.testing.assert_allclose(counts / n, expected / expected.sum(), atol=0.025)
    with pytest.raises(config.ConfigError, match="temperature"):
        config.make_config("smoke", overrides=[*PLAIN, "selfplay.temperature_early=-1"])


def test_the_temperature_draws_the_opening_moves_and_the_rest_are_the_most_visited(make_net) -> None:
    # A fixed net with no root noise: greedy games repeat themselves; drawn at ply 0, they differ.
    evaluator = TorchEvaluator(make_net(0))
    greedy = config.make_config("smoke", overrides=[*PLAIN, "selfplay.temperature_plies=0",
                                                    "mcts.dirichlet_fraction=0"])
    drawn = config.override(greedy, ["selfplay.temperature_plies=1"])
    games = {}
    for name, cfg in (("greedy", greedy), ("drawn", drawn)):
        records, _ = selfplay.play_games(evaluator, 6, cfg.selfplay, cfg.mcts, np.random.default_rng(5))
        assert_consistent_records(records)
        games[name] = {r.obs.tobytes() for r in records}
    assert len(games["greedy"]) == 1 and len(games["drawn"]) > 1
    # after the opening move each game is the greedy game from there: a game is fixed by its first move
    assert len(games["drawn"]) == len({g[: 2 * 6 * 7 * 2] for g in games["drawn"]})


def test_a_proven_root_plays_its_proof_even_where_the_opening_temperature_draws(monkeypatch) -> None:
    # x to move at ply 6 wins at once in column 4 (0-based 3): the search proves the root, and the move is the
    # proof's, though ply 6 is below temperature_plies and the visits are spread over the other columns too.
    cfg = config.make_config("smoke", overrides=[*PLAIN, "selfplay.temperature_plies=8",
                                                 "selfplay.temperature_early=1", "mcts.num_simulations=32"])
    position, mask = game.from_ascii(".......\n" * 5 + "xxx.ooo\n")
    start = game.num_stones(mask)
    monkeypatch.setattr(selfplay, "_new_game", lambda *a: selfplay._Game(position, mask, start, [], [], [],
                                                                         start_ply=start, opening="prefix"))
    records, _ = selfplay.play_games(_SpreadEvaluator(), 24, cfg.selfplay, cfg.mcts, np.random.default_rng(0))
    assert len(records) == 24
    for r in records:
        assert r.num_plies - r.start_ply == 1 and r.value[-1] == 1  # one move: the win
        assert r.policy[0][3] < 1  # the visits were not all on it: a draw from them could miss it


class _SpreadEvaluator:
    """Equal priors and a drawn value everywhere: the search spreads its visits until a proof stops it."""

    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((len(obs), game.NUM_ACTIONS), np.float32), np.zeros(len(obs), np.float32)


class _RowByRowEvaluator:
    """Answers in integer arithmetic, row by row: a position gets the same answer whatever the batch beside it
    (a network does up to its last bits).  Keeps the keys of the positions it was sent, call by call."""

    _WEIGHTS = np.random.default_rng(0).integers(-3, 4, (2 * game.NUM_CELLS, game.NUM_ACTIONS + 1))

    def __init__(self) -> None:
        self.sent: list[list[int]] = []

    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.sent.append(selfplay.position_keys(obs).tolist())
        y = obs.reshape(len(obs), -1).astype(np.int64) @ self._WEIGHTS
        return (y[:, : game.NUM_ACTIONS] / 4).astype(np.float32), np.tanh(y[:, -1] / 8).astype(np.float32)


def _random_positions(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
    positions, masks = [], []
    for _ in range(count):
        position, mask = 0, 0
        for _ in range(int(rng.integers(0, 30))):
            legal = [col for col in range(game.COLS) if game.is_legal(mask, col)]
            position, mask = game.play(position, mask, int(rng.choice(legal)))
        positions.append(position)
        masks.append(mask)
    return np.array(positions, np.uint64), np.array(masks, np.uint64)


def test_position_keys_are_the_solvers_keys() -> None:
    positions, masks = _random_positions(np.random.default_rng(0), 500)
    keys = selfplay.position_keys(game.encode(positions, masks))
    np.testing.assert_array_equal(keys, positions + masks + np.uint64(game.BOTTOM_MASK))
    assert len(set(keys.tolist())) == len(set(zip(positions.tolist(), masks.tolist(), strict=True)))


@pytest.mark.usefixtures("search_path")
def test_the_cache_sends_each_new_position_once_and_answers_as_the_network() -> None:
    positions, masks = _random_positions(np.random.default_rng(1), 6)
    obs = game.encode(positions, masks)
    keys = selfplay.position_keys(obs).tolist()
    assert len(set(keys)) == 6
    inner = _RowByRowEvaluator()
    cached = selfplay.CachedEvaluator(inner, max_positions=4)

    def check(rows: list[int], sent: list[int]) -> None:
        logits, value = cached.evaluate(obs[rows])
        expected_logits, expected_value = _RowByRowEvaluator().evaluate(obs[rows])
        np.testing.assert_array_equal(logits, expected_logits)
        np.testing.assert_array_equal(value, expected_value)
        assert (inner.sent.pop() if sent else []) == [keys[row] for row in sent] and not inner.sent
        assert cached.num_positions <= cached.max_positions

    check([1, 0, 1, 0], sent=[1, 0])  # a repeat within the call is sent once, in first-seen order
    check([0, 2], sent=[2])           # what was seen is answered from memory
    # 3 remembered and 2 more could pass 4: the memory starts again empty before anything is looked up, so
    # no answer found for 1 can be written over by 3's
    check([1, 3], sent=[1, 3])
    check([3, 1], sent=[])
    check([5], sent=[5])
    assert (cached.num_evaluations, cached.num_network_evaluations) == (11, 6)


@pytest.mark.usefixtures("search_path")
def test_the_cache_changes_the_cost_not_the_games() -> None:
    cfg = config.make_config("smoke", overrides=[*PLAIN, "mcts.num_simulations=32"])
    played = {}
    for cache in (0, 200, 1 << 20):
        settings = dataclasses.replace(cfg.selfplay, cache_positions=cache)
        played[cache] = selfplay.play_games(_RowByRowEvaluator(), 8, settings, cfg.mcts, np.random.default_rng(0))
    (plain, plain_stats), (small, small_stats), (full, full_stats) = played.values()
    for records in (small, full):
        assert len(records) == len(plain) == 8
        for a, b in zip(plain, records, strict=True):
            for name in ("obs", "policy", "value", "root_value"):
                np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    asked = plain_stats.num_evaluations
    assert small_stats.num_evaluations == full_stats.num_evaluations == asked == plain_stats.num_network_evaluations
    # a position searched again is not scored again; a small memory, emptied when full, saves less
    assert full_stats.num_network_evaluations < small_stats.num_network_evaluations < asked
    with pytest.raises(config.ConfigError, match="cache_positions"):
        config.make_config("smoke", overrides=["selfplay.cache_positions=-1"])


@pytest.mark.usefixtures("search_path")
@pytest.mark.parametrize("max_positions", [1 << 20, 150])
def test_the_table_grows_and_empties_and_answers_as_the_network(max_positions: int) -> None:
    """Through the table's growth (from 4,096 slots, kept at most half full) and (150) its clears: every answer is
    the network's, and each call sends exactly the positions not held, once each, in first-seen order."""
    rng = np.random.default_rng(7)
    positions, masks = _random_positions(rng, 3000)
    pool = game.encode(positions, masks)
    inner = _RowByRowEvaluator()
    cached = selfplay.CachedEvaluator(inner, max_positions)
    held: set[int] = set()
    for _ in range(40):
        obs = pool[rng.integers(0, len(pool), int(rng.integers(1, 400)))]
        keys = selfplay.position_keys(obs).tolist()
        if len(held) + len(obs) > max_positions:
            held.clear()
        want = list(dict.fromkeys(k for k in keys if k not in held))
        logits, value = cached.evaluate(obs)
        expected_logits, expected_value = _RowByRowEvaluator().evaluate(obs)
        np.testing.assert_array_equal(logits, expected_logits)
        np.testing.assert_array_equal(value, expected_value)
        assert (inner.sent.pop() if want else []) == want and not inner.sent
        held.update(want)
        assert cached.num_positions == len(held) <= max(max_positions, len(obs))
    assert max_positions < 4096 or len(cached._keys) > 4096  # the table grew


@pytest.mark.usefixtures("search_path")
def test_a_failed_network_call_leaves_the_memory_empty() -> None:
    class Failing:
        def evaluate(self, obs):
            raise RuntimeError("out of memory")

    memory = selfplay.CachedEvaluator(Failing())
    obs = game.encode(*game.from_moves("4"))[None]
    with pytest.raises(RuntimeError):
        memory.evaluate(obs)
    assert memory.num_positions == 0
    memory.inner = _RowByRowEvaluator()
    np.testing.assert_array_equal(memory.evaluate(obs)[0], _RowByRowEvaluator().evaluate(obs)[0])
