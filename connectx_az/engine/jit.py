"""One source, compiled where numba imports and run as plain Python where it does not.

A module writes its hot rules as plain functions on numpy arrays and scalars (the subset of Python that numba
compiles) and hands them, callees first, to a ``Compiler``.  ``Compiler.compile`` njits each of them into one
shared copy of the module's globals in which every such name is its compiled self, so a compiled function calls
compiled helpers (the module itself is left unchanged: its functions stay Python).  ``overrides`` name a
Python-only helper and the function that replaces it when compiled: a shortcut for the interpreter (a row read as
a list) that changes no value.

numba is imported inside ``compile`` alone.  A process compiles once: the result is kept under the functions'
identity (their code) in ``sys.modules``, where a second copy of the module (Kaggle executes ``submission.py``
again for every game) finds it."""

from __future__ import annotations

import hashlib
import marshal
import sys
import threading
import time
import types
from collections.abc import Callable, Sequence

_PROCESS_MODULE = "connectx_az_compiled"


class Compiler:
    """``functions`` compiled (``name`` for messages), at most once a process.

    ``overrides``: ``{python helper's name: the function compiled in its place}``.  ``key`` extras (the board's
    size, for instance) join the functions' code in the identity under which the process keeps the result.
    ``warm_up(compiled)`` calls them with the argument types their callers pass: numba compiles on a
    function's first call, which then happens inside ``compile``, not inside a caller's clock.
    ``makes_no_arrays``: the functions only read, write and view the arrays they are given, so they compile
    without numba's reference counting (its ``_nrt`` option): each array a call passes or a view takes costs two
    atomic operations with it, a third of the search's walk step (docs/results.md, issue 69).  Where numba
    refuses the option, they compile with the counting."""

    def __init__(self, name: str, functions: Sequence[Callable], *, overrides: dict[str, Callable] | None = None,
                 key: tuple = (), warm_up: Callable[[types.SimpleNamespace], None] | None = None,
                 makes_no_arrays: bool = False) -> None:
        self.name = name
        self.makes_no_arrays = makes_no_arrays
        self.warm_up = warm_up
        self.functions = tuple(functions)
        self.overrides = dict(overrides or {})
        codes = tuple(f.__code__ for f in (*self.functions, *self.overrides.values()))
        self.key = hashlib.sha256(marshal.dumps((name, codes, key))).hexdigest()
        self.error: str | None = None  #: why the compile failed in this process (None: it did not, or not yet)
        self.seconds = 0.0  #: what the compile (or the load from numba's cache on disk) took
        self._compiled: types.SimpleNamespace | None = None
        self._lock = threading.Lock()

    def cached(self) -> types.SimpleNamespace | None:
        """The compiled functions (by name) if this process compiled them, by this copy of the module or another;
        never compiles."""
        if self._compiled is None:
            self._compiled = _process_cache().get(self.key)
        return self._compiled

    def compile(self, *, cache: bool = False) -> types.SimpleNamespace | None:
        """The compiled functions, compiled on the first call of the process; ``None`` where numba is missing or
        fails (``error`` says why, and nothing is retried).  ``cache=True`` keeps the machine code in numba's cache
        on disk (training's workers), and compiles in memory where it cannot write one.  Thread-safe."""
        with self._lock:
            if self.cached() is not None or self.error is not None:
                return self._compiled
            start = time.perf_counter()
            compiled, error = None, None
            try:
                import numba

                # the first that works: numba's cache on disk (there may be no folder it may write to) before
                # memory, and without reference counting before with it
                for on_disk, counting in [(on_disk, counting) for on_disk in dict.fromkeys((cache, False))
                                          for counting in dict.fromkeys((not self.makes_no_arrays, True))]:
                    try:
                        compiled = self._njit_all(numba, on_disk, counting)
                        break
                    except Exception as exc:
                        error = exc
            except Exception as exc:  # any compile failure means: run as Python
                error = exc
            finally:
                self.seconds = time.perf_counter() - start
            if compiled is None:
                self.error = f"{type(error).__name__}: {error}"
                return None
            self._compiled = _process_cache()[self.key] = compiled
            return compiled

    def compile_in_background(self) -> threading.Thread | None:
        """Start ``compile`` (in memory) in a daemon thread, unless this process compiled, failed or is compiling
        already (in any copy of the module); returns the thread it started.  numba's compile holds the GIL most
        of the time: it takes its CPU from whatever the process does meanwhile."""
        if self.cached() is not None or self.error is not None:
            return None
        threads = _process_state("threads")
        running = threads.get(self.key)
        if running is not None and running.is_alive():
            return None
        thread = threads[self.key] = threading.Thread(target=self.compile, name=f"{self.name}-compile", daemon=True)
        thread.start()
        return thread

    def _njit_all(self, numba, cache: bool, counting: bool = True) -> types.SimpleNamespace:
        """njit every function into one copy of their module's globals (numba resolves globals as it compiles);
        ``counting=False``: without reference counting."""
        options = {} if counting else {"_nrt": False}
        jit = numba.njit(cache=cache, nogil=True, inline="always", **options)
        shared = dict(self.functions[0].__globals__)
        for name, function in self.overrides.items():
            shared[name] = jit(_rebound(function, shared, name))
        compiled = {}
        for function in self.functions:
            name = function.__name__
            shared[name] = compiled[name] = jit(_rebound(function, shared, name))
        namespace = types.SimpleNamespace(**compiled)
        if self.warm_up is not None:
            self.warm_up(namespace)
        return namespace


def _rebound(function: Callable, shared: dict, name: str) -> Callable:
    """``function``'s code with ``shared`` as its globals, under ``name``."""
    clone = types.FunctionType(function.__code__, shared, name, function.__defaults__)
    clone.__qualname__ = name
    clone.__doc__ = function.__doc__
    return clone


def _process_state(name: str) -> dict:
    """The process's dict ``name`` (``compiled``: the compiled functions by key; ``threads``: the compiles under
    way), shared by every copy of this module."""
    state = sys.modules.get(_PROCESS_MODULE)
    if state is None:
        state = sys.modules[_PROCESS_MODULE] = types.ModuleType(_PROCESS_MODULE)
    return state.__dict__.setdefault(name, {})


def _process_cache() -> dict:
    """Compiled functions kept for the process by key."""
    return _process_state("compiled")


def forget_compiled() -> None:
    """Drop the process's compiled functions (a module copy made afterwards compiles again); for tests."""
    sys.modules.pop(_PROCESS_MODULE, None)
