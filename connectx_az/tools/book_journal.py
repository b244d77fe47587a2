"""The book builder's state file: an append-only journal of proven entries (``State``), safe against a kill.

Each record is written as soon as its position is proven, so a build killed at any moment loses only the positions
being proven then; a rerun proves only what is missing.  Each record carries its crc32: a last record cut short by
a kill is dropped on reopening (said so), a bad record anywhere else is refused (``StateError``).  Layout,
little-endian: a header ``<8sHBBBxdQ`` (magic ``b"CXAZBKST"``, version, rows, columns, inarow, ``exact_factor``,
``exact_min_nodes``), then 24-byte records ``<QbbBBIII``: key, result, exact score (``NO_SCORE`` if not sought or not
found), column (canonical orientation), ply, kilo-nodes, CPU milliseconds, crc32 of the first 20 bytes."""

from __future__ import annotations

import os
import struct
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from connectx_az.engine import game

STATE_MAGIC = b"CXAZBKST"
STATE_VERSION = 1
_STATE_HEADER = struct.Struct("<8sHBBBxdQ")
_RECORD = struct.Struct("<QbbBBIII")
_RECORD_BODY = _RECORD.size - 4  # the bytes the crc covers
#: ``Entry.score`` when the exact score was not sought or not found within the budget
NO_SCORE = -128
_FSYNC_SECONDS = 10.0


class StateError(ValueError):
    """A state file that cannot be resumed; the message says why in one line."""


@dataclass(frozen=True)
class Entry:
    """One proven position: its mirror-canonical ``key``; ``result`` (-1, 0, 1) and ``score`` (Pons' exact
    score, or ``NO_SCORE``) for the side to move; ``col`` the book's move in the canonical orientation;
    ``ply``; what proving it cost (``nodes``, ``cpu_seconds``)."""

    key: int
    result: int
    score: int
    col: int
    ply: int
    nodes: int
    cpu_seconds: float

    def pack(self) -> bytes:
        body = _RECORD.pack(self.key, self.result, self.score, self.col, self.ply,
                            min(self.nodes // 1000, 0xFFFFFFFF), min(round(self.cpu_seconds * 1000), 0xFFFFFFFF), 0)
        return body[:_RECORD_BODY] + struct.pack("<I", zlib.crc32(body[:_RECORD_BODY]))


def _unpack(record: bytes) -> Entry | None:
    """The entry of a 24-byte record, ``None`` if its checksum fails."""
    key, result, score, col, ply, knodes, cpu_ms, crc = _RECORD.unpack(record)
    if zlib.crc32(record[:_RECORD_BODY]) != crc:
        return None
    return Entry(key, result, score, col, ply, knodes * 1000, cpu_ms / 1000)


def _lock(handle, path: Path) -> None:
    """Hold an exclusive lock on the open state file (where the system has ``fcntl``): a second build of the
    same file would interleave its records, so it is refused."""
    try:
        import fcntl
    except ImportError:
        return
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise StateError(f"{path} is in use by another build; wait for it or stop it") from None


class State:
    """The journal of a build: ``entries`` (key -> ``Entry``), and the rule's budgets it was built with.

    ``State.open`` reads (or creates) a file; ``add`` appends one entry and flushes it to the operating system at
    once (a killed process loses nothing written), with an fsync every few seconds and at ``close``.  ``dropped_tail``:
    the bytes of a record cut short by a kill, dropped on opening.  Use as a context manager."""

    def __init__(self, path: Path, handle, entries: dict[int, Entry], *, exact_factor: float,
                 exact_min_nodes: int, dropped_tail: int = 0) -> None:
        self.path = path
        self.entries = entries
        self.exact_factor = exact_factor
        self.exact_min_nodes = exact_min_nodes
        self.dropped_tail = dropped_tail
        self._handle = handle
        self._synced = time.monotonic()

    @classmethod
    def open(cls, path: str | Path, *, exact_factor: float = 2.0, exact_min_nodes: int = 1_000_000) -> State:
        """Open the state at ``path``, creating it with these budgets if it does not exist.

        ``StateError`` (one line) for a file that is not a state, was built for another board or with other budgets
        (the rule would change midway), or is corrupt before its last record."""
        path = Path(path)
        if exact_factor < 0 or exact_min_nodes < 0:
            raise StateError("the exact budgets must be >= 0")
        if not path.exists() or path.stat().st_size == 0:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = open(path, "wb")
            _lock(handle, path)
            handle.write(_STATE_HEADER.pack(STATE_MAGIC, STATE_VERSION, game.ROWS, game.COLS, game.INAROW,
                                            exact_factor, exact_min_nodes))
            handle.flush()
            os.fsync(handle.fileno())
            return cls(path, handle, {}, exact_factor=exact_factor, exact_min_nodes=exact_min_nodes)
        handle = open(path, "r+b")
        try:
            _lock(handle, path)
            data = path.read_bytes()
            entries, good = cls._read(path, data, exact_factor, exact_min_nodes)
        except BaseException:
            handle.close()
            raise
        if good < len(data):  # a record cut short by a kill: drop it, its position is proven again
            handle.truncate(good)
        handle.seek(good)
        return cls(path, handle, entries, exact_factor=exact_factor, exact_min_nodes=exact_min_nodes,
                   dropped_tail=len(data) - good)

    @staticmethod
    def _read(path: Path, data: bytes, exact_factor: float, exact_min_nodes: int) -> tuple[dict[int, Entry], int]:
        """``(entries, bytes to keep)`` of a state file's contents; ``StateError`` if it cannot be resumed."""
        if len(data) < _STATE_HEADER.size:
            raise StateError(f"{path} is truncated: {len(data)} bytes, shorter than a state file's header")
        magic, version, rows, cols, inarow, factor, min_nodes = _STATE_HEADER.unpack_from(data)
        if magic != STATE_MAGIC:
            raise StateError(f"{path} is not a book state file (wrong magic bytes)")
        if version != STATE_VERSION:
            raise StateError(f"{path} is a state file of version {version}; this code reads version {STATE_VERSION}")
        if (rows, cols, inarow) != (game.ROWS, game.COLS, game.INAROW):
            raise StateError(f"{path} was built for a {rows}x{cols} board with {inarow} in a row, not "
                             f"{game.ROWS}x{game.COLS} with {game.INAROW}")
        if (factor, min_nodes) != (exact_factor, exact_min_nodes):
            raise StateError(f"{path} was built with --exact-factor {factor:g} --exact-min-nodes {min_nodes}; "
                             "resume it with those (or start another file)")
        entries: dict[int, Entry] = {}
        offset = _STATE_HEADER.size
        num_records = (len(data) - offset) // _RECORD.size
        for i in range(num_records):
            entry = _unpack(data[offset:offset + _RECORD.size])
            if entry is None:
                if i == num_records - 1 and offset + _RECORD.size == len(data):
                    break  # the last record, torn by a kill: dropped like a short one
                raise StateError(f"{path} is corrupt: record {i} fails its checksum")
            if not 0 <= entry.col < game.COLS or entry.result not in (-1, 0, 1):
                raise StateError(f"{path} is corrupt: record {i} holds column {entry.col}, result {entry.result}")
            entries[entry.key] = entry
            offset += _RECORD.size
        return entries, offset

    def add(self, entry: Entry) -> None:
        """Append ``entry`` to the file (flushed now) and to ``entries``."""
        self._handle.write(entry.pack())
        self._handle.flush()
        if time.monotonic() - self._synced > _FSYNC_SECONDS:
            os.fsync(self._handle.fileno())
            self._synced = time.monotonic()
        self.entries[entry.key] = entry

    def close(self) -> None:
        if not self._handle.closed:
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()

    def __enter__(self) -> State:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
