"""Reference players: the 69 lines, the heuristic, and the alpha-beta player."""

from __future__ import annotations

import pytest

from connectx_az.engine import game
from connectx_az.evaluation import arena, players

# x (side to move) wins at once in column 3 (0-based): x x x . on the bottom row.
WIN_NOW = """
.......
.......
.......
.......
oo.....
xxx....
"""


# o threatens a vertical four in column 5 (0-based); x has nothing, so it must block there.
BLOCK = """
.......
.......
.......
.....o.
x....o.
x..x.o.
"""


def test_there_are_69_lines_and_the_heuristic_is_zero_sum() -> None:
    assert len(players.WINDOWS) == 69
    position, mask = game.from_moves("4455")
    assert players.heuristic(position, mask) == -players.heuristic(position ^ mask, mask)


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_alphabeta_takes_a_win_and_blocks_a_loss(depth: int) -> None:
    assert players.alphabeta_move(*game.from_ascii(WIN_NOW), depth) == 3
    assert players.alphabeta_move(*game.from_ascii(BLOCK), depth) == 5


def test_alphabeta_is_deterministic_and_central_on_the_empty_board() -> None:
    assert players.alphabeta_move(0, 0, 4) == 3
    with pytest.raises(ValueError):
        players.alphabeta_move(0, 0, 0)


def test_alphabeta_depth_4_beats_random() -> None:
    entrants = {"alphabeta4": players.alphabeta_player(4), "random": players.builtin_player("random")}
    results = arena.round_robin(entrants, 4, act_timeout=30.0, seed=1)
    wins = sum(r.score if r.first == "alphabeta4" else 1.0 - r.score for r in results)
    assert wins >= 3
