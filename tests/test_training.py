"""Config, self-play records, replay window, and a training run that survives kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_consistent_records

from connectx_az import config, game, mcts, replay, selfplay, solver
from connectx_az.network import CheckpointError, NetConfig, PolicyValueNet, TorchEvaluator, load_checkpoint

ROOT = Path(__file__).resolve().parents[1]


def test_overrides_and_unknown_keys() -> None:
    cfg = config.make_config("smoke", overrides=["mcts.num_simulations=40", "train.lr=0.01", "train.dedupe=false"])
    assert cfg.mcts.num_simulations == 40 and cfg.train.lr == 0.01 and cfg.train.dedupe is False
    with pytest.raises(config.ConfigError, match="valid keys: .*mcts.num_simulations"):
        config.make_config("smoke", overrides=["mcts.simulations=40"])
    with pytest.raises(config.ConfigError, match="choose one of: smoke, cpu, gpu"):
        config.make_config("huge")
    with pytest.raises(config.ConfigError, match="expected a int"):
        config.make_config("smoke", overrides=["mcts.num_simulations=lots"])


def test_config_round_trips_through_json(tmp_path: Path) -> None:
    cfg = config.make_config("cpu", overrides=["seed=5"])
    config.save_config(cfg, tmp_path)
    assert config.load_config(tmp_path) == cfg


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
    assert cfg.mcts.gumbel is True and cfg.mcts.gumbel_considered == 4
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
    with pytest.raises(config.ConfigError, match="gumbel_considered"):
        config.make_config("smoke", overrides=["mcts.gumbel_considered=0"])


def test_replay_window_mirrors_and_dedupes(tmp_path: Path) -> None:
    obs = np.zeros((3, 2, 6, 7), np.uint8)
    obs[:, 0, 5, 0] = 1  # the same position three times: a stone in the bottom-left corner
    policy = np.array([[1, 0, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0, 0]], np.float32)
    value = np.array([1, -1, 0], np.float32)
    record = selfplay.GameRecord(obs, policy, value, value, 3, 1)
    replay.write_shard(tmp_path, 0, [record])
    data = replay.load_window(tmp_path, up_to_generation=0, num_generations=1, max_positions=100, dedupe=True)
    assert len(data) == 1
    np.testing.assert_allclose(data.policy[0], [1 / 3, 2 / 3, 0, 0, 0, 0, 0], atol=1e-6)
    assert data.value[0] == 0
    batch = data.sample(200, np.random.default_rng(0))
    flipped = batch.obs[:, 0, 5, 6] == 1
    assert 0 < flipped.sum() < 200
    np.testing.assert_allclose(batch.policy[flipped][:, 6], 1 / 3, atol=1e-6)
    assert not list(tmp_path.glob("*.tmp"))


def test_bad_checkpoints_give_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.pt")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(junk)


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "connectx_az.cli", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


SMOKE = ["--preset", "smoke", "--quiet", "--set", "num_generations=4", "--set", "selfplay.num_games=48",
         "--set", "eval_positions=5"]


def test_training_resumes_after_kill_9_without_losing_or_repeating_a_generation(tmp_path: Path) -> None:
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    proc = subprocess.Popen(_cli("train", str(killed), *SMOKE), env=_env(), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # Kill it in the middle of generation 1: after its self-play shard, before it is finished.
    deadline = time.time() + 120
    while not (killed / "replay" / "gen_000001.npz").exists():
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.time() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = load_checkpoint(killed / "checkpoint.pt")[1]["generation"] if (killed / "checkpoint.pt").exists() else 0
    assert before <= 2
    subprocess.run(_cli("train", "--resume", str(killed), "--quiet"), env=_env(), cwd=ROOT, check=True)
    subprocess.run(_cli("train", str(clean), *SMOKE), env=_env(), cwd=ROOT, check=True)

    rows = [json.loads(line) for line in (killed / "metrics.jsonl").read_text().splitlines()]
    assert [r["generation"] for r in rows] == [0, 1, 2, 3]
    assert load_checkpoint(killed / "checkpoint.pt")[1]["generation"] == 4
    # Seeded per generation: the interrupted run made exactly the games of the clean one.
    for g in range(4):
        with np.load(replay.shard_path(killed / "replay", g)) as a:
            with np.load(replay.shard_path(clean / "replay", g)) as b:
                np.testing.assert_array_equal(a["obs"], b["obs"])
                np.testing.assert_array_equal(a["policy"], b["policy"])


def test_new_run_refuses_an_existing_run_folder(tmp_path: Path) -> None:
    cfg = config.make_config("smoke", overrides=["num_generations=1", "eval_positions=0"])
    from connectx_az import train

    train.run(tmp_path / "run", cfg, progress=False)
    with pytest.raises(config.ConfigError, match="already holds a run"):
        train.run(tmp_path / "run", cfg, progress=False)


def test_warm_start_needs_the_same_architecture(tmp_path: Path) -> None:
    from connectx_az import train
    from connectx_az.network import save_checkpoint

    other = tmp_path / "other.pt"
    save_checkpoint(other, PolicyValueNet(NetConfig(num_blocks=2, num_filters=8)))
    cfg = config.make_config("smoke", overrides=["num_generations=1", "eval_positions=0"])
    with pytest.raises(CheckpointError, match="holds a 2x8 network"):
        train.run(tmp_path / "run", cfg, init_model=other, progress=False)


def test_mcts_with_a_network_is_legal_everywhere() -> None:
    net = PolicyValueNet(NetConfig(num_blocks=1, num_filters=8))
    position, mask = game.from_moves("1111112222223")
    tree = mcts.Tree(np.array([position], np.uint64), np.array([mask], np.uint64))
    mcts.search(tree, TorchEvaluator(net), mcts.SearchConfig(num_simulations=50))
    assert game.is_legal(mask, int(mcts.best_cols(tree)[0]))
    assert tree.root_visits()[0, 0] == 0 and tree.root_visits()[0, 1] == 0


def test_cosine_schedule_runs_from_lr_to_lr_min_after_its_start() -> None:
    cfg = config.make_config("smoke", overrides=["train.lr_schedule=cosine", "train.lr=0.002", "train.lr_min=0.0001",
                                                 "train.lr_schedule_start=10"]).train
    assert cfg.lr_at(0, 30) == cfg.lr_at(10, 30) == 0.002
    assert cfg.lr_at(29, 30) == pytest.approx(0.0001)
    rates = [cfg.lr_at(g, 30) for g in range(10, 30)]
    assert all(a > b for a, b in zip(rates, rates[1:], strict=False))
    assert config.make_config("smoke").train.lr_at(29, 30) == config.make_config("smoke").train.lr
    with pytest.raises(config.ConfigError, match="lr_schedule must be one of constant, cosine"):
        config.make_config("smoke", overrides=["train.lr_schedule=linear"])


def test_growing_window_starts_at_one_generation() -> None:
    fixed = config.make_config("cpu").train
    assert [fixed.window_at(g) for g in (0, 5, 50)] == [8, 8, 8]
    growing = config.make_config("cpu", overrides=["train.replay_growth=0.5"]).train
    assert [growing.window_at(g) for g in (0, 1, 2, 6, 14, 50)] == [1, 1, 2, 4, 8, 8]


def test_value_mix_blends_result_and_search_value(tmp_path: Path) -> None:
    obs = np.zeros((2, 2, 6, 7), np.uint8)
    obs[1, 0, 5, 3] = 1
    policy = np.full((2, 7), 1 / 7, np.float32)
    record = selfplay.GameRecord(obs, policy, np.array([1, -1], np.float32), np.array([0.2, -0.6], np.float32), 2, 1)
    replay.write_shard(tmp_path, 0, [record])
    window = {"up_to_generation": 0, "num_generations": 1, "max_positions": 10, "dedupe": False}
    np.testing.assert_allclose(replay.load_window(tmp_path, **window).value, [1, -1])
    np.testing.assert_allclose(replay.load_window(tmp_path, **window, value_mix=0.5).value, [0.6, -0.8], atol=1e-6)


def test_resume_with_overrides_extends_a_run_and_keeps_its_network(tmp_path: Path) -> None:
    from connectx_az import train

    run_dir = tmp_path / "run"
    cfg = config.make_config("smoke", overrides=["num_generations=1", "eval_positions=0"])
    train.run(run_dir, cfg, progress=False)
    longer = config.override(config.load_config(run_dir), ["num_generations=2", "train.lr_schedule=cosine"])
    train.run(run_dir, longer, resume=True, progress=False)
    assert config.load_config(run_dir) == longer
    rows = train.read_metrics(run_dir)
    assert [r["generation"] for r in rows] == [0, 1]
    assert rows[1]["lr"] == pytest.approx(longer.train.lr_min)
    wider = config.override(longer, ["num_generations=3", "net.num_filters=32"])
    with pytest.raises(config.ConfigError, match="keeps its network"):
        train.run(run_dir, wider, resume=True, progress=False)
    assert config.load_config(run_dir) == longer


def test_a_config_saved_before_a_setting_existed_still_matches_its_preset() -> None:
    saved = config.to_dict(config.make_config("cpu", overrides=["seed=3"]))
    del saved["train"]["lr_schedule"], saved["selfplay"]["num_workers"]
    assert config.preset_of(saved) == "cpu"
    assert config.preset_of({**saved, "num_generations": 7}) is None
