"""A training run's folder: its files, metrics and clock, starting and resuming, and adopting an earlier session's.

    RUN_DIR/config.json        the frozen RunConfig, written before any work
    RUN_DIR/replay/gen_*.npz   one shard of self-play positions per generation
    RUN_DIR/checkpoint.pt      weights, optimizer, and the next generation to run
    RUN_DIR/metrics.jsonl      one JSON line per finished generation"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

from connectx_az import files, paths
from connectx_az.training import replay, sizing
from connectx_az.training.config import ConfigError, RunConfig, load_config, save_config
from connectx_az.training.network import CheckpointError, PolicyValueNet, load_checkpoint, load_into

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint.pt"
METRICS = "metrics.jsonl"
#: where ``train --keep-every`` keeps checkpoints along the way
SNAPSHOTS = "snapshots"


def snapshot_path(run_dir: str | Path, generation: int) -> Path:
    """The checkpoint kept after ``generation`` generations (``train --keep-every``)."""
    return Path(run_dir) / SNAPSHOTS / f"gen_{generation:04d}.pt"


_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)"
#: a bare number of seconds, or hours, minutes and seconds in that order, each with its unit and any of them left out
_DURATION = re.compile(rf"{_NUMBER}|(?:{_NUMBER}\s*h)?\s*(?:{_NUMBER}\s*m)?\s*(?:{_NUMBER}\s*s)?")


def parse_duration(text: str | float, what: str = "time budget") -> float:
    """Seconds in ``text``: ``"90"``, ``"90s"``, ``"45m"``, ``"11.5h"``, ``"2h30m"``; else ``ConfigError``."""
    match = _DURATION.fullmatch(str(text).lower().strip())
    seconds = sum(float(n or 0) * unit for n, unit in zip(match.groups(), (1, 3600, 60, 1), strict=True)) \
        if match else 0.0
    if seconds <= 0:
        raise ConfigError(f"{what} {text!r} is not a positive duration; write seconds or a number with "
                          "a unit, e.g. 90s, 45m, 11.5h or 2h30m")
    return seconds


def format_duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def trim_metrics(run_dir: Path, next_generation: int) -> None:
    """Drop metrics lines of generations the checkpoint does not include."""
    path = run_dir / METRICS
    if not path.exists():
        return
    kept = [line for line in path.read_text().splitlines()
            if line.strip() and json.loads(line).get("generation", -1) < next_generation]
    files.atomic_write_bytes(path, "".join(line + "\n" for line in kept).encode())


def append_metrics(run_dir: Path, row: dict[str, Any]) -> None:
    with open(run_dir / METRICS, "a") as f:
        f.write(json.dumps(row) + "\n")
        f.flush()


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / METRICS
    if not path.exists():
        raise ConfigError(f"{path} not found: is {run_dir} a training run directory?")
    return read_rows(run_dir)


def read_rows(run_dir: Path | str) -> list[dict[str, Any]]:
    path = Path(run_dir) / METRICS
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def rows_before(run_dir: Path | str, generation: int) -> list[dict[str, Any]]:
    """The metrics rows of the generations before ``generation``."""
    return [r for r in read_rows(run_dir) if r["generation"] < generation]


def check_run(run_dir: str | Path) -> int:
    """The next generation of the run saved in ``run_dir`` (0 if it has no checkpoint yet).  Raises ``ConfigError``
    when ``config.json`` is missing or broken, or the checkpoint is unreadable or holds another network."""
    run_dir = Path(run_dir)
    if not (run_dir / "config.json").is_file():
        raise ConfigError(f"{run_dir} is not a training run (no config.json); attach the output folder that "
                          "holds config.json and checkpoint.pt")
    config = load_config(run_dir)
    ckpt_path = run_dir / CHECKPOINT
    if not ckpt_path.is_file():
        return 0
    try:
        net, data = load_checkpoint(ckpt_path)
    except CheckpointError as exc:
        raise ConfigError(str(exc)) from exc
    if net.config != config.net:
        raise ConfigError(f"{ckpt_path} holds a {net.config.label} network but {run_dir / 'config.json'} "
                          f"describes a {config.net.label} one; it is not this run's checkpoint")
    return int(data.get("generation", 0))


def find_attached_run(root: str | Path, *, max_depth: int = 4) -> Path | None:
    """The resumable run with the most generations under ``root`` (on Kaggle ``/kaggle/input``), or None; raises
    ``ConfigError`` (``check_run``'s) when folders hold a run but none is valid."""
    root = Path(root)
    if not root.is_dir():
        return None
    candidates: list[Path] = []
    for folder, subfolders, names in os.walk(root):
        depth = len(Path(folder).relative_to(root).parts)
        if "config.json" in names or CHECKPOINT in names:
            candidates.append(Path(folder))
            subfolders.clear()
        elif depth >= max_depth:
            subfolders.clear()
        subfolders[:] = [d for d in subfolders if d not in ("replay", "tensorboard") and not d.startswith(".")]
    valid: list[tuple[int, Path]] = []
    problem: ConfigError | None = None
    for folder in sorted(candidates):
        try:
            valid.append((check_run(folder), folder))
        except ConfigError as exc:
            log.warning("not a resumable run, skipped: %s", exc)
            problem = problem or exc
    if valid:
        return max(valid, key=lambda item: item[0])[1]
    if problem is not None:
        raise problem
    return None


def adopt_run(source: str | Path, run_dir: str | Path) -> int:
    """Copy the run in ``source`` to ``run_dir`` (absent or empty) to resume it there; returns its next generation.

    The copy is renamed into place when complete, so an interrupted one leaves no half run.  Raises
    ``ConfigError`` if ``source`` is not resumable or ``run_dir`` holds anything."""
    source, run_dir = Path(source), Path(run_dir)
    generation = check_run(source)
    if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
        raise ConfigError(f"{run_dir} is not empty; copy the run from {source} into a new folder")
    partial = run_dir.with_name(f".{run_dir.name}.partial")
    try:
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(source, partial, ignore=shutil.ignore_patterns("*.tmp", "tensorboard"))
        for path in [partial, *partial.rglob("*")]:  # Kaggle's inputs are read-only; the copy must not be
            path.chmod(path.stat().st_mode | 0o200)
        if run_dir.exists():
            run_dir.rmdir()
        partial.replace(run_dir)
    except OSError as exc:
        raise ConfigError(f"cannot copy {source} to {run_dir}: {exc}") from exc
    return generation


def run_config(run_dir: Path, config: RunConfig | None, *, resume: bool) -> tuple[RunConfig, bool]:
    """``(config, changed)``: the config a run in ``run_dir`` trains with, and whether it replaces the saved one.

    A new run needs ``config`` and an empty folder; a resumed run keeps its config, or takes ``config`` with
    the same network.  Raises ``ConfigError``; writes nothing."""
    if resume:
        saved = load_config(run_dir)
        if config is None or config == saved:
            return saved, False
        if config.net != saved.net:
            raise ConfigError(f"{run_dir} was trained with net {asdict(saved.net)}; a resumed run "
                              "keeps its network (start a new run with --init-model instead)")
        return config, True
    if config is None:
        raise ConfigError("a new run needs a config (choose a --preset)")
    if (run_dir / "config.json").exists():
        raise ConfigError(f"{run_dir} already holds a run; use --resume {run_dir} or another folder")
    if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
        raise ConfigError(f"{run_dir} is not empty and holds no run (no config.json); a new run needs a new or "
                          "empty folder")
    return config, False


def write_config(run_dir: Path, config: RunConfig, *, resume: bool, changed: bool) -> None:
    """Write ``config.json`` for a new run, or over a resumed run's where ``run_config`` changed it."""
    if changed:
        save_config(config, run_dir)
        log.info("resuming %s with a changed config", run_dir)
    elif not resume:
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            save_config(config, run_dir)
        except OSError as exc:
            raise ConfigError(f"cannot write to {run_dir}: {exc.strerror}; choose a writable folder") from exc


def restore(run_dir: Path, net: PolicyValueNet, optimizer: Any, *, resume: bool,
            init_model: str | Path | None) -> tuple[int, int]:
    """``(generation, keep_every)`` the run goes on from: the checkpoint's, loaded into ``net`` and ``optimizer``,
    when resuming, else 0 and 0 (warm-started from ``init_model``).  The metrics are trimmed to that generation."""
    generation = keep_every = 0
    ckpt_path = run_dir / CHECKPOINT
    if resume and ckpt_path.exists():
        loaded, data = load_checkpoint(ckpt_path)
        net.load_state_dict(loaded.state_dict())
        optimizer.load_state_dict(data["optimizer"])
        generation = int(data["generation"])
        keep_every = int(data.get("keep_every", 0))
        log.info("resuming %s at generation %d", run_dir, generation)
    elif init_model is not None:
        fresh = load_into(net, init_model, warm_start=True)
        log.info("warm start from %s%s", init_model, f" (new weights for {', '.join(fresh)})" if fresh else "")
    trim_metrics(run_dir, generation)
    return generation, keep_every


def generation_line(row: dict[str, Any], config: RunConfig) -> str:
    """One line for a finished generation's metrics ``row``: where the run stands, its time and losses."""
    done = row["generation"] + 1
    if config.total_time:
        where = f"({row.get('run_seconds', 0) / config.total_time:.0%} of {format_duration(config.total_time)})"
    else:
        where = f"of {config.num_generations}"
    fit = ""
    if "expected_generations" in row and config.total_time:
        count = row["expected_generations"]
        fit = f"; about {count} generation{'s' * (count != 1)} fit in {format_duration(config.total_time)}"
    return (f"generation {done} {where}: {row['seconds']:.0f} s (self-play {row['selfplay_seconds']:.0f} s, "
            f"training {row['train_seconds']:.0f} s), loss policy {row['policy_loss']:.3f} value "
            f"{row['value_loss']:.3f}, lr {row['lr']:.2g}{fit}")


def run_clock(rows: list[dict[str, Any]]) -> list[float]:
    """The run's time at the end of each metrics row: its ``run_seconds``, else the sum of ``seconds`` so far."""
    clock, ends = 0.0, []
    for row in rows:
        clock = float(row.get("run_seconds", clock + float(row.get("seconds", 0.0))))
        ends.append(clock)
    return ends


def forecast(rows: list[dict[str, Any]], total_time: float) -> tuple[float, float, float]:
    """``(spent, scale, expected)`` after the metrics ``rows`` of a run's generations so far (its first first): the
    run's time, the share of its games and steps the next generation plays (``sizing.next_scale`` where the run is
    timed, ``total_time`` > 0, else 1.0) and how long it should take (``sizing.predicted_seconds``; 0.0 before the
    first).  Training and ``is_complete`` both judge by it, so a run that stops for time is one that says so."""
    ends = run_clock(rows)
    if not ends:
        return 0.0, 1.0, 0.0
    measured = [(float(row.get("scale", 1.0)), end - start)
                for row, start, end in zip(rows, [0.0, *ends[:-1]], ends, strict=True)]
    scale = sizing.next_scale(total_time, ends[0], generation=len(rows), spent=ends[-1], last_scale=measured[-1][0],
                              last_seconds=measured[-1][1]) if total_time else 1.0
    return ends[-1], scale, sizing.predicted_seconds(measured, scale)


def is_complete(run_dir: str | Path, config: RunConfig, next_generation: int) -> bool:
    """Whether the run has done all it was set to: its generations, or (timed) its total time."""
    if not config.total_time:
        return next_generation >= config.num_generations
    spent, _, expected = forecast(rows_before(run_dir, next_generation), config.total_time)
    return spent + expected > config.total_time


def status_line(run_dir: str | Path) -> str:
    """Where the run in ``run_dir`` stands, and the next command: the export once it is complete, else the resume."""
    run_dir = Path(run_dir)
    config = load_config(run_dir)
    generation = check_run(run_dir)
    spent = format_duration(([0.0, *run_clock(rows_before(run_dir, generation))])[-1])
    if is_complete(run_dir, config, generation):
        model = export_path(run_dir)
        return (f"the run is complete: {generation} generations in {spent}; next: {paths.COMMAND} export {run_dir} "
                f"--out {model}, then {paths.COMMAND} build --model {model}")
    target = f"{spent} of {format_duration(config.total_time)}" if config.total_time else \
        f"of {config.num_generations}, {spent}"
    note = replay.read_note(run_dir / "replay", generation)
    games = f", and generation {generation + 1}'s self-play ({note['stats']['num_games']:,} games, trained on when " \
        "resumed)" if note and isinstance(note.get("stats"), dict) and "num_games" in note["stats"] else ""
    return f"the run is saved after {generation} generations ({target}){games}; {resume_hint(run_dir)}"


def resume_hint(run_dir: str | Path) -> str:
    """How to go on with the run in ``run_dir``."""
    return f"resume with: {paths.COMMAND} train --resume {run_dir}"


def export_path(run_dir: str | Path) -> Path:
    """Where the hint of a finished run exports it: ``build/<the run folder's name>.onnx``, one file a run."""
    return Path("build") / f"{Path(run_dir).resolve().name}.onnx"
