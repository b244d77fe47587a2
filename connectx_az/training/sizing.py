"""A new run sized to the machine it starts on (saved in ``config.json``, so a resumed run plays as it started),
and ``train_command``, the ``connectx-az train`` command that remakes a saved config."""

from __future__ import annotations

import dataclasses
from typing import Any

from connectx_az.training import config

#: games in flight over all the self-play workers with a GPU (docs/results.md, "Self-play sized to the machine")
GPU_GAMES_IN_FLIGHT = 1024
#: the most games in flight ``sized`` gives one worker
MAX_GAMES_PER_WORKER = 512
#: the settings ``sized`` chooses, as ``--set`` keys
SIZED_KEYS = ("selfplay.num_workers", "selfplay.num_parallel_games", "selfplay.num_games",
              "train.steps_per_generation", "threads")


def default_workers(cores: int) -> int:
    """One self-play worker process a core; none (self-play in the training process) on one core."""
    return cores if cores > 1 else 0


#: the fewest generations a timed run (``--total-time``) makes, so that its learning rate anneals whatever the machine
MIN_TIMED_GENERATIONS = 5


def deadline_scale(total_time: float, first_seconds: float, *, min_generations: int = MIN_TIMED_GENERATIONS) -> float:
    """The share of its games and steps a timed run's generations after the first play: exactly 1.0 where
    ``min_generations`` of the first's ``first_seconds`` fit in ``total_time``, else what makes the time left hold
    ``min_generations - 1`` more (0.0 where none is left)."""
    if total_time // max(first_seconds, 1e-9) >= min_generations:
        return 1.0
    return min(1.0, max(0.0, total_time - first_seconds) / (min_generations - 1) / max(first_seconds, 1e-9))


def next_scale(total_time: float, first_seconds: float, *, generation: int, spent: float, last_scale: float,
               last_seconds: float, min_generations: int = MIN_TIMED_GENERATIONS) -> float:
    """The share of its games and steps generation ``generation`` (>= 1) of a timed run plays, ``spent`` seconds in,
    the last one having played ``last_scale`` in ``last_seconds``.

    1.0 where ``min_generations`` fit at the first's size; else the second takes ``deadline_scale``, and each later
    one, until ``min_generations`` are made, the share that fills the time left evenly over those still to make,
    judged by the last one's time in proportion to its share.  A generation's time does not shrink in proportion
    to its games and steps (the set-up and the first wave of games do not), so the shares are corrected as the
    generations are measured.  Once ``min_generations`` are made, or no time is left, the last one's share."""
    if deadline_scale(total_time, first_seconds, min_generations=min_generations) >= 1.0:
        return 1.0
    if generation <= 1:
        return deadline_scale(total_time, first_seconds, min_generations=min_generations)
    left = total_time - spent
    if generation >= min_generations or left <= 0 or last_scale <= 0:
        return last_scale
    per_generation = left / (min_generations - generation)
    return min(1.0, max(MIN_SCALE, last_scale * per_generation / max(last_seconds, 1e-9)))


def predicted_seconds(measured: list[tuple[float, float]], scale: float) -> float:
    """How long a generation playing ``scale`` of its games and steps takes, from ``measured``: ``(share, seconds)``
    of the generations so far, the last last.  Through the last two where their shares differ (a fixed part, at
    least 0, and a part in proportion to the share), else the last one's time in proportion to its share."""
    last, last_seconds = measured[-1]
    if len(measured) >= 2 and measured[-2][0] != last:
        before, before_seconds = measured[-2]
        per_share = max(0.0, (before_seconds - last_seconds) / (before - last))
        fixed = last_seconds - per_share * last
        if fixed >= 0:
            return fixed + per_share * scale
    return last_seconds * scale / max(last, 1e-9)


#: the smallest share ``next_scale`` gives (``scaled`` plays at least one game and one step whatever the share)
MIN_SCALE = 0.01


def scaled(run: config.RunConfig, scale: float) -> config.RunConfig:
    """``run`` with its games and training steps a generation times ``scale`` (at least one each); ``run`` itself at
    1.0."""
    if scale >= 1.0:
        return run
    games = max(1, round(run.selfplay.num_games * scale))
    steps = max(1, round(run.train.steps_per_generation * scale))
    return dataclasses.replace(run, selfplay=dataclasses.replace(run.selfplay, num_games=games),
                               train=dataclasses.replace(run.train, steps_per_generation=steps))


def capped_workers(num_workers: int, cores: int) -> int | None:
    """``cores`` where ``num_workers`` (``selfplay.num_workers``; -1: one a core) asks for more self-play worker
    processes than there are cores, else None: more workers than cores only share them, each with its own memory."""
    wanted = num_workers if num_workers >= 0 else default_workers(cores)
    return cores if wanted > cores else None


def sized_within(run: config.RunConfig, *, cores: int, found: int, gpu: bool, workers: int | None = None,
                 keep: frozenset[str] | set[str] = frozenset()) -> tuple[config.RunConfig, str | None]:
    """``sized``, its self-play workers capped at the ``found`` cores (``capped_workers``), and the line that says
    so (None: not capped)."""
    run_sized = sized(run, cores=cores, gpu=gpu, workers=workers, keep=keep)
    num_workers = capped_workers(run_sized.selfplay.num_workers, found)
    if num_workers is None:
        return run_sized, None
    return (sized(run, cores=cores, gpu=gpu, workers=num_workers, keep=set(keep) - {"selfplay.num_workers"}),
            f"{run_sized.selfplay.num_workers} self-play workers capped at {num_workers}, the cores found (more "
            "would share them)")


def sized(run: config.RunConfig, *, cores: int, gpu: bool, workers: int | None = None,
          keep: frozenset[str] | set[str] = frozenset()) -> config.RunConfig:
    """``run`` (a preset's sizes: one self-play lane) sized for ``cores`` cores, with a GPU or without.

    A worker a core (``workers`` pins the count), each with the lane's games in flight; with a GPU the workers
    together keep ``GPU_GAMES_IN_FLIGHT`` (at most ``MAX_GAMES_PER_WORKER`` each).  Each worker plays at least
    one round (two without ``fork_previous``, so that later games can fork from earlier ones), and the steps
    grow with the games.  Torch uses every core.  ``keep``: the ``SIZED_KEYS`` the user set, left as they are.
    The rule: docs/results.md, "Self-play sized to the machine"."""
    selfplay, train = run.selfplay, run.train
    num_workers = selfplay.num_workers if "selfplay.num_workers" in keep else \
        default_workers(cores) if workers is None else workers
    lanes = max(num_workers, 1)
    in_flight = selfplay.num_parallel_games
    if gpu and "selfplay.num_parallel_games" not in keep:
        in_flight = min(MAX_GAMES_PER_WORKER, max(in_flight, GPU_GAMES_IN_FLIGHT // lanes))
    rounds = 1 if selfplay.fork_previous else 2
    num_games = selfplay.num_games if "selfplay.num_games" in keep else \
        max(selfplay.num_games, rounds * lanes * in_flight)
    steps = train.steps_per_generation if "train.steps_per_generation" in keep else \
        round(train.steps_per_generation * num_games / selfplay.num_games)
    return dataclasses.replace(
        run, threads=run.threads if "threads" in keep else cores,
        selfplay=dataclasses.replace(selfplay, num_workers=num_workers, num_parallel_games=in_flight,
                                     num_games=num_games),
        train=dataclasses.replace(train, steps_per_generation=steps))


def train_command(values: dict[str, Any], *, max_changes: int = 8) -> str:
    """The ``connectx-az train`` command that makes a run of config ``values``: the nearest preset as ``sized``,
    ``--workers``, ``--total-time``, and a ``--set`` for each other difference (seed, threads and device aside),
    or past ``max_changes`` differences their count and a pointer to ``config.json``."""
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
