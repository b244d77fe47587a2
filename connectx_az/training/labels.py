"""The label file: positions whose result (and best moves) the exact solver has proven.  numpy only.

An ``.npz`` of ``position`` and ``mask`` (``uint64``, ``game``'s bitboards, side to move), ``plies``
(``int8``), ``result`` (``int8``, side to move: +1 win, 0 draw, -1 loss) and ``best`` (``uint8``: bit
``c`` set where column ``c`` keeps the result; 0 where not sought or lost; ``UNPROVEN_MOVES`` where sought
and not proven).  A file without ``best`` reads with 0.  ``tools.labeller`` writes them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from connectx_az import files, paths
from connectx_az.engine import game

#: the fields of a labels file, and their dtypes
FIELDS = {"position": np.uint64, "mask": np.uint64, "plies": np.int8, "result": np.int8, "best": np.uint8}
#: the bits of ``best`` that are columns
COLUMN_BITS = (1 << game.COLS) - 1
#: ``best`` of a position whose best moves were sought and not proven within the budget
UNPROVEN_MOVES = 1 << game.COLS
#: the name of the package's own label file (``train.solved_labels=builtin``; ``data/labels/README.md``)
BUILTIN = "builtin"
BUILTIN_PATH = paths.BUILTIN_LABELS
#: the command that made the shipped file
LABEL_COMMAND = "connectx-az label {path} --moves --plies 4 12 --max-nodes 30000000 --positions 16000"


def resolve(path: str | Path) -> Path:
    """The file ``path`` names: ``BUILTIN`` is the package's own label file."""
    return BUILTIN_PATH if str(path) == BUILTIN else Path(path)


class LabelsError(ValueError):
    """A labels file that is missing, unreadable or malformed."""


@dataclass(frozen=True)
class Labels:
    """Proven positions: parallel arrays, one entry a position (the module's fields)."""

    position: np.ndarray
    mask: np.ndarray
    plies: np.ndarray
    result: np.ndarray
    best: np.ndarray

    def __len__(self) -> int:
        return len(self.result)

    def take(self, index: np.ndarray) -> Labels:
        """The positions that ``index`` (a boolean mask or integer indices) selects, in its order."""
        return Labels(**{name: getattr(self, name)[index] for name in FIELDS})

    def keys(self) -> set[tuple[int, int]]:
        return set(zip(self.position.tolist(), self.mask.tolist(), strict=True))

    def obs(self) -> np.ndarray:
        """``uint8[N, 2, 6, 7]`` network inputs (``game.encode``)."""
        if not len(self):
            return np.zeros((0, 2, game.ROWS, game.COLS), np.uint8)
        return np.stack([game.encode(int(p), int(m)) for p, m in zip(self.position, self.mask, strict=True)])

    def has_moves(self) -> np.ndarray:
        """``bool[N]``: the positions that carry their best moves (a policy target)."""
        return (self.best & COLUMN_BITS) != 0

    def lacks_moves(self) -> np.ndarray:
        """``bool[N]``: the positions, won or drawn, whose best moves were never sought."""
        return (self.best == 0) & (self.result >= 0)

    def moves_to_seek(self, retry_unproven: bool = False) -> np.ndarray:
        """``bool[N]``: those lacking best moves, and with ``retry_unproven`` those not proven in budget."""
        return self.lacks_moves() | (retry_unproven & (self.best == UNPROVEN_MOVES))

    def policy(self) -> np.ndarray:
        """``float32[N, 7]`` policy targets: uniform over each position's ``best`` columns (0 without them)."""
        bits = ((self.best & COLUMN_BITS)[:, None].astype(np.int64) >> np.arange(game.COLS)) & 1
        return (bits / np.maximum(bits.sum(axis=1, keepdims=True), 1)).astype(np.float32)

    def counts(self) -> tuple[int, int, int]:
        """``(wins, draws, losses)`` for the side to move."""
        return int(np.sum(self.result > 0)), int(np.sum(self.result == 0)), int(np.sum(self.result < 0))


def empty() -> Labels:
    return Labels(**{name: np.zeros(0, dtype) for name, dtype in FIELDS.items()})


def from_rows(rows: list[tuple[int, int, int, int, int]]) -> Labels:
    """Labels from ``(position, mask, plies, result, best)`` tuples."""
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in FIELDS]
    return Labels(**{name: np.array(col, dtype) for (name, dtype), col in zip(FIELDS.items(), columns, strict=True)})


def concat(*parts: Labels) -> Labels:
    """The positions of all ``parts``, each position once (its first label kept)."""
    whole = Labels(**{name: np.concatenate([getattr(p, name) for p in parts]) if parts else np.zeros(0, dtype)
                      for name, dtype in FIELDS.items()})
    keys = np.stack([whole.position, whole.mask], axis=1) if len(whole) else np.zeros((0, 2), np.uint64)
    _, first = np.unique(keys, axis=0, return_index=True)
    keep = np.sort(first)
    return whole.take(keep)


def save(path: str | Path, labels: Labels) -> Path:
    """Write ``labels`` atomically (a run killed mid-write leaves the previous file)."""
    return files.atomic_write(path, lambda f: np.savez(f, **{name: getattr(labels, name) for name in FIELDS}))


def load(path: str | Path) -> Labels:
    """Read a labels file (``BUILTIN``: the package's); ``LabelsError`` if missing, unreadable or malformed."""
    path = resolve(path)
    if not path.is_file():
        raise LabelsError(f"labels file {path} does not exist; write one with `{LABEL_COMMAND.format(path=path)}`, "
                          f"or use the package's: train.solved_labels={BUILTIN}")
    try:
        with np.load(path) as data:
            arrays = {name: np.asarray(data[name]) for name in FIELDS if name != "best"}
            arrays["best"] = np.asarray(data["best"]) if "best" in data.files else \
                np.zeros(arrays["result"].shape, np.uint8)
    except (OSError, ValueError, KeyError, EOFError) as exc:
        raise LabelsError(f"{path} is not a labels file written by `connectx-az label` ({type(exc).__name__})") \
            from exc
    sizes = {a.shape for a in arrays.values()}
    if len(sizes) != 1 or len(next(iter(sizes))) != 1:
        raise LabelsError(f"{path}: its arrays {sorted(FIELDS)} must be one-dimensional and of one length")
    labels = Labels(**{name: arrays[name].astype(dtype, copy=False) for name, dtype in FIELDS.items()})
    if len(labels) and not np.all(np.isin(labels.result, (-1, 0, 1))):
        raise LabelsError(f"{path}: results must be -1, 0 or 1 (side to move's loss, draw, win)")
    if np.any(labels.position & ~labels.mask):
        raise LabelsError(f"{path}: a position has stones outside its mask; these are not game.py bitboards")
    if np.any((labels.best > COLUMN_BITS) & (labels.best != UNPROVEN_MOVES)):
        raise LabelsError(f"{path}: best moves must be a bitmask of the {game.COLS} columns")
    return labels
