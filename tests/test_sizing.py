"""A new run sized to the machine (``sizing.sized``) and the command that remakes a run (``sizing.train_command``)."""

from __future__ import annotations

import pytest

from connectx_az.training import config, sizing


@pytest.mark.parametrize(("preset", "cores", "gpu", "expected"), [
    # (workers, games in flight a worker, games a generation, steps a generation)
    ("cpu", 1, False, (0, 160, 160, 100)),  # the preset as written: one lane, in the training process
    ("cpu", 2, False, (2, 160, 320, 200)),
    ("cpu", 8, False, (8, 160, 1280, 800)),
    ("gpu", 16, True, (16, 64, 2048, 400)),  # the machine the gpu preset was measured on
    ("gpu", 4, True, (4, 256, 2048, 400)),  # Kaggle's T4 box: 4 x 256 in flight, as fast as 16 x 64 on an H200
    ("gpu", 2, True, (2, 512, 2048, 400)),
])
def test_self_play_is_sized_to_the_cores_and_the_gpu(preset: str, cores: int, gpu: bool,
                                                      expected: tuple[int, int, int, int]) -> None:
    cfg = sizing.sized(config.make_config(preset), cores=cores, gpu=gpu)
    sp = cfg.selfplay
    assert (sp.num_workers, sp.num_parallel_games, sp.num_games, cfg.train.steps_per_generation) == expected
    assert cfg.threads == cores
    # each worker plays at least a round: its games fork from the previous generation's positions too
    assert sp.fork_previous and sp.num_games >= max(sp.num_workers, 1) * sp.num_parallel_games
    # a position is trained on as often as in the preset's lane
    lane = config.make_config(preset)
    assert cfg.train.steps_per_generation / sp.num_games == pytest.approx(
        lane.train.steps_per_generation / lane.selfplay.num_games, rel=0.01)


def test_without_forks_from_the_previous_generation_each_worker_plays_two_rounds() -> None:
    # so that its later games can fork from its earlier ones; the steps grow with the games
    cfg = sizing.sized(config.make_config("cpu", overrides=["selfplay.fork_previous=false"]), cores=2, gpu=False)
    assert (cfg.selfplay.num_workers, cfg.selfplay.num_parallel_games, cfg.selfplay.num_games,
            cfg.train.steps_per_generation) == (2, 160, 640, 400)


def test_sizing_keeps_what_the_user_set_and_the_workers_pin_the_rest() -> None:
    cfg = config.make_config("cpu", overrides=["selfplay.num_games=48", "threads=1"])
    kept = sizing.sized(cfg, cores=8, gpu=False, keep={"selfplay.num_games", "threads"})
    assert (kept.selfplay.num_games, kept.threads, kept.selfplay.num_workers) == (48, 1, 8)
    pinned = sizing.sized(config.make_config("gpu"), cores=16, gpu=True, workers=4)
    assert (pinned.selfplay.num_workers, pinned.selfplay.num_parallel_games, pinned.threads) == (4, 256, 16)
    assert sizing.train_command(config.to_dict(pinned)) == "connectx-az train RUN --preset gpu --workers 4"


def test_train_command_names_the_nearest_preset_and_each_change_as_a_set_that_remakes_the_config() -> None:
    assert sizing.train_command(config.to_dict(config.make_config("cpu", overrides=["seed=3"]))) == \
        "connectx-az train RUN --preset cpu --workers 0"
    changed = ["num_generations=450", "net.value_pool=false", "train.lr=0.0001", "train.solved_max_plies=10"]
    command = sizing.train_command(config.to_dict(config.make_config("gpu", overrides=changed)))
    assert command.startswith("connectx-az train RUN --preset gpu --set ")
    sets = command.split(" --set ")[1:]
    assert sorted(sets) == sorted(changed)
    assert config.make_config("gpu", overrides=sets) == config.make_config("gpu", overrides=changed)
    assert sizing.train_command(config.to_dict(config.make_config("gpu", overrides=changed)), max_changes=3) == \
        "connectx-az train RUN --preset gpu (4 settings changed: see config.json)"
    assert sizing.train_command({"no_such_setting": 1}) == "connectx-az train RUN (custom settings: see config.json)"


def test_a_timed_run_keeps_its_sizes_where_a_handful_of_generations_fit_and_shrinks_them_where_not() -> None:
    cpu = config.make_config("cpu")
    # three hours at about a minute a generation (the cpu preset on one core): exactly as sized
    assert sizing.deadline_scale(3 * 3600, 57.0) == 1.0 and sizing.scaled(cpu, 1.0) is cpu
    assert sizing.deadline_scale(5 * 60, 60.0) == 1.0 and sizing.MIN_TIMED_GENERATIONS == 5  # five fit: as sized
    # nine minutes where the first generation took three: the other four share the six minutes left
    assert sizing.deadline_scale(9 * 60, 180.0) == pytest.approx(0.5)
    half = sizing.scaled(cpu, 0.5)
    assert half.selfplay.num_games == cpu.selfplay.num_games // 2
    assert half.train.steps_per_generation == round(cpu.train.steps_per_generation / 2)
    assert (half.net, half.mcts, half.selfplay.num_parallel_games) == \
        (cpu.net, cpu.mcts, cpu.selfplay.num_parallel_games)
    assert sizing.deadline_scale(9 * 60, 9 * 60) == 0.0  # the first took it all: none is left
    tiny = sizing.scaled(cpu, 1e-6)
    assert tiny.selfplay.num_games == 1 and tiny.train.steps_per_generation == 1


def test_a_shrunk_run_corrects_its_shares_by_the_generations_it_measures() -> None:
    # The walk of issue 70 on one loaded core: 4 minutes, a first generation of 76 s, and generations that do not
    # shrink in proportion to their games and steps (a fixed part: set-up, the first wave of games).
    first = 76.0
    assert sizing.next_scale(240, first, generation=1, spent=76, last_scale=1.0, last_seconds=76) == \
        pytest.approx(sizing.deadline_scale(240, first)) == pytest.approx(0.54, abs=0.01)
    # the second took 65 s at 0.54: 99 s are left for 3, so 33 s each, 0.54 * 33 / 65 of the first's size
    assert sizing.next_scale(240, first, generation=2, spent=141, last_scale=0.54, last_seconds=65) == \
        pytest.approx(0.54 * 33 / 65)
    # its time is judged through the last two: 76 s at 1.0 and 65 s at 0.54, 52 s fixed and 24 s a share
    assert sizing.predicted_seconds([(1.0, 76.0), (0.54, 65.0)], 0.274) == pytest.approx(52.09 + 23.91 * 0.274,
                                                                                           abs=0.01)
    assert sizing.predicted_seconds([(1.0, 76.0)], 0.5) == 38.0  # one measured: in proportion
    assert sizing.predicted_seconds([(1.0, 60.0), (0.5, 70.0)], 0.25) == 70.0  # smaller, no faster: all fixed
    assert sizing.predicted_seconds([(1.0, 60.0), (0.5, 20.0)], 0.25) == 10.0  # a fixed part below 0: in proportion
    # five made, or no time left: the last share; where five fit at the first's size, always the whole
    assert sizing.next_scale(240, first, generation=5, spent=230, last_scale=0.2, last_seconds=40) == 0.2
    assert sizing.next_scale(240, first, generation=3, spent=250, last_scale=0.3, last_seconds=40) == 0.3
    assert sizing.next_scale(3 * 3600, 57.0, generation=7, spent=400, last_scale=1.0, last_seconds=90) == 1.0
    assert sizing.next_scale(240, first, generation=4, spent=239, last_scale=0.3, last_seconds=40) == \
        sizing.MIN_SCALE
