"""The opening book: its tree, its keys, its file, its build (resumable) and the agent's use of it."""

from __future__ import annotations

import base64
import struct
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from connectx_az import paths
from connectx_az.agent import template
from connectx_az.cli import main as cli_main
from connectx_az.engine import book, game, solver
from connectx_az.tools import book_build, book_journal, builder

# A Middle-Easy position (28 plies, the side to move wins); within 6 plies its tree holds wins, draws and losses,
# and the pure-Python solver proves it all in a fraction of a second.
ROOT_MOVES = "1233722555341451114725221333"
ROOT = game.from_moves(ROOT_MOVES)
DEPTH = len(ROOT_MOVES) + 6


def _build(path: Path, **kwargs) -> tuple[book_journal.State, book_build.BuildStats]:
    state = book_journal.State.open(path)
    return state, book_build.build(state, depth=DEPTH, root=ROOT, prover=solver.Solver(), **kwargs)


@pytest.fixture(scope="module")
def small_book(tmp_path_factory) -> tuple[dict[int, book_journal.Entry], Path]:
    """The entries of the tree from ``ROOT`` to ``DEPTH``, and its book file."""
    folder = tmp_path_factory.mktemp("book")
    state, _ = _build(folder / "state.bin")
    with state:
        path, _, _ = book_build.write_book(state, folder / "book.bin")
        return dict(state.entries), path


# --------------------------------------------------------------------------- keys and the tree


def test_mirrored_positions_share_one_key_and_the_move_is_mirrored_back():
    position, mask = game.from_ascii("""
        .......
        .......
        .......
        .......
        .o.....
        xxo....
    """)
    mirrored = game.mirror(position, mask)
    assert book.canonical_key(position, mask)[0] == book.canonical_key(*mirrored)[0]
    assert book.canonical_key(position, mask)[1] != book.canonical_key(*mirrored)[1]
    key, canon_position, canon_mask = book_build.canonical(position, mask)
    assert canon_position + canon_mask == key == min(position + mask, mirrored[0] + mirrored[1])
    opening = book.decode(book.encode(np.array([key], np.uint64), np.array([book.make_info(1, 1)], np.uint8)))
    # column 1 in the canonical orientation; the reflection of the canonical board sees column 5
    assert opening.move(canon_position, canon_mask) == 1
    assert opening.move(*game.mirror(canon_position, canon_mask)) == 5
    assert opening.entry(canon_position, canon_mask) == (1, 1)
    assert opening.move(*game.from_moves("4")) is None
    # mirror_bits is game.mirror on each bitboard, for ints and arrays alike
    assert (book.mirror_bits(position), book.mirror_bits(mask)) == mirrored
    keys = np.array([position + mask, 0, key], np.uint64)
    assert book.mirror_bits(keys).tolist() == [book.mirror_bits(int(k)) for k in keys]
    assert book_build.position_of_key(position + mask) == (position, mask)


def test_the_tree_plays_one_move_at_the_agents_nodes_and_every_reply_at_the_opponents():
    position, mask = game.from_ascii("""
        .......
        .......
        .......
        ...o...
        ...x...
        ..ox...
    """)
    key = position + mask
    grand = book_build.next_agent_nodes({key: (position, mask)}, lambda k, p, m: 2)
    after = game.play(position, mask, 2)
    expected = {book_build.canonical(*game.play(*after, reply))[0] for reply in game.legal_cols(after[1])}
    assert set(grand) == expected and len(expected) == 7  # one move, then all seven replies
    assert all(game.num_stones(m) == game.num_stones(mask) + 2 for _, m in grand.values())
    # the agent's win ends the line; a reply that wins ends it too
    wins = game.from_ascii("""
        .......
        .......
        .......
        ...x...
        ...x...
        oo.x.o.
    """)
    assert book_build.next_agent_nodes({wins[0] + wins[1]: wins}, lambda k, p, m: 3) == {}


def test_forced_moves_are_those_the_agent_plays_before_its_book():
    rng = np.random.default_rng(3)
    agent = template.Agent()
    kinds = set()
    for _ in range(300):
        position, mask = game.initial()
        for _ in range(int(rng.integers(4, 30))):
            if game.outcome(position, mask) is not None:
                break
            position, mask = game.play(position, mask, int(rng.choice(game.legal_cols(mask))))
        if game.outcome(position, mask) is not None:
            continue
        forced = game.forced_move(position, mask)
        mark = 1 + game.num_stones(mask) % 2
        agent.info = {}
        if forced is None:
            assert book_build.needs_entry(position, mask)
            continue
        obs = {"board": game.to_kaggle(position, mask, mark), "mark": mark, "remainingOverageTime": 60}
        assert agent.choose_move(obs, {"rows": 6, "columns": 7, "inarow": 4, "actTimeout": 2}) == forced[0]
        assert agent.info["source"] == forced[1]
        kinds.add(forced[1])
    assert kinds >= {"win now", "block"}


# --------------------------------------------------------------------------- the file


def _random_book(num: int) -> tuple[np.ndarray, np.ndarray, bytes]:
    """``(keys, info, file bytes)`` of a book of about ``num`` random entries, sorted, the empty board's key first."""
    rng = np.random.default_rng(0)
    keys = np.unique(rng.integers(0, 1 << 49, num, dtype=np.uint64))
    keys[0] = 0  # the empty board's key
    info = (((rng.integers(-1, 2, len(keys)) + 1) << 3) | rng.integers(0, 7, len(keys))).astype(np.uint8)
    order = rng.permutation(len(keys))
    return keys, info, book.encode(keys[order], info[order])


def test_encode_decode_round_trip():
    keys, info, data = _random_book(50_000)
    opening = book.decode(data)
    assert np.array_equal(opening.keys, keys) and np.array_equal(opening.info, info)
    assert len(data) < 9 * len(keys)  # 2^49 random keys: about 6 bytes an entry; a real book's are closer
    empty = book.decode(book.encode(np.zeros(0, np.uint64), np.zeros(0, np.uint8)))
    assert len(empty) == 0 and empty.move(0, 0) is None
    with pytest.raises(ValueError, match="distinct"):
        book.encode(np.array([5, 5], np.uint64), np.zeros(2, np.uint8))


@pytest.mark.timing
def test_the_decode_is_fast():
    data = _random_book(50_000)[2]
    start = time.perf_counter()
    book.decode(data)
    seconds = time.perf_counter() - start
    assert seconds < 0.1, seconds


def _random_positions(rng: np.random.Generator, num: int) -> dict[int, tuple[int, int]]:
    """``num`` distinct positions of random games (2 to 20 stones, not over), by mirror-canonical key."""
    found: dict[int, tuple[int, int]] = {}
    while len(found) < num:
        position, mask = game.initial()
        for _ in range(int(rng.integers(2, 21))):
            col = int(rng.choice(game.legal_cols(mask)))
            if game.outcome(*game.play(position, mask, col)) is not None:
                break
            position, mask = game.play(position, mask, col)
        found.setdefault(book.canonical_key(position, mask)[0], (position, mask))
    return found


def test_positions_missing_from_the_book_find_nothing_whatever_their_neighbours():
    # Half of a set of random positions go into a book; the other half, whose keys fall between and around the
    # book's, must find nothing (no neighbouring entry's move), and every book position finds its own entry.
    rng = np.random.default_rng(5)
    positions = _random_positions(rng, 2000)
    keys = np.array(sorted(positions), np.uint64)
    held = rng.permutation(len(keys))[: len(keys) // 2]
    info = rng.integers(0, 7, len(held)).astype(np.uint8) | (2 << 3)
    opening = book.decode(book.encode(keys[held], info))
    expected = {int(k): int(c) & 7 for k, c in zip(keys[held], info, strict=True)}
    missing = [positions[int(k)] for k in np.delete(keys, held)]
    inside = [p for p in missing if opening.keys[0] < book.canonical_key(*p)[0] < opening.keys[-1]]
    assert len(inside) > 900  # most missing keys lie between two of the book's
    for position, mask in missing:
        assert opening.entry(position, mask) is None and opening.move(position, mask) is None
        assert opening.entry(*game.mirror(position, mask)) is None
    for key, col in expected.items():
        position, mask = positions[key]
        mirrored = book.canonical_key(position, mask)[1]
        assert opening.entry(position, mask) == ((6 - col) if mirrored else col, 1)


def _other_board(data: bytes) -> bytes:
    header = bytearray(data[:book.HEADER_BYTES])
    header[10] = 7  # rows
    return bytes(header) + data[book.HEADER_BYTES:]


def _bad_books(data: bytes) -> dict[str, tuple[bytes, str]]:
    flipped = bytearray(data)
    flipped[-3] ^= 0xFF
    return {
        "truncated": (data[:-5], "truncated"),
        "header only": (data[:20], "truncated"),
        "corrupt": (bytes(flipped), "corrupt"),
        "not a book": (b"PK\x03\x04" + data[4:], "not a book"),
        "other board": (_other_board(data), "7x7 board"),
    }


def test_bad_book_files_are_refused_in_one_line(small_book, tmp_path):
    data = small_book[1].read_bytes()
    for name, (bad, reason) in _bad_books(data).items():
        with pytest.raises(book.BookError, match=reason) as caught:
            book.decode(bad)
        assert "\n" not in str(caught.value), name
        path = tmp_path / f"{name}.bin"
        path.write_bytes(bad)
        with pytest.raises(book.BookError, match=f"{path.name}: .*{reason}"):
            book_build.read_book(path)
    # keys out of order behind a valid checksum
    keys = zlib.compress(np.array([[3, 0]], "<u8").view(np.uint8).reshape(-1, 8).T.tobytes(), 9)
    infos = zlib.compress(bytes([1, 2]), 9)
    header = struct.pack("<8sHBBBxIIII", book.MAGIC, book.VERSION, 6, 7, 4, 2, len(keys), len(infos),
                         zlib.crc32(keys + infos))
    with pytest.raises(book.BookError, match="not strictly increasing"):
        book.decode(header + keys + infos)


def test_the_submission_builder_refuses_a_bad_book_in_one_line(small_book, small_onnx, tmp_path, capsys):
    data = small_book[1].read_bytes()
    for name, (bad, reason) in _bad_books(data).items():
        path = tmp_path / f"{name}.bin"
        path.write_bytes(bad)
        with pytest.raises(builder.BuildError, match=reason) as caught:
            builder.build_submission(small_onnx, tmp_path / "sub.py", book_path=path)
        assert "\n" not in str(caught.value) and not (tmp_path / "sub.py").exists(), name
    with pytest.raises(builder.BuildError, match="cannot read book"):
        builder.build_submission(small_onnx, tmp_path / "sub.py", book_path=tmp_path / "missing.bin")
    assert cli_main.main(["build", "--model", str(small_onnx), "--book", str(tmp_path / "other board.bin"),
                     "--out", str(tmp_path / "sub.py")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: book ") and "7x7 board" in err


def test_build_with_and_without_a_book(small_book, small_onnx, tmp_path, capsys):
    with_book = builder.build_submission(small_onnx, tmp_path / "with.py", book_path=small_book[1])
    assert with_book.book_entries == len(small_book[0]) and with_book.book_bytes == small_book[1].stat().st_size
    assert cli_main.main(["build", "--model", str(small_onnx), "--no-book", "--out", str(tmp_path / "without.py")]) == 0
    assert "book: none (--no-book)" in capsys.readouterr().out
    text = (tmp_path / "without.py").read_text()
    assert 'BOOK_B64 = ""\n' in text and "# book: none" in text
    namespace: dict = {}
    exec(compile(text, "without.py", "exec"), namespace)
    assert namespace["_agent"].load_book() is None and namespace["_agent"].book_error == ""
    namespace = {}
    exec(compile((tmp_path / "with.py").read_text(), "with.py", "exec"), namespace)
    loaded = namespace["_agent"].load_book()
    assert loaded is not None and len(loaded) == len(small_book[0])


# --------------------------------------------------------------------------- the agent


def _observation(position: int, mask: int, bank: float = 60.0, act: float = 2.0) -> tuple[dict, dict]:
    mark = 1 + game.num_stones(mask) % 2
    return ({"board": game.to_kaggle(position, mask, mark), "mark": mark, "step": game.num_stones(mask),
             "remainingOverageTime": bank}, {"rows": 6, "columns": 7, "inarow": 4, "actTimeout": act})


def test_the_agent_plays_the_book_move_first_and_mirrored(small_book):
    entries, path = small_book
    agent = template.from_model_bytes(None, book_data=path.read_bytes())
    key, entry = next((k, e) for k, e in sorted(entries.items()) if book.mirror_bits(k) != k)
    position, mask = book_build.position_of_key(key)
    for flip in (False, True):
        p, m = game.mirror(position, mask) if flip else (position, mask)
        move = agent(*_observation(p, m))
        assert agent.info["source"] == "book" and type(move) is int
        assert move == (game.COLS - 1 - entry.col if flip else entry.col)
    assert agent.book is not None and agent.book_seconds > 0  # decoded once, on the first call, and timed


@pytest.mark.timing
def test_the_agent_decodes_its_book_quickly(small_book):
    agent = template.from_model_bytes(None, book_data=small_book[1].read_bytes())
    agent(*_observation(*ROOT))
    assert agent.book is not None and agent.book_seconds < 0.1


def test_an_agent_whose_book_fails_to_decode_plays_on(small_book):
    data = small_book[1].read_bytes()
    for bad, _ in _bad_books(data).values():
        agent = template.from_model_bytes(None, book_data=bad)
        position, mask = ROOT
        move = agent(*_observation(position, mask, bank=0.0, act=0.4))  # no bank: no compile, the Python solver
        assert type(move) is int and game.is_legal(mask, move)
        assert agent.info["source"] != "book" and agent.book is None and agent.book_error
    agent = template.Agent(book_b64="not base64 at all!")
    assert type(agent(*_observation(*ROOT, bank=0.0, act=0.4))) is int and "Error" in agent.book_error


# --------------------------------------------------------------------------- the build


def test_the_books_entries_are_reproven_by_the_solver(small_book):
    entries, path = small_book
    assert {e.result for e in entries.values()} == {-1, 0, 1}
    prover = solver.Solver()
    rng = np.random.default_rng(1)
    keys = sorted(entries)
    for key in rng.choice(keys, 20, replace=False).tolist():
        entry = entries[key]
        position, mask = book_build.position_of_key(key)
        assert book_build.needs_entry(position, mask)
        scores = prover.move_scores(position, mask)
        best = max(s for s in scores if s is not None)
        assert np.sign(best) == entry.result
        if entry.score != book_journal.NO_SCORE:
            assert scores[entry.col] == entry.score == best  # the fastest win, the slowest loss
        else:
            assert np.sign(scores[entry.col]) == entry.result  # keeps the result
    # every agent's node of the tree is in the book, and only those
    opening = book_build.read_book(path)
    walked = {book.canonical_key(p, m)[0] for _, p, m in book_build.walk(opening.move, DEPTH, ROOT)}
    assert walked == set(keys)


def test_a_killed_build_resumes_with_nothing_lost_or_proven_twice(small_book, tmp_path, monkeypatch):
    calls: list[int] = []
    prove = book_build.prove_entry

    def counted(prover, position, mask, *args):
        calls.append(position + mask)
        return prove(prover, position, mask, *args)

    monkeypatch.setattr(book_build, "prove_entry", counted)
    state_path = tmp_path / "state.bin"

    def stop_after(n: int):
        def on_progress(progress: book_build.Progress) -> None:
            if len(calls) >= n:
                raise KeyboardInterrupt
        return on_progress

    state, stats = _build(state_path, on_progress=stop_after(7))
    state.close()
    assert stats.interrupted and len(calls) == 7 and len(state.entries) == 7
    # a kill in the middle of writing a record leaves part of it: dropped, and that position proven again
    with open(state_path, "ab") as f:
        f.write(b"\x01" * 11)
    state, stats = _build(state_path, on_progress=stop_after(15))
    state.close()
    assert state.dropped_tail == 11 and stats.proven == 8 and len(state.entries) == 15
    state, stats = _build(state_path)
    with state:
        assert not stats.interrupted
        assert len(calls) == len(set(calls)) == len(small_book[0])
        assert {k: (e.result, e.score, e.col, e.ply) for k, e in state.entries.items()} == \
               {k: (e.result, e.score, e.col, e.ply) for k, e in small_book[0].items()}
    state, stats = _build(state_path)  # all done: nothing to prove
    state.close()
    assert stats.proven == 0 and len(calls) == len(small_book[0])


def test_the_estimate_of_time_left_counts_only_the_plies_still_to_prove(small_book, tmp_path):
    # each deeper ply costs about as much as this one ...
    assert book_build._later_plies(3, 6, -1, 0.1, set()) == 3.0
    # ... but a ply of the tree only costs the tree's share of a ply that holds every position
    assert book_build._later_plies(4, 16, 6, 0.1, set()) == pytest.approx(2 + 10 * 0.1)
    # and a tree ply an earlier build proved costs nothing; a ply of every position always costs
    assert book_build._later_plies(4, 8, 6, 0.5, {5, 6, 7}) == pytest.approx(1 + 1 + 0 + 0.5)
    assert book_build._later_plies(6, 16, 6, 0.1, set(range(17))) == 0.0
    assert book_build._seconds_left(done=10, total=30, seconds=5.0, later=2.0, workers=2) == \
        pytest.approx((20 + 60) * 0.5 / 2)
    # a build ends at 0 s left
    left: list[float | None] = []
    _build(tmp_path / "state.bin", on_progress=lambda progress: left.append(progress.seconds_left))
    assert left[-1] == 0.0 and all(s is None or s >= 0 for s in left)


def test_bad_state_files_are_refused_in_one_line(small_book, tmp_path, capsys):
    state, _ = _build(tmp_path / "good.bin")
    state.close()
    data = (tmp_path / "good.bin").read_bytes()
    record = struct.calcsize("<QbbBBIII")
    header = len(data) - len(small_book[0]) * record
    middle = bytearray(data)
    middle[header + 2 * record + 3] ^= 0x10
    other = bytearray(data)
    other[10] = 5  # rows
    cases = {
        "corrupt": (bytes(middle), "record 2 fails its checksum"),
        "header": (data[:header - 3], "truncated"),
        "magic": (b"X" + data[1:], "not a book state file"),
        "board": (bytes(other), "5x7 board"),
    }
    for name, (bad, reason) in cases.items():
        path = tmp_path / f"{name}.bin"
        path.write_bytes(bad)
        with pytest.raises(book_journal.StateError, match=reason) as caught:
            book_journal.State.open(path)
        assert "\n" not in str(caught.value)
    with pytest.raises(book_journal.StateError, match="--exact-factor 2"):
        book_journal.State.open(tmp_path / "good.bin", exact_factor=3.0)
    with book_journal.State.open(tmp_path / "good.bin"), pytest.raises(book_journal.StateError, match="in use"):
        book_journal.State.open(tmp_path / "good.bin")
    assert cli_main.main(["book", str(tmp_path / "corrupt.bin"), "--depth", "1", "--python"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "fails its checksum" in err
    # the last record torn by a kill: dropped, not refused
    torn = bytearray(data)
    torn[-2] ^= 0x01
    (tmp_path / "torn.bin").write_bytes(bytes(torn))
    with book_journal.State.open(tmp_path / "torn.bin") as state:
        assert len(state.entries) == len(small_book[0]) - 1 and state.dropped_tail == record


def test_the_command_builds_resumes_and_writes_the_book(tmp_path, capsys):
    args = ["book", str(tmp_path / "state.bin"), "--root", ROOT_MOVES, "--depth", str(len(ROOT_MOVES) + 2),
            "--python", "--out", str(tmp_path / "book.bin")]
    assert cli_main.main(args) == 0
    assert f"ply {len(ROOT_MOVES) + 2}:" in capsys.readouterr().out
    opening = book_build.read_book(tmp_path / "book.bin")
    assert cli_main.main(args) == 0
    out = capsys.readouterr().out
    assert f"{len(opening):,} positions proven before" in out and "this run 0 proven" in out
    assert book_build.read_book(tmp_path / "book.bin").keys.tolist() == opening.keys.tolist()


# --------------------------------------------------------------------------- the shipped book


def _shipped() -> tuple[book.Book, list[tuple[int, int]]]:
    opening = book.decode(paths.DEFAULT_BOOK.read_bytes())
    return opening, [book_build.position_of_key(int(k)) for k in opening.keys]


@pytest.mark.timing
def test_the_shipped_book_decodes_quickly():
    data = paths.DEFAULT_BOOK.read_bytes()
    start = time.perf_counter()
    book.decode(data)
    assert time.perf_counter() - start < 0.1


def test_the_shipped_books_entries_are_sound():
    data = paths.DEFAULT_BOOK.read_bytes()
    opening = book.decode(data)
    assert len(base64.b64encode(data)) < 1_500_000  # the submission stays under 4 MB
    assert opening.entry(0, 0) is not None and opening.entry(0, 0)[1] == 1  # the first player wins
    sample = np.random.default_rng(0).choice(len(opening), min(2000, len(opening)), replace=False)
    for i in sample.tolist():
        position, mask = book_build.position_of_key(int(opening.keys[i]))
        assert book_build.needs_entry(position, mask), i
        col, _ = book.Book(opening.keys[i:i + 1], opening.info[i:i + 1]).entry(position, mask)
        assert game.is_legal(mask, col)


def test_the_shipped_book_holds_every_position_to_ply_7():
    opening = book.decode(paths.DEFAULT_BOOK.read_bytes())
    nodes = {0: (0, 0)}
    for ply in range(8):
        held = [opening.entry(p, m) is not None for p, m in nodes.values() if book_build.needs_entry(p, m)]
        assert held and all(held), (ply, held.count(False))
        nodes = book_build.all_positions(nodes)


@pytest.mark.slow
def test_a_sample_of_the_shipped_books_entries_is_reproven():
    from connectx_az.engine import solver_numba

    opening, positions = _shipped()
    plies = np.array([game.num_stones(m) for _, m in positions])
    rng = np.random.default_rng(2)
    deepest = rng.choice(np.flatnonzero(plies == plies.max()), 5, replace=False)  # the agent's tree at its depth
    every = rng.choice(np.flatnonzero(plies == 7), 3, replace=False)  # every position to ply 7 (--all-plies 7)
    prover = solver_numba.make_solver()
    for i in deepest.tolist() + every.tolist():
        position, mask = positions[i]
        col, result = book.Book(opening.keys[i:i + 1], opening.info[i:i + 1]).entry(position, mask)
        prover.clear()
        assert prover.solve(position, mask, weak=True) == result
        child = game.play(position, mask, col)
        if result >= 0 and game.outcome(*child) is None:
            prover.clear()
            assert -prover.solve(*child, weak=True) == result  # the move keeps the result


def test_workers_prove_the_same_entries(small_book, tmp_path):
    with book_journal.State.open(tmp_path / "state.bin") as state:
        book_build.build(state, depth=DEPTH, root=ROOT, prover=solver.Solver(), workers=2)
        assert {k: (e.result, e.score, e.col) for k, e in state.entries.items()} == \
               {k: (e.result, e.score, e.col) for k, e in small_book[0].items()}
