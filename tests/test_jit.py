"""``engine/jit.py``: one source, compiled where numba imports, kept once a process, plain Python otherwise."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from connectx_az.engine import jit


def _double(x):
    return 2 * x


def _twice_each(values, out) -> int:
    for i in range(values.shape[0]):
        out[i] = _double(values[i])
    return values.shape[0]


def _slow_helper(x):
    raise AssertionError("compiled code must call the override")


def _calls_helper(x):
    return _slow_helper(x)


def _fast_helper(x):
    return x + 1


@pytest.fixture(autouse=True)
def fresh_process_cache():
    jit.forget_compiled()
    yield
    jit.forget_compiled()


def test_compiled_functions_call_compiled_helpers_and_give_the_pythons_results() -> None:
    pytest.importorskip("numba")
    compiler = jit.Compiler("test", (_double, _twice_each))
    compiled = compiler.compile()
    assert compiled is not None and compiler.error is None and compiler.seconds > 0
    values, want, got = np.arange(5.0), np.zeros(5), np.zeros(5)
    assert _twice_each(values, want) == compiled._twice_each(values, got) == 5
    np.testing.assert_array_equal(got, want)
    assert _twice_each.__globals__["_double"] is _double  # the module's own functions stay Python


def test_an_override_replaces_a_python_only_helper_when_compiled() -> None:
    pytest.importorskip("numba")
    compiled = jit.Compiler("test-override", (_calls_helper,), overrides={"_slow_helper": _fast_helper}).compile()
    assert compiled._calls_helper(1) == 2


def test_a_process_compiles_once_and_a_module_copy_finds_it() -> None:
    pytest.importorskip("numba")
    first = jit.Compiler("test", (_double,), key=(6, 7))
    compiled = first.compile()
    copy = jit.Compiler("test", (_double,), key=(6, 7))  # what a second copy of the module makes
    assert copy.cached() is compiled and copy.seconds == 0
    assert jit.Compiler("test", (_double,), key=(7, 8)).cached() is None  # another board: another identity


def test_without_numba_nothing_compiles_and_the_reason_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba raises ImportError
    compiler = jit.Compiler("test", (_double,))
    assert compiler.compile() is None and compiler.cached() is None
    assert "numba" in compiler.error
    monkeypatch.delitem(sys.modules, "numba")
    assert compiler.compile() is None  # asked again: the answer is kept, nothing retried


def test_a_cache_numba_cannot_write_falls_back_to_compiling_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    numba = pytest.importorskip("numba")

    def njit(*, cache: bool, **options):
        if cache:
            raise RuntimeError("cannot cache function: no locator available")
        return lambda f: f  # the functions run as Python: enough to see which way was taken

    monkeypatch.setattr(numba, "njit", njit)
    compiler = jit.Compiler("test", (_double,))
    compiled = compiler.compile(cache=True)
    assert compiled is not None and compiler.error is None and compiled._double(3) == 6


def test_functions_that_make_no_arrays_compile_without_reference_counting(monkeypatch: pytest.MonkeyPatch) -> None:
    numba = pytest.importorskip("numba")
    compiled = jit.Compiler("test-no-counting", (_double, _twice_each), makes_no_arrays=True).compile()
    values, got = np.arange(5.0), np.zeros(5)
    assert compiled._twice_each(values, got) == 5
    np.testing.assert_array_equal(got, 2 * values)
    assert compiled._twice_each.targetoptions["_nrt"] is False
    jit.forget_compiled()
    # a numba that refuses the option: the same functions compile with the counting
    real = numba.njit

    def njit(**options):
        if "_nrt" in options:
            raise KeyError("_nrt")
        return real(**options)

    monkeypatch.setattr(numba, "njit", njit)
    compiler = jit.Compiler("test-no-counting", (_double, _twice_each), makes_no_arrays=True)
    compiled = compiler.compile()
    assert compiled is not None and compiler.error is None and "_nrt" not in compiled._twice_each.targetoptions
