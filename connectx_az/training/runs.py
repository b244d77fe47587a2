"""A training run's folder: its files, its metrics, its time budget, and runs saved by an earlier session.

A run lives in one directory::

    RUN_DIR/config.json        the frozen RunConfig, written before any work
    RUN_DIR/replay/gen_*.npz   one shard of self-play positions per generation
    RUN_DIR/checkpoint.pt      weights, optimizer, and the next generation to run
    RUN_DIR/metrics.jsonl      one JSON line per finished generation

``train.run`` writes them (atomically; see its module).  ``find_attached_run`` and ``adopt_run`` bring
a run saved by an earlier session (on Kaggle, a previous version's output attached under
``/kaggle/input``) into a fresh ``RUN_DIR``; ``parse_duration`` reads a ``--time-budget``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Any

from connectx_az import files
from connectx_az.training.config import ConfigError, load_config
from connectx_az.training.network import CheckpointError, load_checkpoint

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint.pt"
METRICS = "metrics.jsonl"
#: where ``train --keep-every`` keeps checkpoints along the way
SNAPSHOTS = "snapshots"


def snapshot_path(run_dir: str | Path, generation: int) -> Path:
    """The checkpoint kept after ``generation`` generations (``train --keep-every``)."""
    return Path(run_dir) / SNAPSHOTS / f"gen_{generation:04d}.pt"


def parse_duration(text: str | float) -> float:
    """Seconds in ``text``: a number of seconds, or with a unit: ``"90s"``, ``"45m"``, ``"11.5h"``.

    Raises ``ConfigError`` unless it is a positive duration.
    """
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([smh]?)\s*", str(text).lower())
    seconds = float(match[1]) * {"": 1, "s": 1, "m": 60, "h": 3600}[match[2]] if match else 0.0
    if seconds <= 0:
        raise ConfigError(f"time budget {text!r} is not a positive duration; write seconds or a number with "
                          "a unit, e.g. 90s, 45m or 11.5h")
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


def check_run(run_dir: str | Path) -> int:
    """The next generation of the run saved in ``run_dir`` (0 if it has no checkpoint yet).

    Raises ``ConfigError`` when ``run_dir`` is not a run that can be resumed:
    no or a broken ``config.json``, or a checkpoint that is unreadable or holds
    another network than the config describes.
    """
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
    """The most advanced resumable run in the folders under ``root``, or None if there is none.

    On Kaggle ``root`` is ``/kaggle/input``: a previous version's output,
    attached as input, holds its run folder (``config.json``, ``checkpoint.pt``,
    ``replay/``) read-only.  Folders holding a ``config.json`` or a checkpoint
    are candidates; the valid one with the most generations wins.  Raises
    ``ConfigError`` (from ``check_run``) when candidates exist but none is valid.
    """
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

    The copy is made beside ``run_dir`` and renamed into place when complete, so
    an interrupted copy leaves no half run.  Raises ``ConfigError`` if
    ``source`` is not a resumable run or ``run_dir`` already holds anything
    (nothing there is overwritten).
    """
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
