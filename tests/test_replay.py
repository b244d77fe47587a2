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


def _generation_shard(replay_dir: Path, generation: int, num_positions: int) -> None:
    """A shard of ``num_positions`` distinct positions whose value target is ``generation / 10`` (the tag read back)."""
    obs = np.zeros((num_positions, 2, 6, 7), np.uint8)
    for i in range(num_positions):
        obs[i, 0].flat[i] = 1  # position i: one stone on cell i
    obs[:, 1, 0, generation] = 1
    value = np.full(num_positions, generation / 10, np.float32)
    replay.write_shard(replay_dir, generation, [selfplay.GameRecord(
        obs, np.full((num_positions, 7), 1 / 7, np.float32), value, value, num_positions, 1)])


def test_the_window_holds_its_generations_newest_first_and_caps_the_positions_from_the_newest(tmp_path: Path) -> None:
    for generation in range(6):  # generation g holds g + 2 positions; gen 5 is a killed run's, past up_to
        _generation_shard(tmp_path, generation, generation + 2)

    def generations(data: replay.ReplayData) -> list[int]:
        return [round(10 * v) for v in data.value]

    window = {"up_to_generation": 4, "num_generations": 3, "dedupe": False}
    assert generations(replay.load_window(tmp_path, **window, max_positions=1000)) == [4] * 6 + [3] * 5 + [2] * 4
    assert generations(replay.load_window(tmp_path, **window, max_positions=8)) == [4] * 6 + [3] * 2
    assert generations(replay.load_window(tmp_path, up_to_generation=0, num_generations=5, max_positions=1000,
                                          dedupe=False)) == [0] * 2
    assert generations(replay.load_window(tmp_path, up_to_generation=5, num_generations=1, max_positions=1000,
                                          dedupe=True)) == [5] * 7


def test_a_growing_window_widens_by_the_growth_a_generation_up_to_its_size() -> None:
    from connectx_az.training.config import TrainConfig

    grows = TrainConfig(replay_generations=4, replay_growth=0.5)
    assert [grows.window_at(g) for g in range(9)] == [1, 1, 2, 2, 3, 3, 4, 4, 4]
    fixed = TrainConfig(replay_generations=4)
    assert [fixed.window_at(g) for g in range(3)] == [4, 4, 4]
