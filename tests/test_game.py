"""Rules: known position counts, the 69 winning lines, Kaggle's referee, encoding and mirroring."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from connectx_az.engine import game


def test_distinct_positions_per_ply_match_known_counts() -> None:
    # OEIS A212693: positions reachable after n plies (games stop at a win).
    known = [1, 7, 49, 238, 1120, 4263, 16422, 54859, 184275]
    position = np.zeros(1, np.uint64)
    mask = np.zeros(1, np.uint64)
    counts = [1]
    for _ in range(len(known) - 1):
        alive = ~game.is_win(game.mover_stones(position, mask))
        position, mask = position[alive], mask[alive]
        legal = game.legal_mask(mask)
        rows, cols = np.nonzero(legal)
        position, mask = game.play(position[rows], mask[rows], cols)
        _, keep = np.unique(position + mask, return_index=True)  # Pons' unique key
        position, mask = position[keep], mask[keep]
        counts.append(len(mask))
    assert counts == known


def test_there_are_69_winning_lines() -> None:
    lines = set()
    for bit in range(64):
        for shift in (1, 6, 7, 8):
            stones = sum(1 << (bit + k * shift) for k in range(4))
            if stones & ~game.BOARD_MASK == 0 and game.is_win(stones):
                lines.add(stones)
    assert len(lines) == 69


def test_immediate_win_and_outcome() -> None:
    position, mask = game.from_ascii("""
        .......
        .......
        .......
        x......
        xo.....
        xo.o...
    """)
    assert game.winning_cols(position, mask) == [0]
    assert game.outcome(position, mask) is None
    after = game.play(position, mask, 0)
    assert game.outcome(*after) == -1


def test_a_full_board_without_four_is_a_draw() -> None:
    position, mask = game.from_moves("666165577462463234152541333211132724554777")
    assert game.to_ascii(position, mask) == "\n".join(
        ["xxoxooo", "oxxoxxx", "xooxoxo", "oxxooxo", "xoxxxox", "ooxooxo"])
    assert mask == game.BOARD_MASK
    assert game.outcome(position, mask) == 0


def test_encode_planes_side_to_move_first_top_row_first() -> None:
    position, mask = game.from_moves("4453")
    obs = game.encode(position, mask)
    assert obs.shape == (2, 6, 7) and obs.dtype == np.uint8
    # Side to move is the first player: stones in columns 4 and 5 (1-based), bottom row.
    assert obs[0, 5].tolist() == [0, 0, 0, 1, 1, 0, 0]
    assert obs[1, 5].tolist() == [0, 0, 1, 0, 0, 0, 0]
    assert obs[1, 4].tolist() == [0, 0, 0, 1, 0, 0, 0]
    assert game.decode(obs) == (position, mask)


def test_decode_reads_a_batch_of_planes_as_each_one_alone() -> None:
    rng = np.random.default_rng(2)
    pairs = [_random_position(rng, int(rng.integers(0, 30))) for _ in range(40)]
    positions, masks = (np.array(column, np.uint64) for column in zip(*pairs, strict=True))
    obs = game.encode(positions, masks)
    got_positions, got_masks = game.decode(obs)
    assert got_positions.dtype == np.uint64 and got_positions.shape == (40,)
    np.testing.assert_array_equal(got_positions, positions)
    np.testing.assert_array_equal(got_masks, masks)
    assert [game.decode(o) for o in obs] == pairs
    two_d, _ = game.decode(obs.reshape(4, 10, 2, 6, 7))
    np.testing.assert_array_equal(two_d.reshape(-1), positions)


def test_mirror_flips_encoding_and_is_an_involution() -> None:
    rng = np.random.default_rng(1)
    for _ in range(50):
        position, mask = _random_position(rng, int(rng.integers(0, 30)))
        mp, mm = game.mirror(position, mask)
        assert np.array_equal(game.encode(mp, mm), game.encode(position, mask)[:, :, ::-1])
        assert game.mirror(mp, mm) == (position, mask)


def test_kaggle_board_round_trip_and_errors() -> None:
    position, mask = game.from_moves("44536")
    board = game.to_kaggle(position, mask, mark=2)
    assert game.from_kaggle(board, 2) == (position, mask)
    with pytest.raises(ValueError, match="cells"):
        game.from_kaggle(board[:-1], 2)
    with pytest.raises(ValueError, match="side to move"):
        game.from_kaggle(board, 1)
    floating = [0] * 42
    floating[0] = 1
    with pytest.raises(ValueError, match="floats"):
        game.from_kaggle(floating, 2)
    won = [0] * 42  # player 1 has four in column 1, player 2 four stones elsewhere: player 1 "to move"
    for row in (2, 3, 4, 5):
        won[row * 7] = 1
    for index in (5 * 7 + 1, 4 * 7 + 1, 5 * 7 + 2, 4 * 7 + 2):
        won[index] = 2
    with pytest.raises(ValueError, match="already has four"):
        game.from_kaggle(won, 1)
    with pytest.raises(ValueError, match="0, 1 or 2"):
        game.from_kaggle([3] + [0] * 41, 1)


def test_from_moves_rejects_bad_sequences() -> None:
    with pytest.raises(ValueError, match="full"):
        game.from_moves("1111111")
    with pytest.raises(ValueError, match="out of range"):
        game.from_moves("8")
    with pytest.raises(ValueError, match="over"):
        game.from_moves("12121217")


def _random_position(rng: np.random.Generator, plies: int) -> tuple[int, int]:
    position, mask = game.initial()
    for _ in range(plies):
        if game.outcome(position, mask) is not None:
            break
        position, mask = game.play(position, mask, int(rng.choice(game.legal_cols(mask))))
    return position, mask


def test_agrees_with_kaggle_referee_on_1000_random_games() -> None:
    connectx = pytest.importorskip("kaggle_environments.envs.connectx.connectx")
    from types import SimpleNamespace

    config = SimpleNamespace(rows=6, columns=7, inarow=4)
    rng = np.random.default_rng(0)
    for _ in range(1000):
        board = [0] * 42
        position, mask = game.initial()
        mark = 1
        kaggle_end = None
        ply = 0
        while True:
            legal = [c for c in range(7) if board[c] == 0]
            col = int(rng.choice(legal))
            row = max(r for r in range(6) if board[r * 7 + col] == 0)
            board[row * 7 + col] = mark
            ply += 1
            position, mask = game.play(position, mask, col)
            if connectx.is_win(board, col, mark, config, True):
                kaggle_end = ("win", ply)
            elif all(board[c] != 0 for c in range(7)):
                kaggle_end = ("draw", ply)
            ours = game.outcome(position, mask)
            assert (ours is not None) == (kaggle_end is not None), ply
            if kaggle_end is not None:
                assert ours == (-1 if kaggle_end[0] == "win" else 0)
                assert game.from_kaggle(board, 3 - mark) == (position, mask)
                break
            mark = 3 - mark


@pytest.mark.parametrize("module", ["game.py", "search_tree.py", "mcts.py", "jit.py"])
def test_pasted_modules_import_only_numpy_and_each_other(module: str) -> None:
    """The search's modules (numba is imported inside ``jit.Compiler.compile`` alone)."""
    source = (Path(game.__file__).parent / module).read_text()
    allowed = {"__future__", "numpy", "time", "threading", "dataclasses", "typing", "collections.abc", "math",
               "types", "connectx_az.engine"}
    allowed |= {"numba", "hashlib", "marshal", "sys"} if module == "jit.py" else set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
            if node.module == "connectx_az.engine":
                assert {a.name for a in node.names} <= {"game", "search_tree", "jit"}
        else:
            continue
        for name in names:
            assert name in allowed, f"{module} imports {name}"
