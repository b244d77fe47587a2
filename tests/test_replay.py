"""The replay window: mirroring, de-duplication, value mixing."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from connectx_az.training import replay, selfplay


def test_replay_window_mirrors_and_dedupes(tmp_path: Path) -> None:
    obs = np.zeros((3, 2, 6, 7), np.uint8)
    obs[:, 0, 5, 0] = 1  # the same position three times: a stone in the bottom-left corner
    policy = np.array([[1, 0, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0, 0]], np.float32)
    value = np.array([1, -1, 0], np.float32)
    record = selfplay.GameRecord(obs, policy, value, value)
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


def test_value_mix_blends_result_and_search_value(tmp_path: Path) -> None:
    obs = np.zeros((2, 2, 6, 7), np.uint8)
    obs[1, 0, 5, 3] = 1
    policy = np.full((2, 7), 1 / 7, np.float32)
    record = selfplay.GameRecord(obs, policy, np.array([1, -1], np.float32), np.array([0.2, -0.6], np.float32))
    replay.write_shard(tmp_path, 0, [record])
    window = {"up_to_generation": 0, "num_generations": 1, "max_positions": 10, "dedupe": False}
    np.testing.assert_allclose(replay.load_window(tmp_path, **window).value, [1, -1])
    np.testing.assert_allclose(replay.load_window(tmp_path, **window, value_mix=0.5).value, [0.6, -0.8], atol=1e-6)
