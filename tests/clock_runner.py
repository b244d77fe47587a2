"""The built file against Kaggle's clock, on a shared core: the games and first moves ``test_clock.py`` checks
Kaggle's rule on.

``play_games`` and ``first_move`` run the built file in a fresh interpreter pinned to one core (``clock_probe.py``
after ``kaggle_io.sandbox_prelude``), with what a runtime lacks blocked (``kaggle_io.RUNTIMES``), usually while
``busy_loop`` holds the same core, the clock scaled down so that many games fit in seconds.  The runner keeps
Kaggle's books itself: wall time per call, the first call of each game charged with executing the file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from connectx_az.evaluation import kaggle_io

#: Kaggle's bank is 30 actTimeouts (60 s at 2 s); the scaled clocks keep that ratio
BANK_PER_ACT_SECOND = kaggle_io.OVERAGE_PER_ACT_SECOND
#: the program each run executes, after ``kaggle_io.sandbox_prelude``
_PROBE = (Path(__file__).parent / "clock_probe.py").read_text()


def last_cpu() -> int:
    """The core the runners pin to: the last one this process may use."""
    return max(os.sched_getaffinity(0))


@contextmanager
def busy_loop(cpu: int, seconds: float = 120.0) -> Iterator[subprocess.Popen]:
    """A busy-loop process pinned to ``cpu`` for the ``with`` block; it stops by itself after ``seconds``."""
    code = (f"import os, time\nos.sched_setaffinity(0, {{{cpu}}})\nend = time.monotonic() + {seconds}\n"
            "while time.monotonic() < end:\n    pass\n")
    hog = subprocess.Popen([sys.executable, "-I", "-c", code])
    try:
        yield hog
    finally:
        hog.kill()
        hog.wait(timeout=10)


def _run(runtime: str, args: list[object], cpu: int, timeout: float) -> Any:
    """Run the probe for ``runtime`` (the package and what the runtime lacks blocked) in a fresh interpreter
    pinned to ``cpu``; its last stdout line as JSON.  ``RuntimeError`` with its stderr's tail if it fails."""
    script = kaggle_io.sandbox_prelude(("connectx_az", *kaggle_io.runtime_blocked(runtime))) + _PROBE
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    with tempfile.TemporaryDirectory(prefix="connectx_clock_") as tmp:
        runner = Path(tmp) / "runner.py"
        runner.write_text(script)
        done = subprocess.run([sys.executable, "-I", str(runner), str(cpu), *map(str, args)], cwd=tmp, env=env,
                              capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"the clock probe failed: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def play_games(submission: str | Path, *, cpu: int, runtime: str = "numpy", act_timeout: float = 0.25,
               num_games: int = 6, seed: int = 7, agent_clock: str = "shipped", warm: bool = False,
               timeout: float = 240.0) -> list[dict[str, Any]]:
    """Whole games of the built file against a quick tactical opponent, seats alternating, in one process.

    The bank starts at ``BANK_PER_ACT_SECOND * act_timeout``.  ``agent_clock``: ``shipped`` keeps the agent's clock
    constants as built; ``scaled`` shrinks those the probe lists (``SCALED_CONSTANTS``) with the clock, so the agent
    draws on its bank as it does at 2 s.  ``warm`` compiles the solver before the games (``kaggle`` runtime: a scaled
    bank is too small to pay for a compile).  Per game: ``seat`` (1 moves first), ``exec_seconds``, ``result``
    (``win``, ``loss``, ``draw``, ``TIMEOUT``, ``INVALID``), ``last_error`` and ``moves``: per move ``step``, ``type``
    and ``move`` (repr), ``seconds`` (the first with the file's exec), the agent's ``budget``, ``source``,
    ``simulations``, ``backend``, ``solver`` and the ``bank`` left after it.
    """
    from connectx_az.agent import template

    if agent_clock not in ("shipped", "scaled"):
        raise ValueError(f"agent_clock must be shipped or scaled, not {agent_clock!r}")
    scale = 1.0 if agent_clock == "shipped" else act_timeout / template.CONFIG.default_act_timeout
    bank = BANK_PER_ACT_SECOND * act_timeout
    return _run(runtime, ["games", submission, act_timeout, bank, num_games, seed, scale, "warm" if warm else "cold"],
                cpu, timeout)


def first_move(submission: str | Path, *, cpu: int, runtime: str = "numpy", act_timeout: float = 0.5,
               bank: float | None = None, timeout: float = 120.0) -> dict[str, Any]:
    """A game's first move in a fresh interpreter: the file executed, the model decoded, the move played.

    ``bank`` defaults to ``BANK_PER_ACT_SECOND * act_timeout``.  Returns ``type`` and ``move`` (repr) of the answer,
    ``exec_seconds``, ``call_seconds``, ``decode_seconds`` and ``preload_seconds`` (the exec as the agent measured
    it), ``backend`` and the agent's ``info`` (``budget``, ``source``, ``simulations``, ``solver``,
    ``compile_seconds``...).
    """
    bank = BANK_PER_ACT_SECOND * act_timeout if bank is None else bank
    return _run(runtime, ["first_move", submission, act_timeout, bank], cpu, timeout)
