"""The agent's clock: its deadline arithmetic, exactly, and Kaggle's rule end to end on a shared core.

The arithmetic (what the first move charges for executing the file, decoding the
model and compiling the solver; the solver's share; the bank's extra) is checked
with an injected clock, so it holds to the last bit on any machine.  End to end,
the built file runs as Kaggle runs it (``clock_runner``: a fresh interpreter pinned
to one core, what the runtime lacks blocked) and plays a plain ``int`` for an open
column, from the book or a search.  Kaggle's rule itself (no move overdraws the
bank, with a busy loop on the same core) is a wall-clock matter: those tests are
marked ``timing`` (``make test-timing``, on an idle machine).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import clock_runner
import pytest

import connectx_az
from connectx_az.agent import backends, template
from connectx_az.engine import game, mcts
from connectx_az.tools import builder

SHIPPED_MODEL = Path(connectx_az.__file__).resolve().parent / "models" / "default.onnx"
#: the busy loop stops by itself after this many seconds, whatever happens to the test
HOG_SECONDS = 600
#: a loaded machine's runners may take several times their usual 10-30 s
RUNNER_TIMEOUT = 300


# --------------------------------------------------------------------------- the arithmetic, on an injected clock


class FakeClock:
    """``time.perf_counter`` for the agent: it moves only when a test (or a spy) moves it.  ``searches``:
    ``(clock when it started, deadline)`` of each search."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now
        self.searches: list[tuple[float, float]] = []

    def __call__(self) -> float:
        return self.now


class SpySolver:
    """The exact solver's place in the agent: records each call's deadline, uses its time, proves nothing."""

    def __init__(self, clock: FakeClock, rate: float = 0.0) -> None:
        self.clock, self.rate, self.calls = clock, rate, []

    def best_move(self, position: int, mask: int, *, weak: bool, deadline: float) -> None:
        self.calls.append((self.clock.now, deadline))
        self.clock.now = deadline
        return None


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    """The agent's clock, faked; the search (``mcts.search``) records its deadline and uses its time."""
    fake = FakeClock()
    monkeypatch.setattr(template, "time", SimpleNamespace(perf_counter=fake))

    def search(tree, evaluator, config, *, deadline=None, **kwargs) -> int:
        fake.searches.append((fake.now, deadline))
        fake.now = deadline
        return 0

    monkeypatch.setattr(mcts, "search", search)
    return fake


def _decoding_takes(monkeypatch, clock: FakeClock, seconds: float) -> None:
    """Decoding the model (``backends.load_model``) takes ``seconds`` on the clock."""
    real = backends.load_model

    def load_model(*args, **kwargs):
        clock.now += seconds
        return real(*args, **kwargs)

    monkeypatch.setattr(backends, "load_model", load_model)


def _agent(clock: FakeClock, *, kind: str = "python", rate: float = 0.0, preload: float = 0.0) -> template.Agent:
    """An agent without a model (uniform priors) whose solver is a ``SpySolver`` of ``kind``."""
    agent = template.Agent(replace(template.CONFIG, backends=("numpy",)), preload_seconds=preload)
    agent.solver, agent.solver_kind = SpySolver(clock, rate), kind
    return agent


def _call(agent: template.Agent, moves: str, *, act: float = 2.0, bank: float = 60.0) -> int:
    position, mask = game.from_moves(moves)
    mark = 1 + game.num_stones(mask) % 2
    observation = {"board": game.to_kaggle(position, mask, mark), "mark": mark, "remainingOverageTime": bank}
    return agent(observation, {"rows": 6, "columns": 7, "inarow": 4, "actTimeout": act})


# The shipped clock (``AgentConfig``): base = 0.75 * act - 0.2 (at least 0.05); moves left = max(4, (empty + 1) // 2);
# extra = 0.8 * max(0, bank - 5) / moves left, at most 3.  Each row worked by hand.
MOVE_BUDGETS = [
    # act, bank, empty cells, seconds
    (2.0, 60.0, 42, 1.3 + 0.8 * 55 / 21),  # the first move: the bank's share over 21 own moves, 2.095 s
    (2.0, 60.0, 41, 1.3 + 0.8 * 55 / 21),  # the second player's first move: 21 own moves too
    (2.0, 60.0, 40, 1.3 + 0.8 * 55 / 20),  # 2.2 s
    (2.0, 25.0, 40, 1.3 + 0.8),  # 0.8 * 20 / 20
    (2.0, 60.0, 10, 1.3 + 3.0),  # 0.8 * 55 / 5 = 8.8: the cap
    (2.0, 60.0, 2, 1.3 + 3.0),  # 0.8 * 55 / 4 = 11: the cap
    (2.0, 9.0, 2, 1.3 + 0.8),  # one own move left, counted as four: 0.8 * 4 / 4
    (2.0, 10.0, 42, 1.3 + 0.8 * 5 / 21),  # only what is above the 5 s reserve: 0.19 s
    (2.0, 5.0, 42, 1.3),  # the reserve alone: nothing extra
    (2.0, 3.0, 20, 1.3),  # below the reserve: nothing extra, never less
    (2.0, 0.0, 20, 1.3),
    (8.0, 0.0, 30, 5.8),  # 0.75 * 8 - 0.2
    (0.1, 0.0, 30, 0.05),  # 0.075 - 0.2 < 0.05: the floor
    (0.1, 45.0, 30, 0.05 + 0.8 * 40 / 15),  # 2.133 s
]


@pytest.mark.parametrize("act, bank, empty, seconds", MOVE_BUDGETS,
                         ids=[f"act{act:g}-bank{bank:g}-empty{empty}" for act, bank, empty, _ in MOVE_BUDGETS])
def test_move_budget_matches_the_table_worked_by_hand(act, bank, empty, seconds) -> None:
    assert template.move_budget(act, bank, empty) == pytest.approx(seconds, abs=1e-12)


def test_move_budget_reads_its_constants_from_the_config() -> None:
    config = replace(template.CONFIG, safe_share=0.5, safety_seconds=0.1, overage_reserve=10.0, overage_share=0.5,
                     max_extra_seconds=1.0, min_moves_left=2)
    assert template.move_budget(2.0, 30.0, 42, config) == pytest.approx(0.9 + 0.5 * 20 / 21, abs=1e-12)
    assert template.move_budget(2.0, 30.0, 2, config) == pytest.approx(0.9 + 1.0, abs=1e-12)  # 0.5 * 20 / 2: capped
    assert template.move_budget(2.0, 14.0, 2, config) == pytest.approx(0.9 + 0.5 * 4 / 2, abs=1e-12)


def test_the_first_move_charges_the_files_exec_and_the_decode_to_its_budget(clock, monkeypatch) -> None:
    agent = _agent(clock, preload=0.3)
    _decoding_takes(monkeypatch, clock, 0.4)
    start = clock.now
    _call(agent, "")
    budget = template.move_budget(2.0, 60.0, 42) - 0.3  # the exec, before the call, comes off the budget
    [(searched_at, deadline)] = clock.searches
    assert deadline == pytest.approx(start + budget, abs=1e-12)  # the decode, inside the call, is inside it
    assert searched_at == pytest.approx(start + 0.4, abs=1e-12)
    assert agent.info["budget"] == pytest.approx(budget, abs=1e-12) and agent.load_seconds == pytest.approx(0.4)
    # the second move pays for neither
    start = clock.now
    _call(agent, "4" + "4")
    assert clock.searches[-1] == (pytest.approx(start, abs=1e-12),
                                  pytest.approx(start + template.move_budget(2.0, 60.0, 40), abs=1e-12))


def test_a_file_slower_than_the_whole_budget_leaves_the_search_no_time(clock) -> None:
    agent = _agent(clock, preload=100.0)
    start = clock.now
    move = _call(agent, "")
    assert clock.searches == [(pytest.approx(start), pytest.approx(start, abs=1e-12))]
    assert agent.info["budget"] == 0.0 and type(move) is int and 0 <= move < 7


def test_a_compile_is_charged_to_the_bank_and_the_move_is_budgeted_on_top(clock, monkeypatch) -> None:
    from connectx_az.engine import solver_numba

    def compile_kernel():
        clock.now += 3.0  # the compile's wall time
        return lambda *args: 0

    monkeypatch.setattr(solver_numba, "cached_kernel", lambda: None)
    monkeypatch.setattr(solver_numba, "compile_kernel", compile_kernel)
    agent = template.Agent(replace(template.CONFIG, backends=("numpy",)), preload_seconds=0.1)
    start = clock.now
    _call(agent, "")
    assert agent.solver_kind == "numba" and agent.compile_seconds == pytest.approx(3.0)
    budget = template.move_budget(2.0, 60.0 - 3.0, 42) - 0.1  # from the bank less the compile
    assert clock.searches == [(pytest.approx(start + 3.0), pytest.approx(start + 3.0 + budget, abs=1e-12))]
    assert agent.info["budget"] == pytest.approx(3.0 + budget, abs=1e-12)


def test_the_python_solver_takes_its_share_of_the_budget_and_the_search_the_rest(clock) -> None:
    agent = _agent(clock)
    moves = "5326173332744475"  # 16 stones: 26 empty cells, no immediate win or threat
    position, mask = game.from_moves(moves)
    empty = 42 - game.num_stones(mask)
    assert not game.winning_cols(position, mask) and not game.winning_cols(position ^ mask, mask)
    start = clock.now
    _call(agent, moves, act=2.0, bank=30.0)
    budget = template.move_budget(2.0, 30.0, empty)
    share = next(s for limit, s in template.CONFIG.solver_schedule if empty <= limit)
    assert agent.solver.calls == [(pytest.approx(start), pytest.approx(start + share * budget, abs=1e-12))]
    assert clock.searches == [(pytest.approx(start + share * budget), pytest.approx(start + budget, abs=1e-12))]


def test_a_compiled_solver_fast_enough_draws_its_extra_from_the_bank_and_the_search_keeps_it(clock) -> None:
    config = template.CONFIG
    agent = _agent(clock, kind="numba", rate=1e12)
    moves = "5326173332744475"
    empty = 42 - game.num_stones(game.from_moves(moves)[1])
    start = clock.now
    _call(agent, moves, act=2.0, bank=30.0)
    budget = template.move_budget(2.0, 30.0, empty)
    share = next(s for limit, s in config.compiled_schedule if empty <= limit)
    extra = min(config.solver_extra_seconds, config.solver_bank_share * (30.0 - config.solver_bank_reserve))
    assert extra > 0
    assert agent.solver.calls == [(pytest.approx(start), pytest.approx(start + share * budget + extra, abs=1e-12))]
    # the solver proved nothing: the search gets what is left, the extra included (the solver has used it)
    assert clock.searches[0][1] == pytest.approx(start + budget + extra, abs=1e-12)
    assert agent.info["budget"] == pytest.approx(budget + extra, abs=1e-12)


# --------------------------------------------------------------------------- the built file, end to end


needs_affinity = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs os.sched_setaffinity")


@pytest.fixture
def cpu_hog() -> Iterator[object]:
    """A busy loop on the core the runners use: killed at teardown, and stops by itself after ``HOG_SECONDS``."""
    with clock_runner.busy_loop(clock_runner.last_cpu(), HOG_SECONDS) as hog:
        yield hog


@pytest.fixture(scope="module")
def submission(small_onnx, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("clock") / "submission.py"
    builder.build_submission(small_onnx, path, book_path=None)  # the search's clock, not the book's
    return path


@needs_affinity
def test_the_built_files_first_move_charges_its_own_exec(submission) -> None:
    """In a fresh interpreter the first move is a plain int for a column, from a search with the numpy backend, and
    the agent measured the file's exec that it charges itself (the arithmetic:
    ``test_the_first_move_charges_the_files_exec_and_the_decode_to_its_budget``).  No clock is asserted: a generous
    one, so that a loaded machine still searches."""
    result = clock_runner.first_move(submission, cpu=clock_runner.last_cpu(), act_timeout=2.0, bank=60.0,
                                    timeout=RUNNER_TIMEOUT)
    assert result["type"] == "int" and 0 <= int(result["move"]) < 7 and result["backend"] == "numpy", result
    assert result["info"]["source"] == "search", result
    assert 0 < result["preload_seconds"] <= result["exec_seconds"], result


@needs_affinity
def test_with_the_book_the_first_move_is_the_books(tmp_path) -> None:
    """The built file as `make submission` writes it (the shipped book embedded): on the empty board the move is
    the book's, a plain int."""
    if not SHIPPED_MODEL.is_file():
        pytest.skip("no shipped model")
    submission = tmp_path / "submission.py"
    builder.build_submission(SHIPPED_MODEL, submission)
    result = clock_runner.first_move(submission, cpu=clock_runner.last_cpu(), act_timeout=2.0, bank=60.0,
                                    timeout=RUNNER_TIMEOUT)
    assert result["type"] == "int" and int(result["move"]) == 3 and result["info"]["source"] == "book", result


# --------------------------------------------------------------------------- Kaggle's rule on a shared core (timing)


@pytest.mark.timing
@needs_affinity
@pytest.mark.parametrize("runtime, agent_clock", [("numpy", "shipped"), ("numpy", "scaled"), ("kaggle", "scaled")])
def test_many_games_on_a_shared_core_never_time_out(runtime, agent_clock, submission, cpu_hog) -> None:
    """Six whole games at a clock of 0.25 s a move and a 7.5 s bank, sharing one core with a busy loop.

    ``shipped``: the agent's clock constants as built; ``scaled``: those constants
    shrink with the clock too, so the agent draws on its bank as it does at 2 s.
    In the ``kaggle`` runtime the solver is compiled before the games (a scaled bank
    is too small to pay for a compile), so the games run the compiled solver, with
    its draws on the bank.
    """
    if runtime == "kaggle":
        pytest.importorskip("numba")
    act_timeout, num_games = 0.25, 6
    bank = clock_runner.BANK_PER_ACT_SECOND * act_timeout
    games = clock_runner.play_games(submission, cpu=clock_runner.last_cpu(), runtime=runtime, act_timeout=act_timeout,
                                   num_games=num_games, agent_clock=agent_clock, warm=runtime == "kaggle",
                                   timeout=RUNNER_TIMEOUT)
    assert cpu_hog.poll() is None, "the competing process stopped before the games ended"

    assert len(games) == num_games
    moves = [m for g in games for m in g["moves"]]
    for g in games:
        # Kaggle's rule: no move overdrew the bank (TIMEOUT) or answered anything but an open column (INVALID)
        assert g["result"] in ("win", "loss", "draw"), (g["result"], g["moves"][-1], g["last_error"])
        assert g["last_error"] == "", g["last_error"]
        assert all(m["type"] == "int" for m in g["moves"])
        assert all(0.0 <= m["bank"] <= bank for m in g["moves"])
    # the games exercised the clock: the numpy backend searched under a deadline, several times a game (fewer in
    # the kaggle runtime, whose compiled solver takes over sooner: 17 searches in six games were seen there)
    assert {m["backend"] for m in moves} == {"numpy"}
    assert sum(m["source"] == "search" and m["simulations"] > 0 for m in moves) >= 2 * num_games
    solvers = {m["solver"] for m in moves} - {None}
    assert solvers == ({"numba"} if runtime == "kaggle" else {"python"}), solvers
    if runtime == "kaggle":
        assert sum(m["source"] == "solver" for m in moves) >= num_games
    if agent_clock == "scaled":
        assert min(m["bank"] for m in moves) < bank - act_timeout, "the bank was never used"


@pytest.mark.timing
@needs_affinity
@pytest.mark.parametrize("which", ["small", "shipped"])
def test_the_first_move_with_exec_and_decode_keeps_kaggles_rule(which, submission, cpu_hog, tmp_path) -> None:
    """The first move pays for executing the file and decoding the model: at 0.5 s a move, on a shared core,
    it is a plain int for a column, from a search, and it never overdraws the bank; the agent measured the exec
    it charges itself (``test_the_first_move_charges_the_files_exec_and_the_decode_to_its_budget``)."""
    if which == "shipped":
        if not SHIPPED_MODEL.is_file():
            pytest.skip("no shipped model")
        submission = tmp_path / "submission.py"
        builder.build_submission(SHIPPED_MODEL, submission, book_path=None)
    act_timeout = 0.5
    bank = clock_runner.BANK_PER_ACT_SECOND * act_timeout
    result = clock_runner.first_move(submission, cpu=clock_runner.last_cpu(), act_timeout=act_timeout, bank=bank,
                                    timeout=RUNNER_TIMEOUT)
    assert cpu_hog.poll() is None
    assert result["type"] == "int" and 0 <= int(result["move"]) < 7 and result["backend"] == "numpy", result
    assert result["info"]["source"] == "search", result
    assert 0 < result["preload_seconds"] <= result["exec_seconds"], result
    assert result["exec_seconds"] + result["call_seconds"] - act_timeout < bank, result


@pytest.mark.timing
@needs_affinity
def test_first_move_compiles_the_solver_inside_the_real_clock(cpu_hog, tmp_path) -> None:
    """The ``kaggle`` runtime at Kaggle's own clock (2 s + 60 s), the shipped model, on a shared core: the first
    move imports numba and compiles the solver, is no TIMEOUT, and leaves at least 40 s of the bank (the compile
    takes a few seconds of one core; 20 s of the bank is several times that)."""
    pytest.importorskip("numba")
    if not SHIPPED_MODEL.is_file():
        pytest.skip("no shipped model")
    submission = tmp_path / "submission.py"
    builder.build_submission(SHIPPED_MODEL, submission, book_path=None)
    act_timeout, bank = 2.0, 60.0
    result = clock_runner.first_move(submission, cpu=clock_runner.last_cpu(), runtime="kaggle", act_timeout=act_timeout,
                                    bank=bank, timeout=RUNNER_TIMEOUT)
    assert cpu_hog.poll() is None
    info = result["info"]
    assert result["type"] == "int" and info["solver"] == "numba" and info["compile_seconds"] > 0, result
    used = max(0.0, result["exec_seconds"] + result["call_seconds"] - act_timeout)
    assert used <= bank - 40.0, result


@pytest.mark.timing
@needs_affinity
def test_with_the_book_the_first_move_is_the_books_and_quick(cpu_hog, tmp_path) -> None:
    """The built file as `make submission` writes it (the shipped book embedded): on the empty board the move is
    the book's, a plain int, and the file's exec and the move together stay inside the move's own clock."""
    if not SHIPPED_MODEL.is_file():
        pytest.skip("no shipped model")
    submission = tmp_path / "submission.py"
    builder.build_submission(SHIPPED_MODEL, submission)
    act_timeout = 2.0
    result = clock_runner.first_move(submission, cpu=clock_runner.last_cpu(), act_timeout=act_timeout, bank=60.0,
                                    timeout=RUNNER_TIMEOUT)
    assert cpu_hog.poll() is None
    assert result["type"] == "int" and int(result["move"]) == 3 and result["info"]["source"] == "book", result
    assert result["exec_seconds"] + result["call_seconds"] < act_timeout, result
