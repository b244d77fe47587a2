"""The mutation check: one-line bugs in central code that the tests must catch.

    .venv/bin/python lab/mutation/check.py            # every mutation in MUTATIONS
    .venv/bin/python lab/mutation/check.py --list     # what they are, without running anything
    .venv/bin/python lab/mutation/check.py --only backup-sign book-key-check

Each mutation replaces one line of the package (the pasted engine and agent, the book, the clock, tree
reuse, the replay window, the resume path) with a plausible bug.  The check copies the tree (the files git
tracks and the untracked ones it does not ignore) to a temporary folder, runs every covering test there unmutated
(they must pass, or the check stops), then for each mutation edits the copy, runs the tests that cover
that code (``pytest -x``, ``make test``'s markers) with the copy first on ``PYTHONPATH``, and restores
the file.  The working tree is never written.  A mutation *survives* when its tests pass.  The check
prints one line per mutation, the tests that caught it and the time taken; its exit status is 1 when
any survives.  Standard library only; ``docs/testing.md`` holds its last result.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Mutation:
    """Replace ``old`` (found exactly once in ``path``, within one line) by ``new``; ``tests`` cover it."""

    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]
    why: str


MCTS, BOOK, TEMPLATE = "connectx_az/engine/mcts.py", "connectx_az/engine/book.py", "connectx_az/agent/template.py"
RUNS, GAME = "connectx_az/training/runs.py", "connectx_az/engine/game.py"
FALLBACK, SEARCH_TREE = "connectx_az/agent/fallback.py", "connectx_az/engine/search_tree.py"
SELFPLAY, REPLAY = "connectx_az/training/selfplay.py", "connectx_az/training/replay.py"
COMPARE, BACKENDS = "connectx_az/tools/compare.py", "connectx_az/agent/backends.py"

MUTATIONS = (
    # the search (pasted)
    Mutation("backup-sign", MCTS, "v = for_other_side if (num_edges - d) % 2 == 1 else for_leaf_side",
             "v = for_other_side if (num_edges - d) % 2 == 0 else for_leaf_side",
             ("tests/test_mcts.py",), "the backup credits each value to the wrong player"),
    Mutation("proof-sign", MCTS, "value = -proven[child]", "value = proven[child]",
             ("tests/test_mcts.py",), "a proven child's value is not negated for its parent"),
    Mutation("best-col-proven-loss", MCTS, "score = np.where(move_value == -1, score - 1e9, score)",
             "score = np.where(move_value == -1, score, score)",
             ("tests/test_mcts.py",), "the move chosen may be one proven lost"),
    Mutation("fpu-sign", MCTS, "node_value / (1.0 + visits_sum) - fpu_reduction",
             "node_value / (1.0 + visits_sum) + fpu_reduction",
             ("tests/test_mcts.py",), "unvisited moves score above the parent's value"),
    Mutation("virtual-loss-sign", MCTS, "value_sum[node, best] -= vl", "value_sum[node, best] += vl",
             ("tests/test_mcts.py",), "a walk's virtual loss reads as a win, so later walks follow it"),
    Mutation("new-node-win", MCTS, "proven[child] = -1.0", "proven[child] = 1.0",
             ("tests/test_mcts.py",), "a new node where the last mover made four in a row scores as a win"),
    Mutation("terminal-value", SEARCH_TREE, "return np.where(lost, -1.0, np.where(full, 0.0, np.nan))",
             "return np.where(lost, 1.0, np.where(full, 0.0, np.nan))",
             ("tests/test_mcts.py",), "a lost terminal position scores as a win"),
    # self-play's memory
    Mutation("table-regrow", SELFPLAY, "keys = self._keys[held][np.argsort(self._rows[held])]",
             "keys = self._keys[held]", ("tests/test_selfplay.py",),
             "a grown hash table gives its positions new rows: other positions' answers"),
    # the rules (pasted)
    Mutation("win-check-diagonal", GAME, "| (falling & (falling >> 16))) != 0", ") != 0",
             ("tests/test_game.py",), "one diagonal's four in a row is not a win"),
    # the agent's move choice and its safety net (pasted)
    Mutation("agent-block", GAME, "threats = winning_cols(position ^ mask, mask)",
             "threats = winning_cols(position, mask)", ("tests/test_agent.py",),
             "the forced block looks at the side to move's own wins, not the opponent's threats"),
    Mutation("fallback-win-first", FALLBACK, "for who in (mark, other):", "for who in (other, mark):",
             ("tests/test_agent.py",), "the safety net blocks where it could win at once"),
    Mutation("fallback-safe", FALLBACK, "if landing[c] < 1 or not _completes_line(",
             "if landing[c] < 1 or _completes_line(", ("tests/test_agent.py",),
             "the safety net prefers the columns that hand the opponent a win"),
    # the book (pasted)
    Mutation("book-key-check", BOOK, "if i >= len(self.keys) or int(self.keys[i]) != key:",
             "if i >= len(self.keys):", ("tests/test_book.py",),
             "a position missing from the book gets a neighbouring entry's move"),
    Mutation("book-canonical", BOOK, "return (mirrored, True) if mirrored < key else (key, False)",
             "return (mirrored, True) if mirrored > key else (key, False)", ("tests/test_book.py",),
             "a position's key is the larger of its own and its reflection's, not the book's smaller one"),
    Mutation("book-mirror", BOOK, "return (game.COLS - 1 - col if mirrored else col), (info >> _RESULT_SHIFT) - 1",
             "return col, (info >> _RESULT_SHIFT) - 1", ("tests/test_book.py",),
             "a mirrored position plays the canonical position's column"),
    # the clock (pasted)
    Mutation("clock-reserve", TEMPLATE, "max(0.0, overage - config.overage_reserve)", "max(0.0, overage)",
             ("tests/test_clock.py",), "the bank's reserve is spent too"),
    Mutation("clock-share", TEMPLATE, "extra = config.overage_share * max(", "extra = max(",
             ("tests/test_clock.py",), "the whole bank above the reserve is shared out, not overage_share of it"),
    Mutation("clock-cap", TEMPLATE, "return base + min(extra, config.max_extra_seconds)", "return base + extra",
             ("tests/test_clock.py",), "no cap on the seconds a move draws from the bank"),
    Mutation("clock-moves-left", TEMPLATE, "moves_left = max(config.min_moves_left, (num_empty + 1) // 2)",
             "moves_left = max(1, (num_empty + 1) // 2)", ("tests/test_clock.py",),
             "the last moves share the bank over fewer than min_moves_left"),
    Mutation("clock-exec-charge", TEMPLATE, "budget -= min(max(self.preload_seconds, 0.0), budget)", "pass",
             ("tests/test_clock.py",), "the first move does not pay for executing the file"),
    Mutation("clock-compile-charge", TEMPLATE, "overage = max(0.0, overage - compiled)", "overage = max(0.0, overage)",
             ("tests/test_clock.py",), "the move is budgeted from the bank as it was before the compile"),
    Mutation("solver-draw", TEMPLATE, "if found is None or found[1] < 0:", "if found is None or found[1] <= 0:",
             ("tests/test_agent.py",),
             "a draw the solver proves is left to the search, which may play a losing column"),
    # tree reuse (pasted)
    Mutation("reuse-reply-check", TEMPLATE, "if game.play(after_position, after_mask, reply) == (position, mask):",
             "if True:", ("tests/test_agent.py",),
             "the tree is reused down the first reply it holds, not the played one"),
    # self-play's cache of the network's answers
    Mutation("cache-order", SELFPLAY, "rows[i] = next_row + num_new", "rows[i] = next_row",
             ("tests/test_selfplay.py",), "every new position of a call gets the first new position's answer"),
    Mutation("cache-key", SELFPLAY, "return (planes @ _KEY_WEIGHTS).astype(np.uint64) + np.uint64(game.BOTTOM_MASK)",
             "return (planes[:, : game.NUM_CELLS] @ _KEY_WEIGHTS[: game.NUM_CELLS]).astype(np.uint64)",
             ("tests/test_selfplay.py",),
             "the key sees only the side to move's stones: positions that differ in the opponent's share one"),
    Mutation("cache-cap", SELFPLAY, "if self._size + count > self.max_positions:",
             "if self._size > self.max_positions:", ("tests/test_selfplay.py",),
             "the memory is emptied only once it is past its cap"),
    # the replay window
    Mutation("window-oldest-first", REPLAY, "<= up_to_generation), reverse=True)",
             "<= up_to_generation), reverse=False)", ("tests/test_replay.py",),
             "the cap on positions keeps the window's oldest generations, not its newest"),
    Mutation("window-one-more", REPLAY, "up_to_generation - num_generations < g <= up_to_generation",
             "up_to_generation - num_generations <= g <= up_to_generation", ("tests/test_replay.py",),
             "a generation trains on one generation more than its window"),
    # resuming a run
    Mutation("resume-trim", RUNS, "trim_metrics(run_dir, generation)", "pass", ("tests/test_train.py",),
             "a generation's metrics line written before a kill stays beside the line of its rerun"),
    Mutation("trim-keeps-next", RUNS, '.get("generation", -1) < next_generation',
             '.get("generation", -1) <= next_generation', ("tests/test_train.py",),
             "trim_metrics keeps the line of the generation the checkpoint does not hold"),
    Mutation("resume-generation", RUNS, 'generation = int(data["generation"])', "generation = 0",
             ("tests/test_train.py",), "a resumed run starts again from generation 0"),
    Mutation("resume-optimizer", RUNS, 'optimizer.load_state_dict(data["optimizer"])', "pass",
             ("tests/test_train.py",), "a resumed run's optimizer starts afresh"),
    # paths an audit's planted bugs crossed unseen (issue 70)
    Mutation("negamax-draw-won", COMPARE, '"won": sum(r["wins"] for r in results)',
             '"won": sum(r["wins"] + r["draws"] for r in results)',
             ("tests/test_compare.py::test_a_drawn_game_against_negamax_fails_the_rule_that_every_game_is_won",),
             "compare counts a game drawn against negamax as won: a candidate that draws may ship"),
    Mutation("check-value-finite", BACKENDS,
             "if not (np.all(np.isfinite(logits)) and np.all(np.isfinite(value))):",
             "if not np.all(np.isfinite(logits)):",
             ("tests/test_agent.py::test_a_network_whose_value_is_not_finite_is_refused_when_loaded_and_the_agent_"
              "plays_on",), "the check of a loaded network takes a value that is not finite"),
    Mutation("bank-draw-rate", TEMPLATE, "rate * (own + extra) < typical", "rate * own < typical",
             ("tests/test_agent.py::test_the_compiled_solver_draws_on_the_bank_exactly_when_its_rate_finishes_the_"
              "typical_proof_in_time",), "the solver is denied the bank's seconds unless it could finish without them"),
    Mutation("proven-root-drawn", SELFPLAY, "and config.temperature_early > 0 and np.isnan(root_proven[i]):",
             "and config.temperature_early > 0:",
             ("tests/test_selfplay.py::test_a_proven_root_plays_its_proof_even_where_the_opening_temperature_draws",),
             "self-play draws an opening move from the visits at a root the search has proven"),
)


def tree_files(root: Path) -> list[str]:
    """The files git tracks and the untracked ones it does not ignore, relative to ``root``."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                         capture_output=True, check=True).stdout
    return [name for name in out.decode().split("\0") if name and (root / name).is_file()]


def copy_tree(root: Path, dest: Path) -> None:
    for name in tree_files(root):
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)


def mutate(text: str, mutation: Mutation) -> str:
    """``text`` with ``mutation`` applied; ValueError unless ``old`` is found exactly once, within one line."""
    if text.count(mutation.old) != 1 or "\n" in mutation.old:
        raise ValueError(f"{mutation.name}: {mutation.old!r} is not found exactly once in {mutation.path}")
    return text.replace(mutation.old, mutation.new)


def line_of(text: str, mutation: Mutation) -> int:
    return text[: text.index(mutation.old)].count("\n") + 1


def run_tests(python: str, copy: Path, tests: tuple[str, ...], timeout: float) -> tuple[int, str, float]:
    """``(exit status, output, seconds)`` of pytest on ``tests`` in ``copy`` (124 on a timeout)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(copy), os.environ.get("PYTHONPATH")])),
           "PYTHONDONTWRITEBYTECODE": "1"}  # no stale bytecode of a mutated file of the same size and second
    start = time.perf_counter()
    try:
        done = subprocess.run([python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests], cwd=copy,
                              env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return 124, output, time.perf_counter() - start
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - start


def first_failure(output: str) -> str:
    found = re.search(r"^(?:FAILED|ERROR) (\S+)", output, re.MULTILINE)
    return found[1] if found else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run these mutations only")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs pytest (default: this one)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per pytest run (a timeout kills)")
    args = parser.parse_args(argv)
    mutations = [m for m in MUTATIONS if not args.only or m.name in args.only]
    unknown = set(args.only or ()) - {m.name for m in MUTATIONS}
    if unknown:
        parser.error(f"no mutation named {', '.join(sorted(unknown))}")
    for m in mutations:  # every mutation must still apply to the tree as it is
        mutate((ROOT / m.path).read_text(), m)
    if args.list:
        for m in mutations:
            where = f"{m.path}:{line_of((ROOT / m.path).read_text(), m)}"
            print(f"{m.name:22} {where:36} {m.why}")
        return 0

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mutation-check-") as folder:
        copy = Path(folder) / "tree"
        copy_tree(ROOT, copy)
        probe = subprocess.run([args.python, "-c", "import connectx_az; print(connectx_az.__file__)"], cwd=copy,
                               env={**os.environ, "PYTHONPATH": str(copy)}, capture_output=True, text=True)
        if not probe.stdout.strip().startswith(str(copy)):
            print(f"the copy's package is not the one imported ({probe.stdout.strip() or probe.stderr.strip()})")
            return 2
        covering = tuple(dict.fromkeys(t for m in mutations for t in m.tests))
        code, output, seconds = run_tests(args.python, copy, covering, args.timeout)
        if code != 0:
            print(output[-3000:])
            print(f"the covering tests fail on the unmutated tree ({' '.join(covering)}): nothing to check")
            return 2
        print(f"unmutated: {' '.join(covering)} pass ({seconds:.0f} s)")
        survived = []
        for m in mutations:
            path = copy / m.path
            original = path.read_text()
            path.write_text(mutate(original, m))
            try:
                code, output, seconds = run_tests(args.python, copy, m.tests, args.timeout)
            finally:
                path.write_text(original)
            if code == 0:
                verdict, caught = "SURVIVED", ""
                survived.append(m.name)
            else:
                verdict = "killed" if code in (1, 124) else f"killed (pytest exit {code})"
                caught = "timeout" if code == 124 else first_failure(output)
            where = f"{m.path}:{line_of(original, m)}"
            print(f"{verdict:8} {m.name:22} {where:36} {seconds:4.0f} s  {caught}", flush=True)
    total = time.perf_counter() - start
    print(f"{len(mutations)} mutations: {len(mutations) - len(survived)} killed, {len(survived)} survived"
          + (f" ({', '.join(survived)})" if survived else "") + f"; {total:.0f} s in all")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
