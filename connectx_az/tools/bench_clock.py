"""The built file against Kaggle's clock on a shared core: the games and first moves ``tests/test_clock.py`` checks
Kaggle's rule on, and the margins ``connectx-az bench clock`` prints.

Kaggle takes each move's time beyond ``actTimeout`` from an overage bank (``BANK_PER_ACT_SECOND`` actTimeouts a
game): a move that overdraws it is a TIMEOUT, one that is not a plain ``int`` for an open column INVALID, and loading
the file counts against the first move.  ``play_games`` and ``first_move`` run the built file in a fresh interpreter
pinned to one core with what a runtime lacks blocked (``kaggle_io.RUNTIMES``), usually while ``busy_loop`` holds the
same core, the clock scaled down so that many games fit in seconds; the runner (``bench_probes/probe_clock.py``)
keeps Kaggle's books itself.  How close a move comes to its own budget depends on the machine's load (a stall of the
host after the search's last deadline check makes a move late whatever the agent does), so those margins are
figures to read, not rules.
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
#: the program each run executes (``bench_probes/probe_clock.py``), after ``kaggle_io.sandbox_prelude``
_PROBE = (Path(__file__).parent / "bench_probes" / "probe_clock.py").read_text()


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


def lateness(games: list[dict[str, Any]]) -> list[float]:
    """Seconds each searched move ran past its own budget (negative: early), latest last; the first move of each
    seat (steps 0 and 1) is left out: it pays for the file's exec, which ``first_move`` measures on its own."""
    return sorted(m["seconds"] - m["budget"] for g in games for m in g["moves"]
                  if m["budget"] is not None and m["step"] > 1)


def summarize_games(games: list[dict[str, Any]], bank: float) -> dict[str, Any]:
    """The margins of ``play_games``' games: results, the latest two moves past their budget, the bank."""
    late = lateness(games)
    moves = [m for g in games for m in g["moves"]]
    return {"games": len(games), "moves": len(moves),
            "results": {r: sum(g["result"] == r for g in games) for r in sorted({g["result"] for g in games})},
            "latest_past_budget_s": round(late[-1], 4) if late else None,
            "next_latest_past_budget_s": round(late[-2], 4) if len(late) > 1 else None,
            "longest_move_s": round(max((m["seconds"] for m in moves), default=0.0), 4),
            "least_bank_s": round(min((m.get("bank", bank) for m in moves), default=bank), 3), "bank_s": bank}


def bench_clock(model: str | Path, *, act_timeout: float = 0.25, num_games: int = 6, tries: int = 3,
                seed: int = 7) -> dict[str, Any]:
    """The built file's margins on Kaggle's clock, sharing its core with a busy loop (module docstring).

    Builds ``submission.py`` for ``model``; ``games``: ``play_games`` at ``act_timeout`` for each (runtime, agent
    clock) of the tests (the ``kaggle`` runtime where numba imports), summarised by ``summarize_games``;
    ``first_move``: ``tries`` first moves at 0.5 s (numpy runtime) against the move's budget
    (``_first_move_figures``); ``compile``: where numba imports, the same for a first move at Kaggle's own clock that
    compiles the solver.
    """
    import importlib.util

    from connectx_az.tools import builder

    cpu = last_cpu()
    has_numba = importlib.util.find_spec("numba") is not None
    result: dict[str, Any] = {"model": Path(model).name, "cpu": cpu, "act_timeout": act_timeout}
    with tempfile.TemporaryDirectory(prefix="connectx_clock_") as tmp:
        submission = Path(tmp) / "submission.py"
        builder.build_submission(model, submission)
        with busy_loop(cpu, seconds=600.0):
            result["games"] = {}
            for runtime, agent_clock in (("numpy", "shipped"), ("numpy", "scaled"), ("kaggle", "scaled")):
                if runtime == "kaggle" and not has_numba:
                    continue
                games = play_games(submission, cpu=cpu, runtime=runtime, act_timeout=act_timeout,
                                   num_games=num_games, seed=seed, agent_clock=agent_clock,
                                   warm=runtime == "kaggle")
                result["games"][f"{runtime}/{agent_clock}"] = summarize_games(games, BANK_PER_ACT_SECOND * act_timeout)
            firsts = [first_move(submission, cpu=cpu, act_timeout=0.5) for _ in range(tries)]
            result["first_move"] = [_first_move_figures(f, 0.5, BANK_PER_ACT_SECOND * 0.5) for f in firsts]
            if has_numba:
                f = first_move(submission, cpu=cpu, runtime="kaggle", act_timeout=2.0, bank=60.0, timeout=300.0)
                result["compile"] = {"compile_s": round(f["info"].get("compile_seconds", 0.0), 3),
                                     **_first_move_figures(f, 2.0, 60.0), "solver": f["info"]["solver"]}
    return result


def _first_move_figures(move: dict[str, Any], act_timeout: float, bank: float) -> dict[str, Any]:
    """A ``first_move``'s time from the start of the file's exec against the move's budget from then: the
    compile (charged to the bank) plus ``move_budget`` of the bank left (the exec is charged inside it)."""
    from connectx_az.agent import template

    compiled = move["info"].get("compile_seconds", 0.0)
    budget = compiled + template.move_budget(act_timeout, bank - compiled, 42)
    seconds = move["exec_seconds"] + move["call_seconds"]
    return {"exec_s": round(move["exec_seconds"], 3), "call_s": round(move["call_seconds"], 3),
            "budget_s": round(budget, 3), "past_budget_s": round(seconds - budget, 3),
            "bank_used_s": round(max(0.0, seconds - act_timeout), 3),
            "simulations": move["info"].get("simulations", 0)}


def format_clock(result: dict[str, Any]) -> str:
    """``bench_clock``'s figures as text."""
    act = result["act_timeout"]
    lines = [f"clock benchmark: the file built from {result['model']}, run as Kaggle runs it on core {result['cpu']}, "
             "which a busy loop shares"]
    for label, g in result["games"].items():
        results = ", ".join(f"{n} {r}" for r, n in g["results"].items())
        lines.append(f"  games {label:<15}{g['games']} at {act:g} s + {g['bank_s']:g} s bank ({results}; "
                     f"{g['moves']} moves): latest move {g['latest_past_budget_s']} s past its budget, next "
                     f"{g['next_latest_past_budget_s']} s; longest {g['longest_move_s']} s; least bank left "
                     f"{g['least_bank_s']} s")
    for k, f in enumerate(result["first_move"], 1):
        lines.append(f"  first move {k} at 0.5 s: exec {f['exec_s']} s + call {f['call_s']} s against a budget of "
                     f"{f['budget_s']} s ({f['past_budget_s']:+} s), {f['simulations']} simulations")
    if "compile" in result:
        c = result["compile"]
        lines.append(f"  first move at 2 s + 60 s (kaggle runtime): exec {c['exec_s']} s + call {c['call_s']} s "
                     f"(compile {c['compile_s']} s) against a budget of {c['budget_s']} s ({c['past_budget_s']:+} s); "
                     f"bank used {c['bank_used_s']} s")
    lines.append("  past budget: wall seconds beyond the agent's own budget for the move (the tests check only "
                 "Kaggle's rule: no TIMEOUT, a plain int)")
    return "\n".join(lines)
