"""Self-play across worker processes, with one batched inference server in this process.

With ``SelfPlayConfig.num_workers = W >= 1`` each worker runs ``selfplay.play_games`` on its share of the
games with an evaluator that forwards its leaves here; the server (``_serve``) answers several workers'
leaves with one call of the caller's evaluator.  ``W = 0`` is ``selfplay.play_games`` itself.  Workers are
started with "spawn" (forking a process holding torch and CUDA is unsafe) and import no torch; a calling
script needs the ``if __name__ == "__main__":`` guard.

Determinism: workers are served in two alternating groups (even and odd indices), so one group's tree work
overlaps the other's network call.  A batch is "the next request of every unfinished worker of the group,
in worker order", never "whatever has arrived", so no float depends on timing; with ``worker_seeds``, a
run on CPU is reproducible for a given ``W``.

Wire format, one pipe per worker, each message a one-byte tag then its payload::

    worker -> server  b"E" obs uint8[n,2,6,7]      evaluate these leaves (side to move)
                      b"G" pickled GameRecord       a game finished
                      b"D" int64                    done; the positions its searches asked for
                      b"X" traceback text           failed
    server -> worker  logits float32[n,7] then value float32[n], side to move

Pickle only crosses a pipe to this process's own children.  A worker's failure is raised here as
``WorkerError``; workers are daemonic, ignore Ctrl-C (blocked from their birth) and exit when their pipe closes,
the server checks that a silent worker is alive, and a stopped ``play_games`` terminates them all at once, so
neither side hangs or outlives the other, whatever the number of workers."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

import numpy as np

from connectx_az.engine import game, search_tree
from connectx_az.training import selfplay
from connectx_az.training.config import SelfPlayConfig
from connectx_az.training.selfplay import GameRecord, SelfPlayStats

_EVAL, _GAME, _DONE, _FAILED = b"E", b"G", b"D", b"X"
_OBS_SHAPE = (2, game.ROWS, game.COLS)
# How long the server waits on a silent worker before checking that it is alive.
_POLL_SECONDS = 1.0
# How long a finished or stopped worker gets to exit before it is terminated.
_JOIN_SECONDS = 5.0


class WorkerError(RuntimeError):
    """A self-play worker failed or died; the message carries its traceback when it had one."""


def play_games(evaluator: search_tree.Evaluator, num_games: int, config: SelfPlayConfig,
               search: search_tree.SearchConfig, rng: np.random.Generator, *,
               on_game_done: Callable[[GameRecord], None] | None = None,
               sources: Sequence[tuple[int, int]] = ()) -> tuple[list[GameRecord], SelfPlayStats]:
    """``selfplay.play_games``, in this process or across ``config.num_workers`` processes (each with all of
    ``sources``).

    Same arguments and results; ``evaluator`` runs here only, and records come back by worker, then in each
    worker's finishing order.  Raises ``WorkerError`` if a worker fails or dies."""
    num_workers = resolve_num_workers(config.num_workers)
    if num_workers == 0:
        return selfplay.play_games(evaluator, num_games, config, search, rng, on_game_done=on_game_done,
                                   sources=sources)
    shares = split_games(num_games, num_workers)
    seeds = worker_seeds(rng, len(shares))
    context = multiprocessing.get_context("spawn")
    processes: list[BaseProcess] = []
    connections: list[Connection] = []
    finished = False
    try:
        for index, (share, seed) in enumerate(zip(shares, seeds, strict=True)):
            ours, theirs = context.Pipe()
            connections.append(ours)
            process = context.Process(target=_worker_main, args=(theirs, share, config, search, seed, list(sources)),
                                      name=f"connectx-selfplay-{index}", daemon=True)
            _start(process, processes)
            # Only the worker holds its end now: if it dies, our reads see EOF at once.
            theirs.close()
        by_worker, num_evaluations, num_network_evaluations = _serve(evaluator, processes, connections,
                                                                     on_game_done=on_game_done)
        finished = True
    finally:
        _stop(processes, connections, wait=_JOIN_SECONDS if finished else 0.0)
    records = [record for worker_records in by_worker for record in worker_records]
    return records, selfplay.summarize(records, num_evaluations, num_network_evaluations)


def resolve_num_workers(num_workers: int, cpu_count: int | None = None) -> int:
    """``selfplay.num_workers`` as a process count: ``-1`` is one a CPU core, and 0 (this process) on one core."""
    if num_workers >= 0:
        return num_workers
    cores = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    return cores if cores > 1 else 0


def inference_threads(threads: int, num_workers: int) -> int:
    """Torch threads for the network during self-play with ``num_workers`` workers, of a run's ``threads``.

    The network gets the cores of the group of workers waiting on it; more would take cores from the other
    group's tree work (docs/results.md, "Self-play sized to the machine").  Without workers, every thread."""
    return max(1, threads - (num_workers + 1) // 2) if num_workers > 0 else threads


def split_games(num_games: int, num_workers: int) -> list[int]:
    """Games per worker: as even as possible, the first workers take one more; no idle workers."""
    num_workers = min(num_workers, num_games)
    return [num_games // num_workers + (i < num_games % num_workers) for i in range(num_workers)]


def worker_seeds(rng: np.random.Generator, num_workers: int) -> list[int]:
    """One seed per worker, drawn from the caller's generator (so the run's seed decides them)."""
    return [int(s) for s in rng.integers(0, 2**63, size=num_workers)]


def _serve(evaluator: search_tree.Evaluator, processes: list[BaseProcess], connections: list[Connection], *,
           on_game_done: Callable[[GameRecord], None] | None = None) -> tuple[list[list[GameRecord]], int, int]:
    """Answer the workers' requests until all are done, even and odd workers in turn; returns each worker's
    records, the positions their searches asked for and those evaluated here."""
    num_workers = len(processes)
    records: list[list[GameRecord]] = [[] for _ in range(num_workers)]
    asked = [0] * num_workers
    num_evaluations = 0
    groups = [range(first, num_workers, 2) for first in range(min(2, num_workers))]
    running = set(range(num_workers))
    while running:
        for group in groups:
            requests: list[tuple[int, np.ndarray]] = []
            for index in (i for i in group if i in running):
                obs = _next_request(index, processes[index], connections[index], records[index], on_game_done)
                if isinstance(obs, int):
                    asked[index] = obs
                    running.discard(index)
                else:
                    requests.append((index, obs))
            if not requests:
                continue
            batch = np.concatenate([obs for _, obs in requests])
            logits, value = evaluator.evaluate(batch)
            logits = np.asarray(logits, np.float32)
            value = np.asarray(value, np.float32)
            num_evaluations += len(batch)
            start = 0
            for index, obs in requests:
                stop = start + len(obs)
                try:
                    connections[index].send_bytes(logits[start:stop].tobytes() + value[start:stop].tobytes())
                except OSError:  # its pipe is closed: it died while the network ran
                    raise _died(index, processes[index]) from None
                start = stop
    return records, sum(asked), num_evaluations


def _next_request(index: int, process: BaseProcess, connection: Connection, records: list[GameRecord],
                  on_game_done: Callable[[GameRecord], None] | None) -> np.ndarray | int:
    """Worker ``index``'s next leaves ``uint8[n,2,6,7]``, or once done the positions its searches asked for;
    finished games arriving first go to ``records``."""
    while True:
        while not connection.poll(_POLL_SECONDS):
            if not process.is_alive():
                raise _died(index, process)
        try:
            message = connection.recv_bytes()
        except (EOFError, OSError):  # its end closed without a word (reset if our answer was unread): it died
            raise _died(index, process) from None
        tag, payload = message[:1], memoryview(message)[1:]
        if tag == _EVAL:
            return np.frombuffer(payload, np.uint8).reshape(-1, *_OBS_SHAPE)
        if tag == _GAME:
            record = pickle.loads(payload)
            records.append(record)
            if on_game_done is not None:
                on_game_done(record)
        elif tag == _DONE:
            return int(np.frombuffer(payload, np.int64)[0])
        elif tag == _FAILED:
            raise WorkerError(f"self-play worker {index} failed:\n{bytes(payload).decode(errors='replace')}")
        else:
            raise WorkerError(f"self-play worker {index} sent an unknown message {tag!r}")


def _died(index: int, process: BaseProcess) -> WorkerError:
    process.join(_JOIN_SECONDS)  # for its exit code
    return WorkerError(f"self-play worker {index} died (exit code {process.exitcode})")


def _start(process: BaseProcess, processes: list[BaseProcess]) -> None:
    """Start ``process`` and add it to ``processes`` with Ctrl-C and SIGTERM held off meanwhile, then act on one that
    came: stopped half way, a worker would wait for the rest of its start-up data and outlive this process.  The
    worker is born with SIGINT blocked (a spawned interpreter inherits the mask), so a Ctrl-C in its own start-up
    cannot end it with a traceback before it ignores the signal (``_worker_main``)."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread handles signals
        process.start()
        processes.append(process)
        return
    if hasattr(signal, "pthread_sigmask"):
        # The first spawn starts multiprocessing's resource tracker, which unblocks SIGINT after its own spawn: it
        # would leave that worker's start-up open to Ctrl-C.  Started here, it is already running below.
        resource_tracker.ensure_running()
    came: list[int] = []
    handlers = {signum: signal.signal(signum, lambda signum, frame: came.append(signum))
                for signum in (signal.SIGINT, signal.SIGTERM)}
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if hasattr(signal, "pthread_sigmask") \
        else None
    try:
        process.start()
        processes.append(process)
    finally:
        if blocked is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        for signum, handler in handlers.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
    for signum in came[:1]:  # the first, as its own handler would have taken it
        handler = handlers[signum]
        if callable(handler):
            handler(signum, None)
        elif handler != signal.SIG_IGN:
            os.kill(os.getpid(), signum)


def _stop(processes: list[BaseProcess], connections: list[Connection], *, wait: float) -> None:
    """Close the pipes (a worker still running then exits), give all the workers ``wait`` seconds in all (0 when
    stopped early: a worker may be deep in a search or still starting), then terminate and kill the rest, all at
    once: stopping takes seconds whatever the number of workers."""
    for connection in connections:
        connection.close()
    deadline = time.monotonic() + wait
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    for end in ("terminate", "kill"):
        alive = [p for p in processes if p.is_alive()]
        for process in alive:
            getattr(process, end)()
        deadline = time.monotonic() + _JOIN_SECONDS
        for process in alive:
            process.join(max(0.0, deadline - time.monotonic()))


class _RemoteEvaluator:
    """``search_tree.Evaluator`` inside a worker: each call is one round trip to the server."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``obs uint8[n,2,6,7]`` -> ``(logits float32[n,7], value float32[n])``, side to move."""
        obs = np.ascontiguousarray(obs, np.uint8)
        if obs.shape[1:] != _OBS_SHAPE:
            raise ValueError(f"expected obs uint8[n,2,6,7], got shape {obs.shape}")
        n = len(obs)
        self.connection.send_bytes(_EVAL + obs.tobytes())
        answer = np.frombuffer(self.connection.recv_bytes(), np.float32)
        if answer.size != n * (game.NUM_ACTIONS + 1):
            raise ValueError(f"the evaluator answered {answer.size} numbers for {n} positions; expected "
                             f"logits [{n},{game.NUM_ACTIONS}] and value [{n}]")
        # Own, writable arrays, like other evaluators return (frombuffer gives read-only views).
        return answer[: n * game.NUM_ACTIONS].reshape(n, game.NUM_ACTIONS).copy(), answer[n * game.NUM_ACTIONS :].copy()


def _worker_main(connection: Connection, num_games: int, config: SelfPlayConfig, search: search_tree.SearchConfig,
                 seed: int, sources: list[tuple[int, int]]) -> None:
    """A worker process: play ``num_games`` games, sending leaves and finished games to the server."""
    # Ctrl-C reaches the whole process group; the parent handles it and stops us (``_start`` blocked it till now).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        _, stats = selfplay.play_games(_RemoteEvaluator(connection), num_games, config, search,
                                       np.random.default_rng(seed), sources=sources,
                                       on_game_done=lambda record: connection.send_bytes(_GAME + pickle.dumps(record)))
        connection.send_bytes(_DONE + np.int64(stats.num_evaluations).tobytes())
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the parent closed our pipe (it stopped or died): nobody to report to
    except BaseException:
        try:
            connection.send_bytes(_FAILED + traceback.format_exc().encode())
        except OSError:
            pass
    finally:
        connection.close()
