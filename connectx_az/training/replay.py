"""The replay window: one ``.npz`` shard per generation on disk, the newest few in memory.

A shard holds one generation's ``obs uint8[T,2,6,7]``, ``policy float32[T,7]``, ``value float32[T]``
(game result) and ``root_value float32[T]`` (search value; absent from old shards), values from the side to
move.  Shards are written atomically and read with ``allow_pickle=False``; a JSON note beside a shard
(``write_note``) says its self-play finished, so that a resumed run trains on those games instead of playing
them again.  Sampling mirrors each position left-right with probability 1/2; ``dedupe`` averages the targets of
repeated positions."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from connectx_az import files
from connectx_az.engine import game
from connectx_az.training.selfplay import GameRecord

_SHARD = re.compile(r"gen_(\d{6})\.npz$")


@dataclass(frozen=True)
class Batch:
    """Training batch: ``obs float32[B,2,6,7]``, ``policy float32[B,7]``, ``value float32[B]``."""

    obs: np.ndarray
    policy: np.ndarray
    value: np.ndarray


@dataclass(frozen=True)
class ReplayData:
    """All positions of the window: ``obs uint8[N,2,6,7]``, ``policy float32[N,7]``, ``value float32[N]``."""

    obs: np.ndarray
    policy: np.ndarray
    value: np.ndarray

    def __len__(self) -> int:
        return len(self.value)

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        """A uniform sample with random left-right mirroring."""
        idx = rng.integers(0, len(self), size=batch_size)
        obs = self.obs[idx].astype(np.float32)
        policy = self.policy[idx].copy()
        flip = rng.random(batch_size) < 0.5
        obs[flip] = obs[flip, :, :, ::-1]
        policy[flip] = policy[flip, ::-1]
        return Batch(np.ascontiguousarray(obs), np.ascontiguousarray(policy), self.value[idx].copy())


def shard_path(replay_dir: str | Path, generation: int) -> Path:
    return Path(replay_dir) / f"gen_{generation:06d}.npz"


def write_shard(replay_dir: str | Path, generation: int, records: list[GameRecord]) -> Path:
    """Write one generation's positions atomically; returns the path."""
    path = shard_path(replay_dir, generation)
    path.parent.mkdir(parents=True, exist_ok=True)
    obs = np.concatenate([r.obs for r in records]) if records else np.zeros((0, 2, 6, 7), np.uint8)
    policy = np.concatenate([r.policy for r in records]) if records else np.zeros((0, 7), np.float32)
    value = np.concatenate([r.value for r in records]) if records else np.zeros((0,), np.float32)
    root_value = np.concatenate([r.root_value for r in records]) if records else np.zeros((0,), np.float32)
    files.atomic_write(path, lambda f: np.savez_compressed(
        f, obs=obs.astype(np.uint8), policy=policy.astype(np.float32), value=value.astype(np.float32),
        root_value=root_value.astype(np.float32)))
    return path


def shard_positions(replay_dir: str | Path, generation: int) -> list[tuple[int, int]]:
    """The ``(position, mask)`` of each position in generation ``generation``'s shard, in its order; none where
    the shard is missing (``selfplay.play_games``'s fork ``sources``)."""
    path = shard_path(replay_dir, generation)
    if generation < 0 or not path.exists():
        return []
    with np.load(path, allow_pickle=False) as data:
        positions, masks = game.decode(data["obs"])
    return [(int(p), int(m)) for p, m in zip(positions, masks, strict=True)]


def note_path(replay_dir: str | Path, generation: int) -> Path:
    """The JSON note beside a shard that says its self-play finished (``write_note``)."""
    return Path(replay_dir) / f"gen_{generation:06d}.json"


def write_note(replay_dir: str | Path, generation: int, note: dict[str, Any]) -> None:
    """Write, after the generation's shard, what its self-play left for its training (atomically; JSON values)."""
    files.atomic_write_bytes(note_path(replay_dir, generation), (json.dumps(note) + "\n").encode())


def read_note(replay_dir: str | Path, generation: int) -> dict[str, Any] | None:
    """The note ``write_note`` left for ``generation`` where its shard is on disk too, else None."""
    path = note_path(replay_dir, generation)
    if not path.is_file() or not shard_path(replay_dir, generation).is_file():
        return None
    try:
        note = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return note if isinstance(note, dict) else None


def list_shards(replay_dir: str | Path) -> dict[int, Path]:
    """``{generation: path}`` of the shards present."""
    d = Path(replay_dir)
    if not d.is_dir():
        return {}
    return {int(m.group(1)): p for p in d.iterdir() if (m := _SHARD.search(p.name))}


def load_window(replay_dir: str | Path, *, up_to_generation: int, num_generations: int,
                max_positions: int, dedupe: bool, value_mix: float = 0.0) -> ReplayData:
    """Positions of generations ``(up_to - num_generations, up_to]``, newest first, capped; later shards ignored.
    The value target is ``(1 - value_mix) * result + value_mix * root_value``."""
    shards = list_shards(replay_dir)
    gens = sorted((g for g in shards if up_to_generation - num_generations < g <= up_to_generation), reverse=True)
    obs, policy, value = [], [], []
    total = 0
    for g in gens:
        with np.load(shards[g], allow_pickle=False) as data:
            obs.append(data["obs"])
            policy.append(data["policy"])
            result = data["value"]
            if value_mix > 0 and "root_value" in data.files:
                result = ((1 - value_mix) * result + value_mix * data["root_value"]).astype(np.float32)
            value.append(result)
        total += len(value[-1])
        if total >= max_positions:
            break
    if not obs:
        raise ValueError(f"no replay shards in {replay_dir} up to generation {up_to_generation}")
    out = ReplayData(np.concatenate(obs)[:max_positions], np.concatenate(policy)[:max_positions],
                     np.concatenate(value)[:max_positions])
    return deduplicate(out) if dedupe else out


def deduplicate(data: ReplayData) -> ReplayData:
    """Merge identical positions, averaging their policy and value targets."""
    if len(data) == 0:
        return data
    flat = np.packbits(data.obs.reshape(len(data), -1), axis=1)
    _, first, inverse, counts = np.unique(flat, axis=0, return_index=True, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    policy = np.zeros((len(first), data.policy.shape[1]), np.float64)
    value = np.zeros(len(first), np.float64)
    np.add.at(policy, inverse, data.policy)
    np.add.at(value, inverse, data.value)
    return ReplayData(data.obs[first], (policy / counts[:, None]).astype(np.float32),
                      (value / counts).astype(np.float32))
