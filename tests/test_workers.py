"""Self-play across worker processes: the same games as in-process, reproducible, and no hangs or orphans."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_consistent_records

from connectx_az.engine import game
from connectx_az.training import config, runs, selfplay, train, workers
from connectx_az.training.network import PolicyValueNet, TorchEvaluator

ROOT = Path(__file__).resolve().parents[1]
SMOKE = config.make_config("smoke")


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """The network is tiny: one thread, so that a loaded machine does not make it crawl."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _evaluator() -> TorchEvaluator:
    import torch

    torch.manual_seed(0)
    return TorchEvaluator(PolicyValueNet(SMOKE.net))


def _play(num_workers: int, num_games: int, seed: int = 0, evaluator: object | None = None,
          sources: tuple[tuple[int, int], ...] = (), **selfplay_settings: float
          ) -> tuple[list[selfplay.GameRecord], selfplay.SelfPlayStats, int]:
    settings = dataclasses.replace(SMOKE.selfplay, num_workers=num_workers, **selfplay_settings)
    done = []
    records, stats = workers.play_games(evaluator or _evaluator(), num_games, settings, SMOKE.mcts,
                                        np.random.default_rng(seed), on_game_done=done.append, sources=sources)
    return records, stats, len(done)


def _assert_same_games(a: list[selfplay.GameRecord], b: list[selfplay.GameRecord]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        for name in ("obs", "policy", "value", "root_value"):
            np.testing.assert_array_equal(getattr(x, name), getattr(y, name))
        assert (x.start_ply, x.opening) == (y.start_ply, y.opening)


def test_two_workers_make_consistent_records_reproducibly() -> None:
    records, stats, num_reported = _play(2, 7)
    assert stats.num_games == 7 == len(records) == num_reported
    assert stats.num_positions == sum(len(r.value) for r in records) > 0
    assert stats.num_evaluations > stats.num_positions
    # the workers' searches ask for positions their caches answer: the server scores fewer, and counts both
    assert 0 < stats.num_network_evaluations < stats.num_evaluations
    assert_consistent_records(records)
    # Each batch is fixed by the workers' requests, never by timing (see workers'
    # docstring), so on CPU the same seed and worker count give the same games.
    again, again_stats, _ = _play(2, 7)
    _assert_same_games(records, again)
    assert again_stats == stats
    assert not multiprocessing.active_children()


def test_one_worker_plays_exactly_the_in_process_games() -> None:
    # The remote evaluator is exact: one worker's batches are its own, as in-process.
    records, stats, _ = _play(1, 5, seed=3)
    seed = workers.worker_seeds(np.random.default_rng(3), 1)[0]
    expected, expected_stats = selfplay.play_games(_evaluator(), 5, SMOKE.selfplay, SMOKE.mcts,
                                                   np.random.default_rng(seed))
    _assert_same_games(records, expected)
    assert stats == expected_stats


def test_a_worker_forks_from_the_sources_it_is_given() -> None:
    # one wave of 5 games: a fork can only start from the sources, which must reach the worker
    sources = tuple(game.from_moves(moves) for moves in ("4", "43", "1234"))
    one_wave = {"num_parallel_games": 5, "prefix_share": 0.0, "fork_share": 1.0}
    records, stats, _ = _play(1, 5, seed=3, sources=sources, **one_wave)
    seed = workers.worker_seeds(np.random.default_rng(3), 1)[0]
    expected, expected_stats = selfplay.play_games(_evaluator(), 5, dataclasses.replace(SMOKE.selfplay, **one_wave),
                                                   SMOKE.mcts, np.random.default_rng(seed), sources=sources)
    _assert_same_games(records, expected)
    assert stats == expected_stats and stats.fork_rate == 1.0


def test_games_are_split_evenly_and_the_setting_is_checked() -> None:
    assert workers.split_games(7, 2) == [4, 3]
    assert workers.split_games(2, 4) == [1, 1]
    with pytest.raises(config.ConfigError, match="num_workers must be >= -1"):
        config.make_config("smoke", overrides=["selfplay.num_workers=-2"])  # -1 means one a core


class _WrongShapeEvaluator:
    """Answers 6 logits a position: the workers' evaluator must refuse it."""

    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((len(obs), 6), np.float32), np.zeros(len(obs), np.float32)


def test_a_failing_worker_raises_in_the_parent_with_its_traceback() -> None:
    with pytest.raises(workers.WorkerError, match=r"(?s)worker \d failed:.*Traceback.*expected logits"):
        _play(2, 4, evaluator=_WrongShapeEvaluator())
    assert not multiprocessing.active_children()


def test_a_killed_worker_does_not_hang_the_parent() -> None:
    def kill_workers(_: selfplay.GameRecord) -> None:
        for child in multiprocessing.active_children():
            os.kill(child.pid, signal.SIGKILL)

    settings = dataclasses.replace(SMOKE.selfplay, num_workers=2, num_parallel_games=2)
    start = time.perf_counter()
    with pytest.raises(workers.WorkerError, match="died"):
        # 8 games a worker, 2 at a time: both still have games to play after the first one ends.
        workers.play_games(_evaluator(), 16, settings, SMOKE.mcts, np.random.default_rng(0),
                           on_game_done=kill_workers)
    assert time.perf_counter() - start < 10
    assert not multiprocessing.active_children()


# Plays with the tests' uniform evaluator, prints its workers' pids at the first finished game, then
# dies by SIGKILL (no clean-up of any kind).  It also checks that what a worker imports has no torch.
_KILLED_PARENT = """
import os, signal, sys
import numpy as np
from conftest import UniformEvaluator
from connectx_az.engine import search_tree
from connectx_az.training import config, workers

def die(_):
    import multiprocessing
    print(" ".join(str(p.pid) for p in multiprocessing.active_children()), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

assert "torch" not in sys.modules
settings = config.SelfPlayConfig(num_workers=2, num_parallel_games=2)
search = search_tree.SearchConfig(num_simulations=8)
workers.play_games(UniformEvaluator(), 40, settings, search, np.random.default_rng(0), on_game_done=die)
"""


def _is_running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"  # an exited worker may wait a moment as a zombie for its new parent to reap it


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_workers_exit_when_the_parent_is_killed() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    done = subprocess.run([sys.executable, "-c", _KILLED_PARENT], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr
    pids = [int(p) for p in done.stdout.split()]
    assert len(pids) == 2
    deadline = time.time() + 10
    while any(_is_running(pid) for pid in pids):
        assert time.time() < deadline, "workers outlived their killed parent"
        time.sleep(0.05)


# a fresh interpreter's first two spawned processes (the first also starts multiprocessing's resource tracker),
# started as the workers are; each prints the SIGINT bit of the mask it was born with, read while it sleeps
_FIRST_SPAWNS = """
import multiprocessing, time
from pathlib import Path
from connectx_az.training import workers
context, processes = multiprocessing.get_context("spawn"), []
for _ in range(2):
    workers._start(context.Process(target=time.sleep, args=(30,), daemon=True), processes)
    mask = next(line for line in Path(f"/proc/{processes[-1].pid}/status").read_text().splitlines()
                if line.startswith("SigBlk:"))
    print(int(mask.split()[1], 16) >> 1 & 1)
    processes[-1].kill()
"""


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_every_worker_is_born_with_ctrl_c_blocked_the_first_too() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _FIRST_SPAWNS], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1"]


def test_training_with_workers_completes_a_generation_and_resumes(tmp_path: Path) -> None:
    cfg = config.make_config("smoke", overrides=["num_generations=2", "eval_positions=0",
                                                 "selfplay.num_workers=2", "selfplay.num_games=6"])
    run_dir = tmp_path / "run"
    train.run(run_dir, cfg, num_generations=1, progress=False)
    assert [r["generation"] for r in runs.read_metrics(run_dir)] == [0]
    train.run(run_dir, resume=True, progress=False)
    rows = runs.read_metrics(run_dir)
    assert [r["generation"] for r in rows] == [0, 1]
    assert all(r["num_games"] == 6 for r in rows)
    assert config.load_config(run_dir).selfplay.num_workers == 2
    assert not multiprocessing.active_children()


def test_minus_one_workers_means_one_per_core_and_the_gpu_preset_uses_it() -> None:
    assert workers.resolve_num_workers(-1, cpu_count=4) == 4
    assert workers.resolve_num_workers(-1, cpu_count=2) == 2
    assert workers.resolve_num_workers(-1, cpu_count=1) == 0  # one core: play in this process
    assert workers.resolve_num_workers(3, cpu_count=1) == 3  # an explicit count is kept
    assert config.make_config("gpu").selfplay.num_workers == -1
    with pytest.raises(config.ConfigError, match="num_workers must be >= -1"):
        config.make_config("gpu", overrides=["selfplay.num_workers=-2"])


@pytest.mark.parametrize(("threads", "num_workers", "expected"), [(2, 2, 1), (16, 16, 8), (4, 4, 2), (8, 0, 8),
                                                                   (1, 0, 1), (1, 4, 1)])
def test_the_network_gets_the_threads_of_the_group_of_workers_that_waits_on_it(threads: int, num_workers: int,
                                                                               expected: int) -> None:
    assert workers.inference_threads(threads, num_workers) == expected


def test_a_generation_plays_with_the_workers_threads_and_trains_with_the_runs(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    seen: list[int] = []
    play = workers.play_games
    monkeypatch.setattr(workers, "play_games", lambda *a, **k: (seen.append(torch.get_num_threads()), play(*a, **k))[1])
    before = torch.get_num_threads()
    try:
        cfg = config.make_config("smoke", overrides=["num_generations=1", "eval_positions=0", "selfplay.num_games=4",
                                                     "selfplay.num_workers=2", "threads=2"])
        train.run(tmp_path / "run", cfg, progress=False)
        assert seen == [1] and runs.read_rows(tmp_path / "run")[0]["threads"] == 2
    finally:
        torch.set_num_threads(before)
