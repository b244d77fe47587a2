"""The steps of a compare (``compare``), run: each a child ``connectx-az`` process that writes one grade, in lanes a
runtime each (pinned to a core each with ``--cores``), with progress lines whose time left is measured in the run.

A step whose file is in the output folder is done (a killed compare resumes there)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connectx_az import extras, files
from connectx_az.errors import UserError

#: seconds the children get to end on SIGTERM when a compare is stopped, before SIGKILL
_STOP_SECONDS = 10.0


class CompareError(UserError, ValueError):
    """A compare that cannot run as asked (one line: what, and what to do)."""


@dataclass(frozen=True)
class Step:
    """One grade: its file in the output folder, the child command's arguments, and what it needs."""

    name: str
    file: str
    args: tuple[str, ...]
    needs: tuple[str, ...] = ()
    weight: float = 1.0  # its size within its kind (positions or games, times the clock): what the time left scales

    @property
    def kind(self) -> tuple[str, str]:
        """``(runtime, kind)``: ``("kaggle", "pons")``...; ``("", "network")`` for the networks alone."""
        kind, _, rest = self.file.removesuffix(".json").partition("_")
        return rest.split("_")[0], kind


def run_steps(steps: Sequence[Step], out_dir: Path, *, cores: Sequence[int] = (),
              log: Callable[[str], None] = print) -> list[str]:
    """Run the steps whose file is not yet in ``out_dir``; returns a line for each step skipped for want of a
    package.  A child that fails raises ``CompareError`` with its last line of error output.  ``cores``: the CPU
    cores to pin the children to; with two or more, the runtimes' steps run at once, a runtime a core (the clock is
    what is measured: give cores nothing else uses); the networks alone come last."""
    todo = [s for s in steps if not (out_dir / s.file).is_file()]
    lanes: dict[str, list[Step]] = {}
    for step in todo:
        lanes.setdefault(step.name.split()[0] if step.file.startswith(("pons_", "negamax_", "duel_")) else "",
                         []).append(step)
    runtime_lanes = [lane for name, lane in lanes.items() if name]
    at_once = min(len(cores), len(runtime_lanes)) if len(cores) > 1 else 1
    progress = _Progress(len(steps), todo, log, lanes_at_once=max(at_once, 1))
    children = _Children()
    if len(cores) > 1 and len(runtime_lanes) > 1:
        with ThreadPoolExecutor(len(runtime_lanes)) as pool:
            futures = [pool.submit(_run_lane, lane, out_dir, cores[i % len(cores)], progress, children)
                       for i, lane in enumerate(runtime_lanes)]
            try:
                for future in futures:
                    future.result()
            except BaseException:  # Ctrl-C or SIGTERM here: the other lanes' children stop too, before the wait
                children.stop()
                raise
    else:
        for lane in runtime_lanes:
            _run_lane(lane, out_dir, cores[0] if cores else None, progress, children)
    _run_lane(lanes.get("", []), out_dir, cores[0] if cores else None, progress, children)
    return progress.skipped


class _Children:
    """The steps' child processes running now, so that an interrupt stops them all and the lanes start no more."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: set[subprocess.Popen[str]] = set()
        self.stopped = False

    def start(self, args: list[str], **popen: Any) -> subprocess.Popen[str] | None:
        """The started child, or None once stopped."""
        with self.lock:
            if self.stopped:
                return None
            child = subprocess.Popen(args, **popen)
            self.running.add(child)
            return child

    def wait(self, child: subprocess.Popen[str]) -> tuple[str, str]:
        """The child's output once it ends; an interrupt of this thread stops it (``stop``) first."""
        try:
            return child.communicate()
        except BaseException:
            self.stop()
            raise
        finally:
            with self.lock:
                self.running.discard(child)

    def stop(self) -> None:
        """SIGTERM to every child (a ``connectx-az`` command ends within seconds on it), SIGKILL after
        ``_STOP_SECONDS``; no more children start."""
        with self.lock:
            self.stopped = True
            running = list(self.running)
        for child in running:
            child.terminate()
        deadline = time.monotonic() + _STOP_SECONDS
        for child in running:
            try:
                child.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


class _Progress:
    """The compare's progress lines: each step as it starts, its place among all the steps (those a killed compare
    graded count as done), and the time left: each step to come takes the seconds per unit of ``Step.weight`` that
    its kind's steps (the same runtime's first, else the other's) took in this run; kinds not timed yet are named
    instead.  ``lanes_at_once``: runtimes graded at once (``--cores``), which divide the runtimes' time left."""

    def __init__(self, num_steps: int, todo: Sequence[Step], log: Callable[[str], None], *, lanes_at_once: int = 1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.num_steps, self.num_started = num_steps, num_steps - len(todo)
        self.waiting = list(todo)
        self.started: dict[str, float] = {}
        self.timed: list[tuple[Step, float]] = []  # (step, seconds) of the steps this run finished
        self.lanes_at_once, self.log, self.clock = lanes_at_once, log, clock
        self.skipped: list[str] = []
        self.lock = threading.Lock()
        if self.num_started:
            log(f"{self.num_started} of {num_steps} steps graded before; {len(todo)} to go")

    def _rate(self, step: Step) -> float | None:
        """Seconds per unit of weight of ``step``'s kind, as timed in this run (None: not timed yet)."""
        for same in (lambda s: s.kind == step.kind, lambda s: s.kind[1] == step.kind[1]):
            timed = [(s, seconds) for s, seconds in self.timed if same(s)]
            if timed:
                return sum(seconds for _, seconds in timed) / max(sum(s.weight for s, _ in timed), 1e-9)
        return None

    def _left(self, coming: Sequence[Step]) -> str:
        runtimes = networks = 0.0
        untimed: list[str] = []
        for step in coming:
            rate = self._rate(step)
            if rate is None:
                label = "network alone" if step.kind[1] == "network" else f"{step.kind[1]} ({step.kind[0]})"
                untimed += [label] if label not in untimed else []
            elif step.kind[0]:
                runtimes += rate * step.weight
            else:
                networks += rate * step.weight
        if not self.timed:
            return ""
        timed = len(untimed) < len({s.kind for s in coming})
        notes = ([f"about {_minutes(runtimes / self.lanes_at_once + networks)} left"] if timed else []) + (
            [f"{', '.join(untimed)} not timed yet"] if untimed else [])
        return ", " + " and ".join(notes) if notes else ""

    def starting(self, step: Step) -> None:
        with self.lock:
            self.waiting.remove(step)
            self.started[step.name] = self.clock()
            self.num_started += 1
            self.log(f"[{self.num_started}/{self.num_steps}] {step.name}{self._left([step, *self.waiting])}")

    def finished(self, step: Step, skipped: str = "") -> None:
        with self.lock:
            if skipped:
                self.waiting.remove(step)
                self.num_started += 1
                self.skipped.append(skipped)
                self.log(skipped)
            else:
                self.timed.append((step, self.clock() - self.started.pop(step.name)))


def _run_lane(lane: Sequence[Step], out_dir: Path, core: int | None, progress: _Progress,
              children: _Children) -> None:
    for step in lane:
        if children.stopped:
            return
        missing = [m for m in step.needs if not extras.is_installed(m)]
        if missing:
            progress.finished(step, f"{step.name}: skipped, {' and '.join(missing)} not installed here")
            continue
        progress.starting(step)
        if _run_child(step, out_dir, core, children):
            progress.finished(step)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def _run_child(step: Step, out_dir: Path, core: int | None, children: _Children) -> bool:
    """Run the step's child and write its grade; False where the compare was stopped meanwhile (nothing written)."""
    def pin() -> None:
        if core is not None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {core})

    child = children.start([sys.executable, "-m", "connectx_az.cli", *step.args], stdout=subprocess.PIPE,
                           stderr=None if sys.stderr.isatty() else subprocess.PIPE, text=True,
                           preexec_fn=pin if core is not None else None)
    if child is None:
        return False
    stdout, stderr = children.wait(child)
    if children.stopped:
        return False
    lines = (stdout or "").strip().splitlines()
    # validate exits 1 when a game was lost: that is a grade, not a failure of the step
    if child.returncode not in (0, 1) or not lines or not lines[-1].startswith("{"):
        error = (stderr or "").strip().splitlines()
        raise CompareError(f"{step.name} failed (`connectx-az {' '.join(step.args)}` exited {child.returncode}): "
                           f"{error[-1] if error else lines[-1] if lines else 'no output'}")
    files.atomic_write_bytes(out_dir / step.file, (lines[-1] + "\n").encode())
    return True
