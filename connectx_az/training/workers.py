"""Self-play across worker processes, with one batched inference server in this process.

With ``SelfPlayConfig.num_workers = W >= 1`` the tree work (selection, expansion,
backup: ``mcts_numba``'s kernels, or numpy's bookkeeping) runs in ``W`` worker
processes, each playing its share of the generation's games with
``selfplay.play_games`` (``num_parallel_games`` in flight) and an evaluator that
forwards its leaves here.  The server (``_serve``) puts the leaves of several
workers into one call of the caller's evaluator, so the network sees batches
about ``W / 2`` times larger than one process makes, and sends each worker its
slice of the answer.  ``W = 0`` is ``selfplay.play_games`` itself.

Worker processes are started with "spawn" (forking a process that holds torch
and CUDA is unsafe) and import only numpy, ``game``, ``mcts`` and ``selfplay``:
no torch, so they start in a fraction of a second and use little memory.  As
with any spawn user, a script that calls this needs the
``if __name__ == "__main__":`` guard: each worker imports the script's module
and runs its top-level imports (the ``connectx-az`` command, notebooks and pytest
are fine).

Determinism.  Workers are served in two alternating groups (even and odd
indices): while one group's leaves are on the network, the other group does
its tree work.  Each batch is exactly "the next request of every unfinished
worker of the group, in worker order", never "whatever has arrived", so batch
composition, and with it every float the network returns, does not depend on
timing.  Worker ``i`` draws its moves from its own generator seeded by
``worker_seeds``; on CPU a run is reproducible from its seed for a given ``W``
(the games differ from one ``W`` to another, and from ``W = 0``).

Wire format, one ``Connection`` (pipe) per worker, each message one byte tag
then its payload::

    worker -> server  b"E" obs uint8[n,2,6,7]      evaluate these leaves (side to move)
                      b"G" pickled GameRecord       a game finished (progress, results)
                      b"D" int64                    done; the positions its searches asked for (more
                                                    than it sent: ``selfplay.CachedEvaluator``)
                      b"X" traceback text           failed
    server -> worker  logits float32[n,7] then value float32[n], side to move

Pickle only crosses a pipe between this process and its own children; nothing
is stored with it.

Shutdown.  A worker's exception is raised here as ``WorkerError`` with the
worker's traceback.  Workers are daemonic, ignore Ctrl-C (the parent handles it
and stops them) and exit when their pipe closes, so a parent killed even with
SIGKILL leaves no workers behind.  The parent polls with a timeout and checks
that each worker it waits for is alive, so a worker that dies cannot hang it.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

import numpy as np

from connectx_az.engine import game, search_tree
from connectx_az.training import selfplay
from connectx_az.training.selfplay import GameRecord, SelfPlayConfig, SelfPlayStats

_EVAL, _GAME, _DONE, _FAILED = b"E", b"G", b"D", b"X"
_OBS_SHAPE = (2, game.ROWS, game.COLS)
# How long the server waits on a silent worker before checking that it is alive.
_POLL_SECONDS = 1.0
# How long a finished or stopped worker gets to exit before it is terminated.
_JOIN_SECONDS = 5.0


class WorkerError(RuntimeError):
    """A self-play worker failed or died; the message carries its traceback when it had one."""


def play_games(
    evaluator: search_tree.Evaluator,
    num_games: int,
    config: SelfPlayConfig,
    search: search_tree.SearchConfig,
    rng: np.random.Generator,
    *,
    on_game_done: Callable[[GameRecord], None] | None = None,
) -> tuple[list[GameRecord], SelfPlayStats]:
    """``selfplay.play_games``, in this process or across ``config.num_workers`` processes.

    Same arguments and results.  With workers, ``evaluator`` runs here only;
    records come back by worker, then in each worker's finishing order, and
    ``on_game_done`` is called here as games finish.  Raises ``WorkerError`` if a
    worker fails or dies.
    """
    num_workers = resolve_num_workers(config.num_workers)
    if num_workers == 0:
        return selfplay.play_games(evaluator, num_games, config, search, rng, on_game_done=on_game_done)
    shares = split_games(num_games, num_workers)
    seeds = worker_seeds(rng, len(shares))
    context = multiprocessing.get_context("spawn")
    processes: list[BaseProcess] = []
    connections: list[Connection] = []
    try:
        for index, (share, seed) in enumerate(zip(shares, seeds, strict=True)):
            ours, theirs = context.Pipe()
            connections.append(ours)
            process = context.Process(target=_worker_main, args=(theirs, share, config, search, seed),
                                      name=f"connectx-selfplay-{index}", daemon=True)
            process.start()
            processes.append(process)
            # Only the worker holds its end now: if it dies, our reads see EOF at once.
            theirs.close()
        by_worker, num_evaluations, num_network_evaluations = _serve(evaluator, processes, connections,
                                                                     on_game_done=on_game_done)
    finally:
        _stop(processes, connections)
    records = [record for worker_records in by_worker for record in worker_records]
    return records, selfplay.summarize(records, num_evaluations, num_network_evaluations)


def resolve_num_workers(num_workers: int, cpu_count: int | None = None) -> int:
    """``selfplay.num_workers`` as a process count: ``-1`` means one worker per CPU core.

    On one core (or when the count is unknown) that is 0: games are played in
    this process, since a worker would only take turns with the server.
    """
    if num_workers >= 0:
        return num_workers
    cores = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    return cores if cores > 1 else 0


def inference_threads(threads: int, num_workers: int) -> int:
    """Torch threads for the network during self-play with ``num_workers`` worker processes, of a run's ``threads``.

    The server alternates two groups of workers (see the module docstring): while one group's leaves are on the
    network its cores are idle, and the other group's cores do tree work, so the network gets the first
    group's share of the cores.  More would take cores from the tree work (on 2 cores, 2 threads self-played at
    0.81 times the rate of 1: docs/results.md, "Self-play sized to the machine").  In this process
    (``num_workers`` 0) the network has every thread.
    """
    return max(1, threads - (num_workers + 1) // 2) if num_workers > 0 else threads


def split_games(num_games: int, num_workers: int) -> list[int]:
    """Games per worker: as even as possible, the first workers take one more; no idle workers."""
    num_workers = min(num_workers, num_games)
    return [num_games // num_workers + (i < num_games % num_workers) for i in range(num_workers)]


def worker_seeds(rng: np.random.Generator, num_workers: int) -> list[int]:
    """One seed per worker, drawn from the caller's generator (so the run's seed decides them)."""
    return [int(s) for s in rng.integers(0, 2**63, size=num_workers)]


def _serve(
    evaluator: search_tree.Evaluator,
    processes: list[BaseProcess],
    connections: list[Connection],
    *,
    on_game_done: Callable[[GameRecord], None] | None = None,
) -> tuple[list[list[GameRecord]], int, int]:
    """Answer the workers' network requests until all are done.

    Returns each worker's records in its finishing order, the number of
    positions the workers' searches asked for and the number evaluated here.
    Even and odd workers take turns (see the module docstring): one batch per
    turn of every unfinished worker of the group.
    """
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
    """Worker ``index``'s next leaves ``uint8[n,2,6,7]``, or once it is done the positions its searches asked for.

    Finished games that arrive first are appended to ``records`` (and reported).
    """
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


def _stop(processes: list[BaseProcess], connections: list[Connection]) -> None:
    """Close the pipes (a worker still running then exits), wait briefly, terminate stragglers."""
    for connection in connections:
        connection.close()
    for process in processes:
        process.join(_JOIN_SECONDS)
        if process.is_alive():
            process.terminate()
            process.join(_JOIN_SECONDS)
        if process.is_alive():
            process.kill()
            process.join()


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
                 seed: int) -> None:
    """A worker process: play ``num_games`` games, sending leaves and finished games to the server."""
    # Ctrl-C reaches the whole process group; the parent handles it and stops us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        _, stats = selfplay.play_games(
            _RemoteEvaluator(connection), num_games, config, search, np.random.default_rng(seed),
            on_game_done=lambda record: connection.send_bytes(_GAME + pickle.dumps(record)),
        )
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
