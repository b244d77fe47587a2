"""The exact solver against Pons' benchmark scores and hand-drawn boards."""

from __future__ import annotations

import ast
import sys
import time
from pathlib import Path

import pytest

from connectx_az.engine import game
from connectx_az.engine.solver import Solver
from connectx_az.testsets import pons

END_EASY = pons.load_set("End-Easy", limit=30)
MIDDLE_EASY = pons.load_set("Middle-Easy", limit=20)
EASY = END_EASY + MIDDLE_EASY


def _sign(x: int) -> int:
    return (x > 0) - (x < 0)


@pytest.fixture(scope="module")
def solver() -> Solver:
    return Solver()


def test_imports_only_the_standard_library_and_game() -> None:
    source = Path(__file__).parents[1] / "connectx_az" / "engine" / "solver.py"
    tree = ast.parse(source.read_text())
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative import"
            if node.module == "connectx_az.engine":  # the builder pastes game before solver
                assert [alias.name for alias in node.names] == ["game"]
                continue
            modules.add(node.module.split(".")[0])
    assert modules <= set(sys.stdlib_module_names) | {"__future__"}, modules


@pytest.mark.parametrize("p", EASY, ids=lambda p: p.moves)
def test_scores_match_benchmark(solver: Solver, p: pons.PonsPosition) -> None:
    position, mask = pons.position_of(p)
    assert solver.solve(position, mask) == p.score
    assert solver.solve(position, mask, weak=True) == _sign(p.score)
    assert solver.move_scores(position, mask) == list(p.move_scores)
    col, score = solver.best_move(position, mask)
    assert score == p.score and p.move_scores[col] == p.score
    assert solver.nodes >= 0


def test_weak_move_scores_give_signs(solver: Solver) -> None:
    for p in MIDDLE_EASY[:5]:
        expected = [None if s is None else _sign(s) for s in p.move_scores]
        assert solver.move_scores(*pons.position_of(p), weak=True) == expected


def test_tiny_table_stays_exact() -> None:
    small = Solver(table_size=64)  # emptied again and again during the search
    for p in MIDDLE_EASY[:5]:
        assert small.solve(*pons.position_of(p)) == p.score


def test_takes_an_immediate_win(solver: Solver) -> None:
    position, mask = game.from_ascii(
        """
        x...o..
        xo..xo.
        xxo.ox.
        ooxxoox
        oxooxxx
        oxoxoxo
        """
    )
    # 32 plies: x wins at once in column 3 with its 17th stone, scoring 22 - 17
    assert solver.solve(position, mask) == 5
    assert solver.best_move(position, mask) == (3, 5)
    assert solver.move_scores(position, mask) == [None, 0, 0, 5, None, 0, 4]


def test_blocks_an_immediate_loss(solver: Solver) -> None:
    # End-Easy "6121455117152514634356336576722": o threatens column 3
    position, mask = game.from_ascii(
        """
        o...x..
        o...ox.
        oox.xo.
        xxooxxo
        xoxxooo
        xoxoxox
        """
    )
    assert solver.best_move(position, mask) == (3, 0)
    # anything else lets o win with its 17th stone: -(22 - 17)
    assert solver.move_scores(position, mask) == [None, -5, -5, 0, None, -5, -5]


def test_budget_exhausted_returns_none(solver: Solver) -> None:
    hard = pons.load_set("Begin-Medium", limit=1)[0]
    position, mask = pons.position_of(hard)
    fresh = Solver()
    assert fresh.solve(position, mask, max_nodes=100) is None
    assert fresh.nodes <= 101
    assert fresh.best_move(position, mask, max_nodes=100) is None
    assert fresh.move_scores(position, mask, max_nodes=100) is None
    assert fresh.solve(position, mask, deadline=time.perf_counter() - 1.0) is None


def test_finished_or_malformed_game_raises(solver: Solver) -> None:
    won = game.from_moves("1212121")  # first player has four in column 1
    with pytest.raises(ValueError, match="already over"):
        solver.solve(*won)
    with pytest.raises(ValueError, match="already over"):
        solver.best_move(*won)
    floating = 1 << 1, 1 << 1  # a stone above an empty cell
    with pytest.raises(ValueError):
        solver.move_scores(*floating)


def test_weak_best_move_keeps_the_result_on_pons_positions() -> None:
    solver = Solver()
    for name in ("Middle-Easy", "End-Easy"):
        for p in pons.load_set(name, limit=25):
            position, mask = pons.position_of(p)
            col, sign = solver.best_move(position, mask, weak=True)
            assert sign == (p.score > 0) - (p.score < 0)
            assert not pons.is_mistake(p, col)


def test_weak_best_move_costs_what_the_proof_costs() -> None:
    # best_move probes the root's columns in the search's own order, so the column that proved the
    # result is found again from the table; the others are not re-proven. Begin-Easy "661715272343"
    # (0-based column 1 wins) took 433,684 nodes when the columns were probed centre first: the proof is 240.
    position, mask = game.from_moves("661715272343")
    proof = Solver()
    assert proof.solve(position, mask, weak=True) == 1
    chooser = Solver()
    assert chooser.best_move(position, mask, weak=True) == (1, 1)
    assert proof.nodes < 1_000 and chooser.nodes <= proof.nodes + 10
    for p in pons.load_set("Begin-Easy", limit=8):
        proof, chooser = Solver(), Solver()
        sign = proof.solve(*pons.position_of(p), weak=True)
        col, found = chooser.best_move(*pons.position_of(p), weak=True)
        assert found == sign == _sign(p.score) and not pons.is_mistake(p, col)
        assert chooser.nodes <= proof.nodes + 10, p.moves


def test_both_winning_cells_are_the_cells_where_a_stone_makes_four_in_a_row() -> None:
    # solver._winning_cells (Python ints) and solver_numba's (numpy uint64, numba's kernel) are twins written apart
    # for speed; game.is_win is the rule they must keep, cell by cell, on random boards of every density.
    import numpy as np

    from connectx_az.engine import solver, solver_numba

    rng = np.random.default_rng(0)
    cells = [1 << (col * (game.ROWS + 1) + row) for col in range(game.COLS) for row in range(game.ROWS)]
    for _ in range(1000):  # stones fill each column from the bottom; any share of them is ``stones``'
        mask = sum(game.BOTTOM_BITS[col] * ((1 << int(rng.integers(game.ROWS + 1))) - 1) for col in range(game.COLS))
        stones = sum(c for c in cells if c & mask and rng.random() < 0.6)
        if game.is_win(stones):
            continue  # every empty cell would "complete" a line already there
        expected = sum(c for c in cells if not c & mask and game.is_win(stones | c))
        assert solver._winning_cells(stones, mask) == expected
        assert int(solver_numba._winning_cells(np.uint64(stones), np.uint64(mask))) == expected
