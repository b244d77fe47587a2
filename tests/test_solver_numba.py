"""The compiled solver against Pons' benchmark scores and the pure-Python solver; its fallback."""

from __future__ import annotations

import ast
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from connectx_az.engine import game, solver, solver_numba
from connectx_az.testsets import pons

SOURCE = Path(__file__).parents[1] / "connectx_az" / "engine" / "solver_numba.py"


def _sign(x: int) -> int:
    return (x > 0) - (x < 0)


def _sample(name: str, num: int, *, step: int = 1) -> list[pons.PonsPosition]:
    return pons.load_set(name, limit=num * step)[::step]


@pytest.fixture(scope="module")
def kernel() -> Callable:
    pytest.importorskip("numba")
    compiled = solver_numba.compile_kernel()
    assert compiled is not None, solver_numba.kernel_error()
    return compiled


@pytest.fixture
def fresh_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget this process's compiled kernel, the process-wide cache included (restored after the test)."""
    monkeypatch.setattr(solver_numba, "_KERNEL", None)
    monkeypatch.setattr(solver_numba, "_KERNEL_ERROR", None)
    monkeypatch.delitem(sys.modules, solver_numba.KERNEL_CACHE_MODULE, raising=False)


def test_top_level_imports_are_numpy_stdlib_and_pasted_modules() -> None:
    tree = ast.parse(SOURCE.read_text())
    top = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative import"
            if node.module == "connectx_az.engine":
                top.update(f"connectx_az.engine.{alias.name}" for alias in node.names)
            else:
                top.add(node.module.split(".")[0])
    engine = {"connectx_az.engine.game", "connectx_az.engine.solver"}
    assert top <= set(sys.stdlib_module_names) | {"__future__", "numpy"} | engine, top
    nested = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) and node not in tree.body
              for alias in node.names}
    assert nested == {"numba"}  # numba only inside compile_kernel


def test_fallback_when_numba_is_missing(fresh_compile: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numba", None)  # `import numba` raises ImportError
    fallback = solver_numba.make_solver()
    assert type(fallback) is solver.Solver
    assert "import of numba halted" in solver_numba.kernel_error()
    p = pons.load_set("Middle-Easy", limit=1)[0]
    col, score = fallback.best_move(*pons.position_of(p))
    assert score == p.score and col in p.best_cols


def test_fallback_when_numba_imports_but_compile_fails(fresh_compile: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_njit(*args: object, **kwargs: object) -> None:
        raise RuntimeError("LLVM is on strike")

    try:
        import numba
    except ImportError:  # stand in a numba that imports but cannot compile
        monkeypatch.setitem(sys.modules, "numba", types.SimpleNamespace(njit=broken_njit))
    else:
        monkeypatch.setattr(numba, "njit", broken_njit)
    fallback = solver_numba.make_solver(table_size=1 << 10)
    assert type(fallback) is solver.Solver
    assert solver_numba.kernel_error() == "RuntimeError: LLVM is on strike"
    assert solver_numba.make_solver() is not fallback  # the failure is remembered, not retried
    for p in pons.load_set("End-Easy", limit=3):
        assert fallback.solve(*pons.position_of(p)) == p.score


def test_pastes_into_a_submission_and_solves() -> None:
    # The builder's own loader, as in submission.py: ``from connectx_az.engine import solver`` is rewritten
    # to the pasted module; with numba the pasted module compiles its own kernel, without it falls back.
    from connectx_az.tools import builder

    names = ("game", "solver", "solver_numba")
    sources = [(name, (SOURCE.parent / f"{name}.py").read_text()) for name in names]
    try:
        loaded = builder._loader_namespace()["_load_modules"](sources, set())
        pasted = loaded["solver_numba"].make_solver()
        assert isinstance(pasted, loaded["solver"].Solver)
        for p in pons.load_set("Middle-Easy", limit=3):
            col, score = pasted.best_move(*pons.position_of(p))
            assert score == p.score and col in p.best_cols
    finally:
        for name in names:
            sys.modules.pop(f"connectx_az_submission.{name}", None)


def test_a_later_copy_of_the_submission_finds_the_kernel_the_process_compiled(fresh_compile: None) -> None:
    # Kaggle executes submission.py again for every game: each execution pastes fresh modules.
    pytest.importorskip("numba")
    from connectx_az.tools import builder

    names = ("game", "solver", "solver_numba")
    sources = [(name, (SOURCE.parent / f"{name}.py").read_text()) for name in names]
    load = builder._loader_namespace()["_load_modules"]
    try:
        first = load(sources, set())["solver_numba"]
        assert first.cached_kernel() is None
        kernel = first.compile_kernel()
        assert kernel is not None and first.compile_seconds > 0
        second = load(sources, set())["solver_numba"]
        assert second is not first and second.cached_kernel() is kernel and second.compile_seconds is None
        assert isinstance(second.make_solver(), second.CompiledSolver)
        second.forget_compiled()
        assert load(sources, set())["solver_numba"].cached_kernel() is None
        # the package's own module is another copy of the code (its own file name): not shared
        assert solver_numba.cached_kernel() is None
    finally:
        for name in names:
            sys.modules.pop(f"connectx_az_submission.{name}", None)


def test_make_solver_does_not_wait_for_a_compile_in_progress_unless_asked(fresh_compile: None) -> None:
    with solver_numba._COMPILE_LOCK:  # as while another thread compiles
        assert type(solver_numba.make_solver(wait=False)) is solver.Solver


def test_compile_in_background(fresh_compile: None) -> None:
    pytest.importorskip("numba")
    thread = solver_numba.compile_in_background()
    thread.join(timeout=120)
    assert not thread.is_alive() and solver_numba.kernel_error() is None
    assert isinstance(solver_numba.make_solver(wait=False), solver_numba.CompiledSolver)


def test_make_solver_gives_the_compiled_solver(kernel: Callable) -> None:
    compiled = solver_numba.make_solver(table_size=1000)
    assert isinstance(compiled, solver_numba.CompiledSolver)
    assert compiled._entries.shape == (512,)  # rounded down to a power of two
    assert solver_numba.compile_seconds > 0


# 340 positions spread over the five complete sets, exact and weak: about 5 s compiled, one core.
SAMPLE = (_sample("End-Easy", 100, step=10) + _sample("Middle-Easy", 100, step=10)
          + _sample("Middle-Medium", 60, step=16) + _sample("Begin-Easy", 60, step=16)
          + _sample("Begin-Medium", 20, step=50))


def test_exact_and_weak_scores_match_benchmark(kernel: Callable) -> None:
    compiled = solver_numba.CompiledSolver(kernel)
    for p in SAMPLE:
        position, mask = pons.position_of(p)
        assert compiled.solve(position, mask) == p.score, p.moves
        compiled.clear()
        assert compiled.solve(position, mask, weak=True) == p.result, p.moves
        col, sign = compiled.best_move(position, mask, weak=True)
        assert sign == p.result and not pons.is_mistake(p, col), p.moves


def test_move_scores_and_best_move_match_the_python_solver(kernel: Callable) -> None:
    compiled = solver_numba.CompiledSolver(kernel)
    python = solver.Solver()
    for p in _sample("Middle-Easy", 20, step=50) + _sample("End-Easy", 20, step=50):  # cheap for Python
        position, mask = pons.position_of(p)
        assert compiled.move_scores(position, mask) == python.move_scores(position, mask) == list(p.move_scores)
        assert compiled.move_scores(position, mask, weak=True) == python.move_scores(position, mask, weak=True)
        assert compiled.best_move(position, mask) == python.best_move(position, mask)
        assert compiled.best_move(position, mask, weak=True) == python.best_move(position, mask, weak=True)


def test_same_search_as_python_visits_as_many_nodes(kernel: Callable) -> None:
    # With a table big enough to keep everything, the compiled search is the Python one node for
    # node, except where a mirrored position hits the table: on these late positions, never.
    for p in _sample("Middle-Easy", 10, step=100):
        position, mask = pons.position_of(p)
        compiled, python = solver_numba.CompiledSolver(kernel, table_size=1 << 20), solver.Solver()
        assert compiled.solve(position, mask) == python.solve(position, mask)
        assert compiled.nodes == python.nodes > 0


def test_tiny_table_stays_exact(kernel: Callable) -> None:
    tiny = solver_numba.CompiledSolver(kernel, table_size=4)  # two buckets: replaced all the time
    for p in _sample("Middle-Medium", 10, step=100):
        assert tiny.solve(*pons.position_of(p)) == p.score, p.moves
        assert tiny.best_move(*pons.position_of(p), weak=True)[1] == p.result


def test_replacement_keeps_costly_entries(kernel: Callable) -> None:
    # Fhourstones' rule against Pons' always-replace on a small table: measured by nodes, which are
    # deterministic; with 2^10 entries the same positions take far fewer nodes than with 4.
    positions = [pons.position_of(p) for p in _sample("Middle-Medium", 5, step=100)]

    def nodes(size: int) -> int:
        total = 0
        for position, mask in positions:
            s = solver_numba.CompiledSolver(kernel, table_size=size)
            s.solve(position, mask)
            total += s.nodes
        return total

    assert nodes(1 << 10) < nodes(4)


def test_mirrored_position_hits_the_table(kernel: Callable) -> None:
    p = _sample("Begin-Easy", 1)[0]
    position, mask = pons.position_of(p)
    compiled = solver_numba.CompiledSolver(kernel)
    score = compiled.solve(position, mask)
    first = compiled.nodes
    assert compiled.solve(*game.mirror(position, mask)) == score
    assert compiled.nodes < first / 10


def test_node_budget_and_past_deadline_stop_it(kernel: Callable) -> None:
    hard = pons.load_set("Begin-Hard", limit=1)[0]
    position, mask = pons.position_of(hard)
    compiled = solver_numba.CompiledSolver(kernel)
    assert compiled.solve(position, mask, max_nodes=100) is None
    assert compiled.nodes <= 101
    assert compiled.best_move(position, mask, max_nodes=100) is None
    assert compiled.move_scores(position, mask, max_nodes=100) is None
    assert compiled.solve(position, mask, deadline=time.perf_counter() - 1.0) is None


@pytest.mark.timing
def test_deadline_stops_it_within_milliseconds(kernel: Callable) -> None:
    position, mask = pons.position_of(pons.load_set("Begin-Hard", limit=1)[0])
    compiled = solver_numba.CompiledSolver(kernel)
    for budget in (0.02, 0.1):
        start = time.perf_counter()
        assert compiled.best_move(position, mask, weak=True, deadline=start + budget) is None
        overrun = time.perf_counter() - start - budget
        assert overrun < 0.03, overrun  # slices of ~4 ms; the margin is for a busy machine
        assert compiled.nodes > 1000


def test_stopped_slices_resume_to_the_right_answer(kernel: Callable, monkeypatch: pytest.MonkeyPatch) -> None:
    # Slices of a few thousand nodes: every probe is stopped and restarted many times.
    monkeypatch.setattr(solver_numba, "SLICE_SECONDS", 1e-6)
    compiled = solver_numba.CompiledSolver(kernel)
    for p in _sample("Begin-Easy", 6, step=150) + _sample("Middle-Medium", 4, step=200):
        position, mask = pons.position_of(p)
        compiled.clear()
        assert compiled.solve(position, mask, deadline=time.perf_counter() + 60) == p.score, p.moves


def test_finished_or_malformed_game_raises(kernel: Callable) -> None:
    compiled = solver_numba.CompiledSolver(kernel)
    with pytest.raises(ValueError, match="already over"):
        compiled.best_move(*game.from_moves("1212121"))
    with pytest.raises(ValueError):
        compiled.solve(1 << 1, 1 << 1)


@pytest.mark.slow
def test_all_complete_sets_weak_and_exact(kernel: Callable) -> None:
    compiled = solver_numba.CompiledSolver(kernel)
    for name in ("End-Easy", "Middle-Easy", "Middle-Medium", "Begin-Easy", "Begin-Medium"):
        for p in pons.load_set(name):
            position, mask = pons.position_of(p)
            assert compiled.solve(position, mask, weak=True) == p.result, p.moves
            assert compiled.solve(position, mask) == p.score, p.moves


@pytest.mark.slow
def test_begin_hard_weak_results(kernel: Callable) -> None:
    compiled = solver_numba.CompiledSolver(kernel)
    for p in pons.load_set("Begin-Hard", limit=20):
        compiled.clear()
        col, sign = compiled.best_move(*pons.position_of(p), weak=True)
        assert sign == p.result and not pons.is_mistake(p, col), p.moves
