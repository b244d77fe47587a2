"""Positions whose result the exact solver has proven: random openings labelled win, draw or loss.

Self-play teaches the value head one noisy game result per position, and only in the openings its own policy
reaches; the compiled weak solver (``solver_numba``) proves random openings cheaply, so they can teach the openings
opponents create, with exact targets.  ``label`` draws random prefixes (``selfplay.random_prefix``), proves each
within a node budget and keeps the proven ones; the Pons positions and their children are never kept
(``pons.benchmark_keys``), so the benchmark stays out of what is trained on.  With ``moves`` each kept position also
gets its best moves (``best_moves``), a policy target.  The labels go to a file of ``training.labels``'s format."""

from __future__ import annotations

import collections
import multiprocessing
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import numpy as np

from connectx_az.engine import game, solver
from connectx_az.testsets import pons
from connectx_az.training import selfplay
from connectx_az.training.labels import COLUMN_BITS, UNPROVEN_MOVES, Labels, concat, empty, from_rows, load, save


def random_positions(rng: np.random.Generator, min_plies: int, max_plies: int) -> Iterator[tuple[int, int, int]]:
    """Endless ``(position, mask, plies)``: a uniform number of plies, then ``selfplay.random_prefix``; positions where
    the side to move can win at once are skipped (their result needs no proof)."""
    if not 0 <= min_plies <= max_plies <= selfplay.MAX_PREFIX_PLIES:
        raise ValueError(f"plies must satisfy 0 <= min <= max <= {selfplay.MAX_PREFIX_PLIES}, "
                         f"not {min_plies}..{max_plies}")
    while True:
        plies = int(rng.integers(min_plies, max_plies + 1))
        position, mask = game.from_moves("".join(str(c + 1) for c in selfplay.random_prefix(rng, plies)))
        if not solver._can_win_next(position, mask):
            yield position, mask, plies


@dataclass
class LabelStats:
    """What ``label`` (or ``add_moves``) did: positions proven and kept, tried, skipped as benchmark positions or
    repeats."""

    kept: int = 0
    with_moves: int = 0  # positions given their best moves (a policy target)
    tried: int = 0
    unproven: int = 0
    skipped: int = 0
    seconds: float = 0.0
    interrupted: bool = False


def best_moves(prover: solver.Solver, position: int, mask: int, result: int, max_nodes: int) -> int | None:
    """The ``best`` bitmask of a position proven ``result`` (0 if it is lost), ``None`` if not proven in budget.

    Each child is weak-solved (``Solver.move_scores``) from ``prover``'s table as it stands: right after the
    position's own proof, much of the work is already there.  ``best`` marks the columns that keep ``result``."""
    if result < 0:
        return 0
    scores = prover.move_scores(position, mask, weak=True, max_nodes=max_nodes)
    if scores is None:
        return None
    best = sum(1 << col for col, score in enumerate(scores) if score == result)
    if not best:
        raise AssertionError(f"no move keeps the proven result {result}")  # unreachable for a sound solver
    return best


def add_moves(labels: Labels, *, max_nodes: int = 3_000_000, seconds: float | None = None,
              prover: solver.Solver | None = None, workers: int = 1, retry_unproven: bool = False,
              on_done: Callable[[Labels, LabelStats], None] | None = None,
              every: int = 100) -> tuple[Labels, LabelStats]:
    """``labels`` with the best moves proven (``best_moves``) where they lack them.

    Lost positions need none; a position whose moves are not proven within ``max_nodes`` gets ``best``
    ``UNPROVEN_MOVES`` (``stats.unproven``) and is not tried again unless ``retry_unproven``.  Stops after ``seconds``,
    or at a ``KeyboardInterrupt`` with what is proven so far (``stats.interrupted``).  ``workers`` > 1 proves that
    many positions at once (``proofs``).  ``on_done(labels_so_far, stats)`` after every ``every`` positions tried."""
    prover = prover if prover is not None else _default_prover()
    best = labels.best.copy()
    stats = LabelStats()
    start = time.perf_counter()

    def current() -> Labels:
        return Labels(labels.position, labels.mask, labels.plies, labels.result, best.copy())

    def tasks() -> Iterator[tuple[int, Task]]:
        for i in np.flatnonzero(labels.moves_to_seek(retry_unproven)):
            if seconds is not None and time.perf_counter() - start >= seconds:
                return
            yield int(i), (int(labels.position[i]), int(labels.mask[i]), int(labels.result[i]), True, max_nodes)

    try:
        for i, (_, moves) in proofs(tasks(), prover, workers=workers):
            stats.tried += 1
            best[i] = moves
            stats.with_moves += moves != UNPROVEN_MOVES
            stats.unproven += moves == UNPROVEN_MOVES
            if on_done is not None and stats.tried % every == 0:
                on_done(current(), stats)
            if seconds is not None and time.perf_counter() - start >= seconds:
                break
    except KeyboardInterrupt:
        stats.interrupted = True
    stats.seconds = time.perf_counter() - start
    return current(), stats


#: ``prove``'s arguments after the prover: position, mask, result (``None``: prove it), moves, max_nodes
Task = tuple[int, int, "int | None", bool, int]
#: ``prove``'s answer: the result (``None``: not proven) and ``best``
Proof = tuple["int | None", int]


def prove(prover: solver.Solver, position: int, mask: int, result: int | None, moves: bool,
          max_nodes: int) -> Proof:
    """``(result, best)`` of one position, from a cleared table: its result (weak-solved within ``max_nodes`` unless
    ``result`` is given; ``None`` if not proven, and then ``best`` 0) and with ``moves`` its best moves
    (``best_moves``; ``UNPROVEN_MOVES`` if not proven within another ``max_nodes``)."""
    prover.clear()
    if result is None:
        result = prover.solve(position, mask, weak=True, max_nodes=max_nodes)
        if result is None:
            return None, 0
    if not moves:
        return result, 0
    best = best_moves(prover, position, mask, result, max_nodes)
    return result, UNPROVEN_MOVES if best is None else best


#: seconds a proving process has to end after SIGTERM before it is killed
_END_SECONDS = 2.0


def _serve(conn: Connection, prover: solver.Solver, work: Callable[..., Any], parent_ends: list[Connection]) -> None:
    """A proving process: answer each ``args`` its parent sends with ``(True, work(prover, *args))``, or
    ``(False, the exception)``, until the parent ends it or goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the parent, which ends its processes
    for end in parent_ends:  # closed here, so that the parent's death ends ``recv`` (EOF)
        end.close()
    while True:
        try:
            args = conn.recv()
        except EOFError:
            return
        try:
            answer = (True, work(prover, *args))
        except Exception as exc:  # the parent raises it
            answer = (False, exc)
        try:
            conn.send(answer)
        except OSError:  # the parent is gone
            return


def proofs(tasks: Iterable[tuple[object, tuple]], prover: solver.Solver, *, workers: int = 1,
           work: Callable[..., Any] = prove) -> Iterator[tuple[object, Any]]:
    """``(key, work(prover, *args))`` for each ``(key, args)`` of ``tasks``, in their order.

    ``work`` is ``prove`` (``args`` a ``Task``, answering a ``Proof``) unless another function is given
    (``book_build``'s; the processes inherit it, it is not pickled).  ``workers`` > 1: that many forked processes,
    each with its own copy of ``prover``, prove up to twice as many tasks ahead of the one yielded; ``tasks`` is drawn
    from only as needed, so it may be endless, and closing the generator ends the processes.  The results are those
    of one process.  A process that dies raises ``RuntimeError`` here rather than leave its task unanswered.

    Each process has a pipe of its own and no lock is shared, so ending them at any moment cannot deadlock (as
    ``multiprocessing.Pool.terminate`` can, waiting for the task queue's lock that a worker holds), and a killed
    parent leaves none of them waiting."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, not {workers}")
    if workers == 1:
        for key, args in tasks:
            yield key, work(prover, *args)
        return
    context = multiprocessing.get_context("fork")
    source = iter(tasks)
    conns: list[Connection] = []
    processes = []
    in_flight: dict[Connection, collections.deque] = {}  # each process's task numbers, in the order sent
    keys: dict[int, object] = {}
    answers: dict[int, Any] = {}
    sent = yielded = 0

    def ended(conn: Connection) -> RuntimeError:
        process = processes[conns.index(conn)]
        process.join(1)
        return RuntimeError(f"a proving process ended (exit code {process.exitcode}) with tasks unanswered")

    try:
        for _ in range(workers):
            conn, child_end = context.Pipe()
            process = context.Process(target=_serve, args=(child_end, prover, work, [*conns, conn]), daemon=True)
            process.start()
            child_end.close()
            conns.append(conn)
            processes.append(process)
            in_flight[conn] = collections.deque()
        while True:
            for conn in conns:  # keep each process two tasks deep, at most twice the processes ahead
                while len(in_flight[conn]) < 2 and sent - yielded < 2 * workers and \
                        (task := next(source, None)) is not None:
                    keys[sent] = task[0]
                    try:
                        conn.send(task[1])
                    except OSError:  # BrokenPipeError, ConnectionResetError: the process is gone
                        raise ended(conn) from None
                    in_flight[conn].append(sent)
                    sent += 1
            if yielded == sent:
                return
            while yielded not in answers:
                for conn in wait([c for c in conns if in_flight[c]]):
                    try:
                        ok, answer = conn.recv()
                    except (EOFError, OSError):  # the process is gone (a reset where it left data unread)
                        raise ended(conn) from None
                    if not ok:
                        raise answer
                    answers[in_flight[conn].popleft()] = answer
            yield keys.pop(yielded), answers.pop(yielded)
            yielded += 1
    finally:
        for process in processes:
            process.terminate()
        for process in processes:  # SIGTERM can be lost in a child forked a moment ago: then SIGKILL
            process.join(_END_SECONDS)
            if process.is_alive():
                process.kill()
                process.join()
        for conn in conns:
            conn.close()


def open_file(path: str | Path) -> Labels:
    """The labels a run of ``connectx-az label`` adds to: the file's, or none where it does not exist yet;
    ``LabelsError`` where a file is there and is not a labels file."""
    path = Path(path)
    return load(path) if path.exists() else empty()


def add_moves_to_file(path: str | Path, labels: Labels, *, max_nodes: int, seconds: float | None,
                      prover: solver.Solver, workers: int = 1, retry_unproven: bool = False,
                      on_progress: Callable[[LabelStats], None] | None = None) -> tuple[Labels, LabelStats]:
    """``add_moves`` over ``labels`` (the file's), the file at ``path`` rewritten with what is proven every 100
    positions tried (``on_progress(stats)`` after each such save) and at the end where any was tried."""
    def done(so_far: Labels, stats: LabelStats) -> None:
        save(path, so_far)
        if on_progress is not None:
            on_progress(stats)

    labels, stats = add_moves(labels, max_nodes=max_nodes, seconds=seconds, prover=prover, workers=workers,
                              retry_unproven=retry_unproven, on_done=done)
    if stats.tried:
        save(path, labels)
    return labels, stats


def label_into_file(path: str | Path, before: Labels, *, num_positions: int | None, seconds: float | None,
                    min_plies: int, max_plies: int, max_nodes: int, seed: int, moves: bool, prover: solver.Solver,
                    workers: int = 1,
                    on_progress: Callable[[LabelStats], None] | None = None) -> tuple[Labels, LabelStats]:
    """``(before + new labels, stats)``: ``label`` new positions into the file at ``path``, which holds ``before``.

    The Pons positions and those of ``before`` are excluded, and ``seed`` is offset by ``len(before)``, so a file
    added to draws afresh.  The file is rewritten with what is kept so far every 100 kept positions
    (``on_progress(stats)`` after each such save) and at the end.  ``ValueError`` as ``label``."""
    exclude = pons.benchmark_keys() | before.keys()

    def kept(labels: Labels, stats: LabelStats) -> None:
        save(path, concat(before, labels))
        if on_progress is not None:
            on_progress(stats)

    labels, stats = label(num_positions=num_positions, seconds=seconds, min_plies=min_plies, max_plies=max_plies,
                          max_nodes=max_nodes, seed=seed + len(before), moves=moves, exclude=exclude, prover=prover,
                          workers=workers, on_kept=kept)
    whole = concat(before, labels)
    save(path, whole)
    return whole, stats


def _default_prover() -> solver.Solver:
    from connectx_az.engine import solver_numba

    return solver_numba.make_solver()


def label(*, num_positions: int | None = None, seconds: float | None = None, min_plies: int = 4,
          max_plies: int = 16, max_nodes: int = 3_000_000, seed: int = 0, moves: bool = False,
          exclude: set[tuple[int, int]] | None = None, prover: solver.Solver | None = None, workers: int = 1,
          on_kept: Callable[[Labels, LabelStats], None] | None = None, every: int = 100) -> tuple[Labels, LabelStats]:
    """Prove random positions until ``num_positions`` are kept or ``seconds`` have passed.

    Each position is weak-solved within ``max_nodes``; an unproven one is dropped (the labels lean to positions the
    solver proves in that budget).  Positions in ``exclude`` (e.g. ``pons.benchmark_keys()`` and the keys of labels
    already on file) and repeats are skipped.  With ``moves`` each kept position's best moves are proven too
    (``prove``; ``stats.with_moves`` counts those proven).  ``prover``: default ``solver_numba.make_solver``.
    ``workers`` > 1 proves that many positions at once (``proofs``); with ``num_positions`` the labels are those of
    one process.  ``on_kept(labels_so_far, stats)`` after every ``every`` kept positions.  At least one of
    ``num_positions`` and ``seconds`` must be given.  A ``KeyboardInterrupt`` ends the loop with what is proven so
    far (``stats.interrupted``)."""
    if num_positions is None and seconds is None:
        raise ValueError("give num_positions or seconds (or both)")
    prover = prover if prover is not None else _default_prover()
    seen = set(exclude or ())
    rng = np.random.default_rng(seed)
    rows: list[tuple[int, int, int, int, int]] = []
    stats = LabelStats()
    start = time.perf_counter()

    def done() -> bool:
        stats.seconds = time.perf_counter() - start
        return (num_positions is not None and stats.kept >= num_positions) or \
            (seconds is not None and stats.seconds >= seconds)

    def tasks() -> Iterator[tuple[tuple[int, int, int], Task]]:
        for position, mask, plies in random_positions(rng, min_plies, max_plies):
            if done():
                return
            if (position, mask) in seen:
                stats.skipped += 1
                continue
            seen.add((position, mask))
            yield (position, mask, plies), (position, mask, None, moves, max_nodes)

    try:
        for (position, mask, plies), (result, best) in proofs(tasks(), prover, workers=workers):
            stats.tried += 1
            if result is None:
                stats.unproven += 1
            else:
                stats.with_moves += bool(best & COLUMN_BITS)
                rows.append((position, mask, plies, result, best))
                stats.kept += 1
                if on_kept is not None and stats.kept % every == 0:
                    on_kept(from_rows(rows), stats)
            if done():
                break
    except KeyboardInterrupt:
        stats.interrupted = True
    stats.seconds = time.perf_counter() - start
    return from_rows(rows), stats
