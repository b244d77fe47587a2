"""The opening book: proven moves for the openings, looked up by the agent before it searches.

``tools.book_build`` writes books; this module reads them.  Keys are Pons' ``position + mask`` (no
carry between columns, so a key mirrors column by column) made **mirror-canonical**: ``min(key,
mirror_bits(key))``; an entry's column is the move in the canonical orientation, reflected back
(``6 - col``) for a mirrored position.  An entry's ``info`` byte: bits 0-2 the column (0-6), bits 3-4
the proven result for the side to move plus one (0 lost, 1 drawn, 2 won).

A book file (``encode`` / ``decode``), little-endian::

    offset  size  field
    0       8     magic b"CXAZBOOK"
    8       2     format version (1)
    10      3     rows, columns, inarow of the board it was built for
    13      1     zero
    14      4     number of entries N
    18      4     bytes of the compressed keys
    22      4     bytes of the compressed infos
    26      4     crc32 of the two compressed blocks together
    30            zlib(keys): the sorted keys as first differences (uint64; the first from 0), their
                  bytes transposed (all lowest bytes first, ...), which zlib compresses well
            ...   zlib(infos): N info bytes in key order

``decode`` raises ``BookError`` for a wrong magic, version or board size, a truncated or corrupt
file, keys out of order, or an info byte out of range."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np

from connectx_az.engine import game

MAGIC = b"CXAZBOOK"
VERSION = 1
_HEADER = struct.Struct("<8sHBBBxIIII")
HEADER_BYTES = _HEADER.size
_H1 = game.ROWS + 1  # bits per column in a key, the sentinel bit included
_KEY_COLUMN = (1 << _H1) - 1
_MOVE_MASK = 0b111
_RESULT_SHIFT = 3
_MAX_INFO = (2 << _RESULT_SHIFT) | (game.COLS - 1)


class BookError(ValueError):
    """A book file that cannot be used; the message says why in one line."""


def mirror_bits(key):
    """A key or any bitboard of ``game``'s layout (int or ``uint64`` array), column ``c`` moved to ``6 - c``."""
    if isinstance(key, int):
        out = 0
        for col in range(game.COLS):
            out |= ((key >> (col * _H1)) & _KEY_COLUMN) << ((game.COLS - 1 - col) * _H1)
        return out
    key = np.asarray(key, dtype=np.uint64)
    out = np.zeros_like(key)
    column = np.uint64(_KEY_COLUMN)
    for col in range(game.COLS):
        out |= ((key >> np.uint64(col * _H1)) & column) << np.uint64((game.COLS - 1 - col) * _H1)
    return out


def canonical_key(position: int, mask: int) -> tuple[int, bool]:
    """``(key, mirrored)``: the position's mirror-canonical key, and whether it is its reflection's."""
    key = position + mask
    mirrored = mirror_bits(key)
    return (mirrored, True) if mirrored < key else (key, False)


def make_info(col: int, result: int) -> int:
    """The info byte of an entry: ``col`` (0-6) to play, ``result`` (-1, 0, 1) for the side to move."""
    if not 0 <= col < game.COLS or result not in (-1, 0, 1):
        raise ValueError(f"no info byte for column {col} and result {result}")
    return ((result + 1) << _RESULT_SHIFT) | col


@dataclass(frozen=True)
class Book:
    """A decoded book: ``keys`` ``uint64[N]`` sorted mirror-canonical keys, ``info`` ``uint8[N]``."""

    keys: np.ndarray
    info: np.ndarray

    def __len__(self) -> int:
        return len(self.keys)

    def entry(self, position: int, mask: int) -> tuple[int, int] | None:
        """``(col, result)`` for the position as it stands (side to move's -1, 0 or 1), or ``None``."""
        key, mirrored = canonical_key(position, mask)
        i = int(np.searchsorted(self.keys, np.uint64(key)))
        if i >= len(self.keys) or int(self.keys[i]) != key:
            return None
        info = int(self.info[i])
        col = info & _MOVE_MASK
        return (game.COLS - 1 - col if mirrored else col), (info >> _RESULT_SHIFT) - 1

    def move(self, position: int, mask: int) -> int | None:
        """The book's column for the position; ``None`` when it is not in the book or not legal (a damaged book)."""
        found = self.entry(position, mask)
        if found is None or not game.is_legal(mask, found[0]):
            return None
        return found[0]


def encode(keys: np.ndarray, info: np.ndarray) -> bytes:
    """The file's bytes for entries ``keys`` (``uint64[N]``, distinct) and ``info`` (``uint8[N]``), any order."""
    keys = np.asarray(keys, dtype=np.uint64)
    info = np.asarray(info, dtype=np.uint8)
    if keys.shape != info.shape or keys.ndim != 1:
        raise ValueError("keys and info must be one-dimensional and of one length")
    order = np.argsort(keys, kind="stable")
    keys, info = keys[order], info[order]
    if len(keys) > 1 and not np.all(keys[1:] > keys[:-1]):
        raise ValueError("keys must be distinct")
    if np.any(info > _MAX_INFO) or np.any((info & _MOVE_MASK) >= game.COLS):
        raise ValueError("an info byte is out of range")
    deltas = np.diff(keys, prepend=np.uint64(0)).astype("<u8")
    shuffled = deltas.view(np.uint8).reshape(-1, 8).T.tobytes()
    packed_keys = zlib.compress(shuffled, 9)
    packed_info = zlib.compress(info.tobytes(), 9)
    crc = zlib.crc32(packed_info, zlib.crc32(packed_keys))
    header = _HEADER.pack(MAGIC, VERSION, game.ROWS, game.COLS, game.INAROW, len(keys), len(packed_keys),
                          len(packed_info), crc)
    return header + packed_keys + packed_info


def decode(data: bytes) -> Book:
    """The ``Book`` in a file's bytes; ``BookError`` (one line) if it is not a sound book for this board."""
    data = bytes(data)
    if len(data) < HEADER_BYTES:
        raise BookError(f"book is truncated: {len(data)} bytes, shorter than its {HEADER_BYTES}-byte header")
    magic, version, rows, cols, inarow, num, num_keys, num_info, crc = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise BookError("not a book file (wrong magic bytes)")
    if version != VERSION:
        raise BookError(f"book format version {version}, this code reads version {VERSION}")
    if (rows, cols, inarow) != (game.ROWS, game.COLS, game.INAROW):
        raise BookError(f"book was built for a {rows}x{cols} board with {inarow} in a row, not "
                        f"{game.ROWS}x{game.COLS} with {game.INAROW}")
    if len(data) != HEADER_BYTES + num_keys + num_info:
        raise BookError(f"book is truncated or padded: {len(data)} bytes, its header says "
                        f"{HEADER_BYTES + num_keys + num_info}")
    body = memoryview(data)[HEADER_BYTES:]
    if zlib.crc32(body) != crc:
        raise BookError("book is corrupt: its checksum does not match")
    try:
        shuffled = zlib.decompress(body[:num_keys])
        info_bytes = zlib.decompress(body[num_keys:])
    except zlib.error as exc:
        raise BookError(f"book is corrupt: {exc}") from None
    if len(shuffled) != 8 * num or len(info_bytes) != num:
        raise BookError(f"book is corrupt: {num} entries announced, {len(info_bytes)} found")
    deltas = np.frombuffer(shuffled, np.uint8).reshape(8, num).T.copy().view("<u8").reshape(num)
    keys = np.cumsum(deltas, dtype=np.uint64)
    info = np.frombuffer(info_bytes, np.uint8)
    if num > 1 and int(deltas[1:].min()) == 0:
        raise BookError("book is corrupt: its keys are not strictly increasing")
    if num and (int(info.max()) > _MAX_INFO or int((info & _MOVE_MASK).max()) >= game.COLS):
        raise BookError("book is corrupt: an entry's column or result is out of range")
    return Book(keys=keys, info=info)
