"""The agent in-process: legal plain-int moves, tactics, clock, and any input at all."""

from __future__ import annotations

import ast
import math
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from connectx_az.agent import fallback, template
from connectx_az.engine import game
from connectx_az.evaluation import kaggle_io

FAST = {"rows": 6, "columns": 7, "inarow": 4, "actTimeout": 0.3}  # budget: 0.05 s a move


@pytest.fixture
def with_model(small_onnx) -> template.Agent:
    """A fresh agent with the small model embedded, numpy backend first."""
    config = replace(template.CONFIG, backends=("numpy", "onnxruntime"))
    return template.from_model_bytes(small_onnx.read_bytes(), config)


def _obs(text: str, mark: int = 1, **extra) -> dict:
    """Kaggle observation for an ASCII board (``x`` = player ``mark``, who is to move)."""
    position, mask = game.from_ascii(text)
    return {"board": game.to_kaggle(position, mask, mark), "mark": mark, "remainingOverageTime": 0, **extra}


def _legal_cols(board, columns: int) -> list[int]:
    return [c for c in range(columns) if c < len(board) and board[c] == 0]


def test_plays_a_game_with_legal_plain_ints(with_model):
    position, mask = game.initial()
    for _ in range(12):
        obs, _ = kaggle_io.kaggle_inputs(position, mask, overage=6.0)  # mark: the side to move
        move = with_model(obs, FAST)
        assert type(move) is int and game.is_legal(mask, move)
        assert with_model.backend == "numpy"
        position, mask = game.play(position, mask, move)
        if game.outcome(position, mask) is not None:
            break


def test_takes_an_immediate_win(with_model):
    obs = _obs("""
        .......
        .......
        .......
        o......
        o......
        oxxx...
    """)
    assert with_model(obs, FAST) == 4
    assert with_model.info["source"] == "win now"  # at once, before any book, solver or search


def test_blocks_an_immediate_loss(with_model):
    obs = _obs("""
        .......
        .......
        ......x
        ...o..x
        ...o..o
        .x.o..x
    """)
    assert with_model(obs, FAST) == 3
    assert with_model.info["source"] == "block"  # the single block of a threat is forced: no search


def test_search_runs_and_reuses_its_tree(with_model):
    position, mask = game.from_moves("4453")
    obs, _ = kaggle_io.kaggle_inputs(position, mask, overage=0)
    # the first move also loads the model; a generous clock, so that a busy machine still leaves time to search
    first = with_model(obs, {**FAST, "actTimeout": 3.0})
    info = with_model.info
    assert info["source"] == "search" and info["simulations"] > 0 and not info["reused_tree"]
    position, mask = game.play(position, mask, first)
    reply = next(c for c in game.CENTRE_FIRST if game.is_legal(mask, c)
                 and not game.winning_cols(*game.play(position, mask, c)))
    position, mask = game.play(position, mask, reply)
    with_model(kaggle_io.kaggle_inputs(position, mask, overage=0)[0], FAST)
    assert with_model.info["source"] == "search" and with_model.info["reused_tree"]


@pytest.mark.parametrize("reply", [2, 6])
def test_a_reused_tree_starts_from_the_position_the_agent_was_given(reply):
    """The tree is reused down our move and the opponent's actual reply, not any reply the tree holds.

    A fixed number of simulations (the clock is generous, so the count alone stops the search) and no solver
    or book: both searches run whatever the machine's load."""
    config = replace(template.CONFIG, backends=("numpy",), use_book=False, compile_solver=False, solver_schedule=(),
                     search=replace(template.CONFIG.search, num_simulations=400))
    agent = template.from_model_bytes(None, config)
    clock = {**FAST, "actTimeout": 60.0}
    position, mask = game.from_moves("44")
    first = agent(kaggle_io.kaggle_inputs(position, mask, overage=0)[0], clock)
    assert agent.info["source"] == "search" and not agent.info["reused_tree"]
    after = game.play(position, mask, first)
    assert agent.tree.children[0, agent.tree.root[0], first] >= 0
    child = int(agent.tree.children[0, agent.tree.root[0], first])
    assert (agent.tree.children[0, child] >= 0).all()  # the tree holds every reply: the check must pick the played one
    position, mask = game.play(*after, reply)
    agent(kaggle_io.kaggle_inputs(position, mask, overage=0)[0], clock)
    tree, root = agent.tree, int(agent.tree.root[0])
    assert agent.info["source"] == "search" and agent.info["reused_tree"]
    assert (int(tree.position[0, root]), int(tree.mask[0, root])) == (position, mask)
    assert root == int(tree.children[0, child, reply])


@pytest.mark.timing  # how far a 0.05 s search grows the tree depends on the machine
def test_the_tree_grows_before_the_search_not_inside_it(with_model, monkeypatch):
    """Doubling a big tree takes about 0.1 s: the agent grows it before the search, by the last one's rate."""
    with_model.config = replace(with_model.config, tree_capacity=64)
    position, mask = game.initial()
    grew, capacity = [], 0
    for ply in range(24):
        if game.outcome(position, mask) is not None:
            break
        if ply % 2 == 0:
            col = with_model(kaggle_io.kaggle_inputs(position, mask, overage=0)[0], FAST)
            if with_model.info["source"] == "search":
                grew.append(with_model.info["tree_grew"])
                capacity = max(capacity, with_model.tree.capacity)
        else:  # a central move that hands over no immediate win
            col = next((c for c in game.CENTRE_FIRST if game.is_legal(mask, c)
                        and not game.winning_cols(*game.play(position, mask, c))), game.legal_cols(mask)[0])
        position, mask = game.play(position, mask, col)
    # the tree outgrew its first 64 nodes several times over, yet no search grew it (but perhaps one that
    # knew no rate yet)
    assert len(grew) >= 5 and capacity >= 8 * 64, (grew, capacity)
    assert sum(grew) <= 1, grew


def test_no_time_left_plays_the_prior(with_model, small_onnx, monkeypatch):
    with_model.preload_seconds = 100.0  # the file took all of the first move
    position, mask = game.from_moves("44")
    move = with_model({"board": game.to_kaggle(position, mask, 1), "mark": 1}, FAST)
    assert with_model.info["simulations"] == 0
    logits, _ = with_model.evaluator.evaluate(game.encode(np.array([position], np.uint64),
                                                              np.array([mask], np.uint64)))
    assert move == int(np.argmax(logits[0]))


def test_solver_plays_the_endgame(with_model):
    # Random play (that avoids handing over immediate wins) down to 10 empty cells.
    rng = np.random.default_rng(3)
    while True:
        position, mask = game.initial()
        for _ in range(32):
            safe = [c for c in game.legal_cols(mask)
                    if not game.winning_cols(position, mask) and not game.winning_cols(*game.play(position, mask, c))]
            if not safe:
                break
            position, mask = game.play(position, mask, int(rng.choice(safe)))
        if game.num_stones(mask) == 32 and len(game.legal_cols(mask)) > 1:
            break
    obs, _ = kaggle_io.kaggle_inputs(position, mask, overage=0)
    move = with_model(obs, {**FAST, "actTimeout": 2.0})
    assert game.is_legal(mask, move)
    if template.solver is not None:
        assert with_model.info["source"] == "solver"


#: a drawn endgame (28 stones, x to move) where only column 1 (0-based) holds the draw: the other five lose
DRAWN_ENDGAME = """
    ......o
    ...ooxx
    ...xxox
    x..oxox
    ooxoxoo
    xooxoxx
"""


@pytest.mark.parametrize("kind", ["python", "numba"])
def test_a_draw_the_solver_proves_is_played_and_not_left_to_the_search(with_model, kind):
    """Every other solved position in these tests is a win: here the solver proves a draw, the search is never
    asked, and the move is the one column that keeps it."""
    from connectx_az.engine import solver, solver_numba

    position, mask = game.from_ascii(DRAWN_ENDGAME)
    referee = solver.Solver()
    keeps = [c for c in game.legal_cols(mask) if game.outcome(*game.play(position, mask, c)) is None
             and referee.best_move(*game.play(position, mask, c), weak=True)[1] == 0]
    assert game.forced_move(position, mask) is None and keeps == [1] and len(game.legal_cols(mask)) == 6
    if kind == "numba":
        pytest.importorskip("numba")
        with_model.solver, with_model.solver_kind = solver_numba.CompiledSolver(solver_numba.compile_kernel()), kind
    else:
        with_model.config = replace(with_model.config, compile_solver=False)
    move = with_model(_obs(DRAWN_ENDGAME, remainingOverageTime=60.0), {**FAST, "actTimeout": 2.0})
    assert with_model.solver_kind == kind and with_model.info["source"] == "solver" and move == 1


def test_corrupt_model_still_plays(small_onnx):
    data = bytearray(small_onnx.read_bytes())
    data[len(data) // 2:] = b"\x00" * (len(data) - len(data) // 2)
    agent = template.from_model_bytes(bytes(data))
    move = agent(_obs(".......\n" * 6), FAST)
    assert type(move) is int and 0 <= move < 7
    assert agent.backend == "uniform" and agent.load_error
    # a checksum that does not match is refused the same way
    agent = template.from_model_bytes(small_onnx.read_bytes())
    agent.model_sha256 = "0" * 64
    move = agent(_obs(".......\n" * 6), FAST)
    assert type(move) is int and agent.backend == "uniform"
    assert "sha256" in agent.load_error


def test_any_exception_falls_back_to_a_legal_move(with_model, monkeypatch):
    def broken(observation, configuration):
        raise RuntimeError("boom")

    monkeypatch.setattr(with_model, "choose_move", broken)
    obs = _obs("""
        xoxoxo.
        oxoxox.
        xoxoxo.
        xoxoxo.
        oxoxox.
        xoxoxoo
    """)
    assert with_model(obs, FAST) == 6
    assert "boom" in with_model.last_error


def test_move_budget_never_drains_the_bank():
    bank, act = 60.0, 2.0
    for ply in range(0, 42, 2):
        budget = template.move_budget(act, bank, 42 - ply)
        assert budget >= template.CONFIG.safe_share * act - template.CONFIG.safety_seconds
        bank -= max(0.0, budget - act)
        assert bank >= template.CONFIG.overage_reserve - 1e-9
    assert template.move_budget(2.0, 0.0, 20) < 2.0
    assert template.move_budget(0.01, 0.0, 20) == pytest.approx(0.05)


_EMPTY = [0] * 42
_FULL_BUT_ONE = [1 if i % 2 else 2 for i in range(42)]
_FULL_BUT_ONE[5] = 0


def _malformed_cases() -> list[tuple[object, object]]:
    good_cfg = dict(FAST)
    cases: list[tuple[object, object]] = [
        (None, None),
        ({}, {}),
        ({"board": _EMPTY}, None),
        ({"board": _EMPTY, "mark": 1}, {"actTimeout": "fast"}),
        ({"board": tuple(_EMPTY), "mark": 1.0}, {**good_cfg, "rows": 6.0, "columns": 7.0}),
        ({"board": np.array(_EMPTY), "mark": np.int64(1)}, good_cfg),
        ({"board": [0.0] * 42, "mark": 1, "remainingOverageTime": "lots"}, good_cfg),
        ({"board": _EMPTY, "mark": 3}, good_cfg),
        ({"board": _EMPTY, "mark": 2}, good_cfg),  # mark does not match the stones
        ({"board": _EMPTY[:41], "mark": 1}, good_cfg),
        ({"board": _EMPTY + [0], "mark": 1}, good_cfg),
        ({"board": [0] * 41 + [7], "mark": 1}, good_cfg),
        ({"board": ["a"] * 42, "mark": 1}, good_cfg),
        ({"board": [None] * 7 + [0] * 35, "mark": 1}, good_cfg),
        ({"board": [1] + [0] * 41, "mark": 2}, good_cfg),  # floating stone
        ({"board": [0] * 35 + [1, 1, 1, 0, 0, 0, 0], "mark": 2}, good_cfg),  # impossible counts
        ({"board": [0] * 35 + [1, 1, 1, 1, 2, 2, 2], "mark": 2}, good_cfg),  # game already won
        ({"board": _FULL_BUT_ONE, "mark": 1}, good_cfg),
        ({"board": [0] * 30, "mark": 1}, {"rows": 5, "columns": 6, "inarow": 4}),
        ({"board": [0] * 64, "mark": 1}, {"rows": 8, "columns": 8, "inarow": 5, "actTimeout": 1}),
        ({"board": _EMPTY, "mark": 1}, {"rows": 6, "columns": 7, "inarow": 3}),
        ({"board": _EMPTY, "mark": 1}, {**good_cfg, "actTimeout": math.nan}),
        ({"board": _EMPTY, "mark": 1, "remainingOverageTime": -5}, {**good_cfg, "actTimeout": -1}),
        ({"board": _EMPTY, "mark": 1, "remainingOverageTime": math.inf}, {**good_cfg, "actTimeout": math.inf}),
        ({"board": _EMPTY, "mark": True}, {**good_cfg, "columns": "7"}),
        (SimpleNamespace(board=_EMPTY, mark=1, remainingOverageTime=1), SimpleNamespace(**good_cfg)),
        ("not an observation", 42),
        ({"board": "0" * 42, "mark": 1}, good_cfg),
        ({"board": {"a": 1}, "mark": 1}, good_cfg),
    ]
    return cases


@pytest.mark.parametrize("observation, configuration", _malformed_cases())
def test_malformed_input_gives_a_legal_int(with_model, monkeypatch, observation, configuration):
    # what a missing or bad actTimeout becomes
    with_model.config = replace(with_model.config, default_act_timeout=0.3)
    move = with_model(observation, configuration)
    assert type(move) is int
    board = observation.get("board") if isinstance(observation, dict) else getattr(observation, "board", None)
    columns = configuration.get("columns", 7) if isinstance(configuration, dict) else 7
    if isinstance(board, (list, tuple, np.ndarray)) and isinstance(columns, int) and len(board) % columns == 0:
        legal = _legal_cols(list(board), columns)
        if legal:
            assert move in legal


def test_random_boards_of_any_size_give_legal_ints(with_model, monkeypatch):
    with_model.config = replace(with_model.config, default_act_timeout=0.3)
    rng = np.random.default_rng(0)
    for _ in range(150):
        rows, columns = int(rng.integers(1, 9)), int(rng.integers(1, 10))
        if rng.random() < 0.5:
            rows, columns = 6, 7
        board = rng.choice([0, 0, 0, 1, 2], size=rows * columns).tolist()
        config = {"rows": rows, "columns": columns, "inarow": int(rng.integers(2, 6)), "actTimeout": 0.3}
        move = with_model({"board": board, "mark": int(rng.integers(0, 4))}, config)
        assert type(move) is int
        legal = _legal_cols(board, columns)
        if legal:
            assert move in legal


@pytest.mark.parametrize(
    "rows, columns, inarow, board_rows, mark, expected",
    [
        # 5x5, three in a row: player 1 wins in column 3
        (5, 5, 3, [".....", ".....", ".....", ".....", "11.2."], 1, 2),
        # player 2 must block player 1's vertical three in column 0 (inarow 4, 7x8)
        (7, 8, 4, ["........"] * 4 + ["1.......", "1.......", "1..22..."], 2, 0),
        # nothing urgent: the most central column
        (6, 9, 4, ["........."] * 6, 1, 4),
        # player 1 wins in column 3 rather than block player 2's three in column 7 (6x8)
        (6, 8, 4, ["........"] * 3 + [".......2", ".......2", "111....2"], 1, 3),
    ],
)
def test_simple_move_on_other_sizes(rows, columns, inarow, board_rows, mark, expected):
    board = [0 if ch == "." else int(ch) for row in board_rows for ch in row]
    assert len(board) == rows * columns
    assert fallback.simple_move(board, columns, inarow, mark) == expected
    agent = template.Agent()
    move = agent({"board": board, "mark": mark}, {"rows": rows, "columns": columns, "inarow": inarow})
    assert move == expected and agent.info["source"].startswith("simple")


def test_simple_move_avoids_handing_over_a_win():
    # Column 3 is the most central, but its stone would let player 2 complete row 4 on top of it.
    board_rows = [".......", ".......", ".......", ".......", "222....", "112.11."]
    board = [0 if ch == "." else int(ch) for row in board_rows for ch in row]
    assert fallback.simple_move(board, 7, 4, 1) == 2


def test_the_fallback_needs_only_the_standard_library():
    tree = ast.parse(Path(fallback.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


# ---------------------------------------------------------------------------
# the compiled solver: when the agent compiles it, what it costs the clock, and its share of a move


@pytest.fixture
def compile_counter(monkeypatch):
    """No kernel cached in this process, as the agent sees it; ``compile_kernel`` counted, slowed by 0.2 s, and
    real where numba is: the kernel an earlier test compiled, or one compiled now (numba compiles once a session)."""
    from connectx_az.engine import solver_numba

    calls = []
    real, real_cached = solver_numba.compile_kernel, solver_numba.cached_kernel

    def slow_compile():
        calls.append(1)
        import time
        time.sleep(0.2)
        return real_cached() or real()

    monkeypatch.setattr(solver_numba, "cached_kernel", lambda: None)
    monkeypatch.setattr(solver_numba, "compile_kernel", slow_compile)
    return calls


def test_the_first_move_compiles_the_solver_and_charges_the_bank(with_model, compile_counter):
    pytest.importorskip("numba")
    act, bank = 0.3, 60.0
    move = with_model(_obs(".......\n" * 6, remainingOverageTime=bank), {**FAST, "actTimeout": act})
    info = with_model.info
    assert game.is_legal(0, move) and info["source"] == "search"
    assert compile_counter == [1] and with_model.solver_kind == "numba" == info["solver"]
    spent = info["compile_seconds"]
    assert spent >= 0.2 and with_model.compile_seconds == spent
    # the move proper is budgeted from the bank less the compile, on top of the compile
    assert info["budget"] == pytest.approx(spent + template.move_budget(act, bank - spent, 42), abs=1e-9)
    # once a game: the next move neither compiles nor charges anything
    position, mask = game.play(*game.play(0, 0, move), 0)
    obs = {"board": game.to_kaggle(position, mask, 1), "mark": 1, "remainingOverageTime": bank}
    with_model(obs, {**FAST, "actTimeout": act})
    assert compile_counter == [1] and "compile_seconds" not in with_model.info
    assert with_model.info["budget"] == pytest.approx(template.move_budget(act, bank, 40))


@pytest.mark.parametrize("case", ["small bank", "switched off", "compile fails"])
def test_without_a_compile_the_game_gets_the_python_solver(with_model, compile_counter, monkeypatch, case):
    from connectx_az.engine import solver_numba

    bank = 60.0
    if case == "small bank":
        bank = template.CONFIG.compile_min_bank - 1
    elif case == "switched off":
        with_model.config = replace(with_model.config, compile_solver=False)
    else:
        monkeypatch.setattr(solver_numba, "compile_kernel", lambda: compile_counter.append(1) or None)
    move = with_model(_obs(".......\n" * 6, remainingOverageTime=bank), FAST)
    assert game.is_legal(0, move) and with_model.last_error == ""
    assert with_model.solver_kind == "python" == with_model.info["solver"]
    assert type(with_model.solver) is template.solver.Solver
    assert compile_counter == ([1] if case == "compile fails" else [])


def test_a_compile_that_raises_costs_nothing_but_the_compiled_solver(with_model, compile_counter, monkeypatch):
    from connectx_az.engine import solver_numba

    def broken():
        raise MemoryError("LLVM ran out")

    monkeypatch.setattr(solver_numba, "compile_kernel", broken)
    move = with_model(_obs(".......\n" * 6, remainingOverageTime=60.0), FAST)
    assert game.is_legal(0, move) and with_model.info["source"] == "search"
    assert with_model.solver_kind == "python" and "LLVM ran out" in with_model.last_error


class _Fixed:
    """An evaluator that answers every position with the same ``logits`` and ``value``."""

    def __init__(self, logits: list[float], value: float) -> None:
        self.logits, self.value = np.array([logits], np.float32), np.array([value], np.float32)

    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.repeat(self.logits, len(obs), 0), np.repeat(self.value, len(obs))


@pytest.mark.parametrize("backend", ["numpy", "onnxruntime"])
def test_a_network_whose_value_is_not_finite_is_refused_when_loaded_and_the_agent_plays_on(backend: str) -> None:
    from conftest import toy_onnx

    from connectx_az.agent import backends

    backends.check_outputs(_Fixed([0.0] * 7, 0.5))
    for logits, value in (([0.0] * 7, math.nan), ([0.0] * 7, math.inf), ([math.nan] + [0.0] * 6, 0.0)):
        with pytest.raises(ValueError, match="not finite"):
            backends.check_outputs(_Fixed(logits, value))
    config = replace(template.CONFIG, backends=(backend,))
    healthy = template.from_model_bytes(toy_onnx(), config)
    healthy.load_model()
    assert healthy.backend == backend, healthy.load_error
    agent = template.from_model_bytes(toy_onnx(value_weight=math.nan), config)  # its value: NaN on every board
    agent.load_model()
    assert agent.backend == "uniform" and "not finite" in agent.load_error
    assert game.is_legal(0, agent(_obs(".......\n" * 6), FAST))


def test_only_a_compiled_solver_fast_enough_for_the_position_draws_on_the_bank(with_model):
    from connectx_az.engine import solver_numba

    config = template.CONFIG
    agent = with_model
    agent.solver, agent.solver_kind = solver_numba.CompiledSolver(lambda *a: 0), "numba"
    extra = config.solver_extra_seconds
    assert extra > 0
    deepest, typical = config.solver_nodes[-1]
    agent.solver.rate = 10 * typical  # covers the typical proof at every listed depth within 0.1 s
    own, got = agent._solver_seconds(deepest, 1.0, 60.0)
    assert own == pytest.approx(next(s for limit, s in config.compiled_schedule if deepest <= limit))
    assert got == extra
    # the bank share caps it, and a bank at the reserve gives nothing
    assert agent._solver_seconds(deepest, 1.0, config.solver_bank_reserve + 2.0)[1] == pytest.approx(
        min(extra, config.solver_bank_share * 2.0))
    assert agent._solver_seconds(deepest, 1.0, config.solver_bank_reserve)[1] == 0.0
    # too slow for the typical proof at this depth, or deeper than the list: the move's own share only
    agent.solver.rate = typical / (2 * (1.0 + extra))
    assert agent._solver_seconds(deepest, 1.0, 60.0)[1] == 0.0
    agent.solver.rate = 1e12
    assert agent._solver_seconds(deepest + 1, 1.0, 60.0)[1] == 0.0
    # the pure-Python solver never draws on the bank, and keeps its own schedule
    agent.solver, agent.solver_kind = template.solver.Solver(), "python"
    for empty, share in config.solver_schedule:
        assert agent._solver_seconds(empty, 1.0, 60.0) == (pytest.approx(share), 0.0)
    assert agent._solver_seconds(config.solver_schedule[-1][0] + 1, 1.0, 60.0) == (0.0, 0.0)


def test_the_compiled_solver_draws_on_the_bank_exactly_when_its_rate_finishes_the_typical_proof_in_time() -> None:
    # 2 s left, a share of 0.75 at 28 empty cells: 1.5 s of the move's own; a bank of 30 s, 20 kept: 0.25 * 10 =
    # 2.5 s more.  The typical proof there takes 7,000 nodes: a rate of 1,750 a second finishes it in the 4 s.
    config = replace(template.CONFIG, compiled_schedule=((40, 0.75),), solver_nodes=((28, 7_000),),
                     solver_extra_seconds=4.0, solver_bank_share=0.25, solver_bank_reserve=20.0)
    agent = template.Agent(config)
    agent.solver, agent.solver_kind = SimpleNamespace(rate=1750.0), "numba"
    assert agent._solver_seconds(28, 2.0, 30.0) == (1.5, 2.5)
    agent.solver.rate = 1749.0  # 6,996 nodes in the 4 s: short of the proof, so the bank is left alone
    assert agent._solver_seconds(28, 2.0, 30.0) == (1.5, 0.0)
    agent.solver.rate = 1e9  # fast, but deeper than the list knows: no proof to count on
    assert agent._solver_seconds(29, 2.0, 30.0) == (1.5, 0.0)


def test_the_compiled_solver_plays_a_proven_opening_move(with_model):
    from connectx_az.engine import solver_numba

    pytest.importorskip("numba")
    assert solver_numba.compile_kernel() is not None
    # a Begin-Medium position won or drawn for the side to move: the compiled solver proves it, no search
    from connectx_az.testsets import pons

    p = next(p for p in pons.load_set("Begin-Medium", limit=20) if p.result >= 0)
    position, mask = pons.position_of(p)
    obs, _ = kaggle_io.kaggle_inputs(position, mask, overage=60.0)
    move = with_model(obs, {**FAST, "actTimeout": 2.0})
    assert with_model.solver_kind == "numba" and with_model.info["source"] == "solver"
    assert move in p.best_cols or not pons.is_mistake(p, move)


# the compiled search: started after the first search move, off its clock; later moves search compiled


def _search_move(agent: template.Agent, moves: str) -> dict:
    position, mask = game.from_moves(moves)
    agent(kaggle_io.kaggle_inputs(position, mask, overage=30.0)[0], {**FAST, "actTimeout": 1.0})
    assert agent.info["source"] == "search", agent.info
    return agent.info


def test_the_first_search_move_starts_the_search_compile_after_choosing(with_model, monkeypatch):
    from connectx_az.engine import mcts

    compiled, started = [False], []

    def start() -> bool:
        assert with_model.info["source"] == "search"  # the move is chosen before the compile starts
        started.append(1)
        return True

    monkeypatch.setattr(mcts, "is_compiled", lambda: compiled[0])
    monkeypatch.setattr(mcts, "compile_search_in_background", start)
    info = _search_move(with_model, "4453")
    assert info["search"] == "python" and info["search_compile_started"] and started == [1]
    compiled[0] = True  # the background compile ended
    info = _search_move(with_model, "4453")
    assert info["search"] == "numba" and "search_compile_started" not in info and started == [1]


def test_switched_off_the_search_stays_python(with_model, monkeypatch):
    from connectx_az.engine import mcts

    monkeypatch.setattr(mcts, "is_compiled", lambda: False)
    monkeypatch.setattr(mcts, "compile_search_in_background", lambda: pytest.fail("compile started"))
    with_model.config = replace(with_model.config, compile_search=False)
    assert _search_move(with_model, "4453")["search"] == "python"


@pytest.mark.slow
def test_after_the_background_compile_the_agent_searches_compiled(with_model):
    """numba compiles the search in the background, in memory (as on Kaggle), and the next move uses it."""
    from connectx_az.engine import jit, mcts

    pytest.importorskip("numba")
    compiler = jit.Compiler("mcts-agent-test", mcts._STEPS, overrides=mcts._COMPILER.overrides,
                            warm_up=mcts._warm_up)
    real = mcts._COMPILER
    mcts._COMPILER = compiler
    try:
        info = _search_move(with_model, "4453")
        assert info["search"] == "python" and info["search_compile_started"]
        thread = jit._process_state("threads")[compiler.key]
        while thread.is_alive():  # the moves the compile overlaps keep their clock
            info = _search_move(with_model, "4453")
            assert info["seconds"] < info["budget"] + 0.1, info
        thread.join()
        assert compiler.error is None and mcts.is_compiled()
        assert _search_move(with_model, "4453")["search"] == "numba"
    finally:
        mcts._COMPILER = real
