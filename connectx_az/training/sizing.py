"""A new run sized to the machine it starts on, and the ``connectx-az train`` command that remakes a run.

A preset's sizes are those of one self-play lane; ``sized`` fits them to the cores and the GPU
found (``devices.detect``), and the choice is saved in the run's ``config.json`` like any
setting, so a resumed run plays as it started.  ``train_command`` goes the other way: from a
saved config to the preset, ``--workers`` and ``--total-time`` that make it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from connectx_az.training import config

#: games in flight over all the self-play workers with a GPU (16 cores x 64 and 4 cores x 256 self-played at about the
#: same rate on an H200; docs/results.md, "Self-play sized to the machine")
GPU_GAMES_IN_FLIGHT = 1024
#: the most games in flight ``sized`` gives one worker
MAX_GAMES_PER_WORKER = 512
#: the settings ``sized`` chooses, as ``--set`` keys
SIZED_KEYS = ("selfplay.num_workers", "selfplay.num_parallel_games", "selfplay.num_games",
              "train.steps_per_generation", "threads")


def default_workers(cores: int) -> int:
    """One self-play worker process a core; none (self-play in the training process) on one core."""
    return cores if cores > 1 else 0


def sized(run: config.RunConfig, *, cores: int, gpu: bool, workers: int | None = None,
          keep: frozenset[str] | set[str] = frozenset()) -> config.RunConfig:
    """``run``, whose sizes are those of one self-play lane (a preset's), sized for a machine of ``cores``
    cores, with a GPU or without.

    The tree work costs per numpy call over the batch, not per game, so a core is used well only with a full
    batch of its own: each core gets a worker process (``workers`` pins the count; one core plays in the training
    process) and each worker the lane's games in flight.  With a GPU, whose forward pass costs per call too, the
    workers together keep ``GPU_GAMES_IN_FLIGHT`` in flight however few they are (at most
    ``MAX_GAMES_PER_WORKER`` each).  Each worker plays at least two rounds of its games in flight, so that its
    later games can fork from its earlier ones, and the training steps grow with the games, so that a position is
    trained on as often as in the lane.  Torch uses every core.  Settings named in ``keep`` (``SIZED_KEYS`` the
    user set) stay as ``run`` has them.
    """
    selfplay, train = run.selfplay, run.train
    num_workers = selfplay.num_workers if "selfplay.num_workers" in keep else \
        default_workers(cores) if workers is None else workers
    lanes = max(num_workers, 1)
    in_flight = selfplay.num_parallel_games
    if gpu and "selfplay.num_parallel_games" not in keep:
        in_flight = min(MAX_GAMES_PER_WORKER, max(in_flight, GPU_GAMES_IN_FLIGHT // lanes))
    num_games = selfplay.num_games if "selfplay.num_games" in keep else max(selfplay.num_games, 2 * lanes * in_flight)
    steps = train.steps_per_generation if "train.steps_per_generation" in keep else \
        round(train.steps_per_generation * num_games / selfplay.num_games)
    return dataclasses.replace(
        run, threads=run.threads if "threads" in keep else cores,
        selfplay=dataclasses.replace(selfplay, num_workers=num_workers, num_parallel_games=in_flight,
                                     num_games=num_games),
        train=dataclasses.replace(train, steps_per_generation=steps))


def train_command(values: dict[str, Any], *, max_changes: int = 8) -> str:
    """The ``connectx-az train`` command that makes a run of config ``values``: the nearest preset, sized as the run
    was (``--workers``, on a machine with a GPU or without: ``sized``), its ``--total-time`` if it has one, and a
    ``--set`` for each setting that differs from that (seed, threads and device aside: they change where the run
    computes, not what), or where more than ``max_changes`` differ, that count and a pointer to ``config.json``.
    A config saved before a setting existed is completed with today's defaults first, so it still matches its
    preset."""
    try:
        run = config.from_dict(values)
    except config.ConfigError:
        return "connectx-az train RUN (custom settings: see config.json)"
    workers = run.selfplay.num_workers
    leaves = config.leaves(config.to_dict(run))
    ignored = ("seed", "threads", "device", "total_time") + (("num_generations",) if run.total_time else ())

    def differences(preset: config.RunConfig) -> list[str]:
        values = config.leaves(config.to_dict(preset))
        return [f"{key}={'true' if v is True else 'false' if v is False else v}"
                for key, v in leaves.items() if key not in ignored and values.get(key) != v]

    def candidates(name: str) -> list[config.RunConfig]:  # the preset as sized for those workers, or (-1) as it is
        preset = config.make_config(name)
        return [sized(preset, cores=1, gpu=gpu, workers=workers) for gpu in (False, True)] if workers >= 0 \
            else [preset]

    changes = {name: min((differences(c) for c in candidates(name)), key=len) for name in config.PRESETS}
    name = min(changes, key=lambda n: len(changes[n]))
    head = f"connectx-az train RUN --preset {name}" + (f" --workers {workers}" if workers >= 0 else "") + \
        (f" --total-time {format_hours(run.total_time)}" if run.total_time else "")
    if len(changes[name]) > max_changes:
        return f"{head} ({len(changes[name])} settings changed: see config.json)"
    return " ".join([head, *(f"--set {c}" for c in changes[name])])


def format_hours(seconds: float) -> str:
    """``seconds`` as ``train --total-time`` reads it: ``3h``, ``2h30m``, ``90m``, ``45s``."""
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")
    return text or "0s"
