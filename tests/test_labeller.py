from pathlib import Path

import numpy as np
import pytest

from connectx_az.engine import game, solver
from connectx_az.testsets import pons
from connectx_az.tools import labeller
from connectx_az.training import labels as label_files


def _label(n: int, **kwargs) -> tuple[label_files.Labels, labeller.LabelStats]:
    return labeller.label(num_positions=n, min_plies=14, max_plies=16, prover=solver.Solver(), **kwargs)


def test_label_keeps_proven_random_positions_with_their_true_results() -> None:
    labels, stats = _label(12, seed=3)
    assert len(labels) == stats.kept == 12 and stats.tried == stats.kept + stats.unproven
    assert labels.position.dtype == np.uint64 and labels.result.dtype == np.int8
    check = solver.Solver()
    for position, mask, plies, result in zip(labels.position, labels.mask, labels.plies, labels.result, strict=True):
        position, mask = int(position), int(mask)
        assert 14 <= plies <= 16 and game.num_stones(mask) == plies
        assert game.outcome(position, mask) is None and not solver._can_win_next(position, mask)
        assert check.solve(position, mask, weak=True) == result
    assert labels.obs().shape == (12, 2, game.ROWS, game.COLS)
    assert sum(labels.counts()) == 12


def test_label_never_keeps_an_excluded_or_repeated_position() -> None:
    first, _ = _label(10, seed=5)
    again, stats = _label(10, seed=5, exclude=first.keys())
    assert not first.keys() & again.keys() and stats.skipped >= 10
    assert len(again.keys()) == len(again)


def test_benchmark_keys_hold_the_pons_positions_and_their_children() -> None:
    keys = pons.benchmark_keys()
    p = pons.load_set("Begin-Easy")[0]
    position, mask = pons.position_of(p)
    assert (position, mask) in keys
    assert all(game.play(position, mask, col) in keys for col in game.legal_cols(mask))
    moves, _ = pons.load_results("Begin-Hard")[-1]
    assert game.from_moves(moves) in keys


def test_labels_survive_a_round_trip_and_concat_keeps_each_position_once(tmp_path: Path) -> None:
    labels, _ = _label(6, seed=7)
    path = label_files.save(tmp_path / "labels.npz", labels)
    back = label_files.load(path)
    assert all(np.array_equal(getattr(back, f), getattr(labels, f)) for f in label_files.FIELDS)
    both = label_files.concat(labels, back, label_files.empty())
    assert len(both) == 6 and both.keys() == labels.keys()
    assert label_files.empty().obs().shape == (0, 2, game.ROWS, game.COLS)


def test_bad_labels_files_give_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(label_files.LabelsError, match="does not exist"):
        label_files.load(tmp_path / "none.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip file")
    with pytest.raises(label_files.LabelsError, match="not a labels file"):
        label_files.load(tmp_path / "junk.npz")
    np.savez(tmp_path / "bad.npz", position=np.zeros(2, np.uint64), mask=np.zeros(2, np.uint64),
             plies=np.zeros(2, np.int8), result=np.array([1, 5], np.int8))
    with pytest.raises(label_files.LabelsError, match="results must be"):
        label_files.load(tmp_path / "bad.npz")
    np.savez(tmp_path / "odd.npz", position=np.array([3], np.uint64), mask=np.array([1], np.uint64),
             plies=np.zeros(1, np.int8), result=np.zeros(1, np.int8))
    with pytest.raises(label_files.LabelsError, match="outside its mask"):
        label_files.load(tmp_path / "odd.npz")


def test_label_needs_a_stopping_rule_and_sane_plies() -> None:
    with pytest.raises(ValueError, match="num_positions or seconds"):
        labeller.label(prover=solver.Solver())
    with pytest.raises(ValueError, match="plies"):
        labeller.label(num_positions=1, min_plies=10, max_plies=5, prover=solver.Solver())


def test_label_with_moves_marks_exactly_the_moves_that_keep_the_result() -> None:
    labels, stats = _label(10, seed=3, moves=True)
    assert stats.with_moves == int(np.sum(labels.result >= 0)) > 0
    check = solver.Solver()
    for position, mask, result, best in zip(labels.position, labels.mask, labels.result, labels.best, strict=True):
        if result < 0:
            assert best == 0  # every move loses: no policy target
            continue
        scores = check.move_scores(int(position), int(mask), weak=True)
        assert best == sum(1 << col for col, score in enumerate(scores) if score == result) != 0
    policy = labels.policy()
    assert policy.shape == (10, game.COLS) and policy.dtype == np.float32
    assert np.array_equal(labels.has_moves(), labels.result >= 0)
    np.testing.assert_allclose(policy.sum(axis=1), labels.has_moves().astype(np.float32), atol=1e-6)
    assert np.all((policy > 0) == ((labels.best[:, None] >> np.arange(game.COLS)) & 1).astype(bool))


def test_add_moves_gives_an_older_file_its_best_moves(tmp_path: Path) -> None:
    with_moves, _ = _label(8, seed=11, moves=True)
    older = tmp_path / "older.npz"  # written before ``best`` existed
    np.savez(older, **{name: getattr(with_moves, name) for name in ("position", "mask", "plies", "result")})
    plain = label_files.load(older)
    assert not plain.best.any() and not plain.policy().any()
    none_yet, stats = labeller.add_moves(plain, seconds=0, prover=solver.Solver())
    assert stats.tried == 0 and not none_yet.best.any()
    filled, stats = labeller.add_moves(plain, prover=solver.Solver())
    assert np.array_equal(filled.best, with_moves.best) and stats.with_moves == int(np.sum(plain.result >= 0))
    again, stats = labeller.add_moves(filled, prover=solver.Solver())
    assert stats.tried == 0 and np.array_equal(again.best, filled.best)


def test_moves_not_proven_in_budget_are_marked_and_not_sought_again(tmp_path: Path) -> None:
    plain, _ = _label(8, seed=11)
    marked, stats = labeller.add_moves(plain, max_nodes=1, prover=solver.Solver())
    sought = plain.result >= 0
    assert stats.tried == stats.unproven == int(sought.sum()) > 0 and stats.with_moves == 0
    assert np.all(marked.best[sought] == label_files.UNPROVEN_MOVES) and np.all(marked.best[~sought] == 0)
    assert not marked.has_moves().any() and not marked.lacks_moves().any() and not marked.policy().any()
    label_files.save(tmp_path / "marked.npz", marked)
    again, stats = labeller.add_moves(label_files.load(tmp_path / "marked.npz"), prover=solver.Solver())
    assert stats.tried == 0 and np.array_equal(again.best, marked.best)
    # retried on request, with this call's (bigger) budget: the moves of a file labelled with them
    assert np.array_equal(marked.moves_to_seek(retry_unproven=True), sought)
    retried, stats = labeller.add_moves(marked, prover=solver.Solver(), retry_unproven=True)
    assert stats.tried == stats.with_moves == int(sought.sum()) and stats.unproven == 0
    assert np.array_equal(retried.best, _label(8, seed=11, moves=True)[0].best)
    assert not retried.moves_to_seek(retry_unproven=True).any()

    class NoMoves(solver.Solver):  # proves positions, never their moves
        def move_scores(self, *args, **kwargs) -> None:
            return None

    fresh, stats = labeller.label(num_positions=6, min_plies=14, max_plies=16, moves=True, seed=5, prover=NoMoves())
    won_or_drawn = fresh.result >= 0
    assert won_or_drawn.any() and stats.with_moves == 0 and not fresh.has_moves().any()
    assert np.all(fresh.best[won_or_drawn] == label_files.UNPROVEN_MOVES) and np.all(fresh.best[~won_or_drawn] == 0)


def test_best_moves_outside_the_board_are_refused(tmp_path: Path) -> None:
    labels, _ = _label(2, seed=13)
    np.savez(tmp_path / "wide.npz", **{name: getattr(labels, name) for name in label_files.FIELDS if name != "best"},
             best=np.array([1, label_files.UNPROVEN_MOVES | 1], np.uint8))
    with pytest.raises(label_files.LabelsError, match="bitmask of the 7 columns"):
        label_files.load(tmp_path / "wide.npz")


def test_workers_prove_in_their_own_processes_and_give_the_labels_of_one() -> None:
    import os

    def label(workers: int) -> tuple[label_files.Labels, labeller.LabelStats]:  # deep positions: quick proofs
        return labeller.label(num_positions=5, min_plies=22, max_plies=24, prover=solver.Solver(), moves=True,
                            seed=7, workers=workers)

    one, stats_one = label(1)
    two, stats_two = label(2)
    assert len(one) == 5 and one.has_moves().any()
    for name in label_files.FIELDS:
        assert np.array_equal(getattr(one, name), getattr(two, name)), name
    assert (stats_two.kept, stats_two.tried, stats_two.with_moves) == (stats_one.kept, stats_one.tried,
                                                                      stats_one.with_moves)
    plain = label_files.Labels(one.position, one.mask, one.plies, one.result, np.zeros(len(one), np.uint8))
    filled, stats = labeller.add_moves(plain, prover=solver.Solver(), workers=2)
    assert np.array_equal(filled.best, one.best) and stats.tried == int(np.sum(one.result >= 0))

    class Where(solver.Solver):  # answers with the id of the process that proved the position
        def solve(self, *args, **kwargs) -> int:
            return os.getpid()

    tasks = (((i,), (1, 1, None, False, 10)) for i in range(40))  # the proofs are drawn lazily
    answers = list(labeller.proofs(tasks, Where(), workers=2))
    assert [key for key, _ in answers] == [(i,) for i in range(40)]
    pids = {result for _, (result, _) in answers}
    assert len(pids) >= 1 and os.getpid() not in pids
    with pytest.raises(ValueError, match="workers must be >= 1"):
        list(labeller.proofs(iter(()), Where(), workers=0))


def _pid(prover: solver.Solver, n: int) -> tuple[int, int]:
    import os

    return n, os.getpid()


def _fail_at(prover: solver.Solver, n: int) -> int:
    if n == 5:
        raise ValueError(f"no proof of {n}")
    return n


def _die_at(prover: solver.Solver, n: int) -> int:
    import os

    if n == 5:
        os._exit(3)
    return n


def test_workers_end_when_closed_early_and_a_failure_is_raised_not_waited_for() -> None:
    import itertools
    import os

    endless = (((n,), (n,)) for n in itertools.count())
    answers = labeller.proofs(endless, solver.Solver(), workers=2, work=_pid)
    taken = [next(answers) for _ in range(7)]
    assert [key for key, _ in taken] == [(n,) for n in range(7)] and all(n == key[0] for key, (n, _) in taken)
    pids = {pid for _, (_, pid) in taken}
    assert os.getpid() not in pids
    answers.close()  # ends the processes at once, with tasks still in flight (Pool.terminate could hang here)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    tasks = [((n,), (n,)) for n in range(20)]
    with pytest.raises(ValueError, match="no proof of 5"):  # the worker's exception, in the parent
        list(labeller.proofs(tasks, solver.Solver(), workers=2, work=_fail_at))
    with pytest.raises(RuntimeError, match="exit code 3"):  # a dead process is reported, never waited for
        list(labeller.proofs(tasks, solver.Solver(), workers=2, work=_die_at))


def test_workers_end_with_their_parent_even_when_it_is_killed(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    if not Path("/proc/self/stat").exists():
        pytest.skip("reads /proc")
    script = tmp_path / "parent.py"
    script.write_text(
        "import itertools, os, time\n"
        "from connectx_az.engine import solver\n"
        "from connectx_az.tools import labeller\n"
        "def work(prover, n):\n"
        "    time.sleep(0.01)\n"
        "    return os.getpid()\n"
        "answers = labeller.proofs((((n,), (n,)) for n in itertools.count()), solver.Solver(), workers=2, "
        "work=work)\n"
        "print(*{next(answers)[1] for _ in range(20)}, flush=True)\n"
        "time.sleep(300)\n")
    root = Path(__file__).resolve().parents[1]
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(root)})
    try:
        pids = [int(pid) for pid in parent.stdout.readline().split()]
    finally:
        parent.send_signal(signal.SIGKILL)  # no finally, no atexit: only the pipes tell the workers
        parent.wait()

    def alive(pid: int) -> bool:  # a zombie (nobody reaped it yet) has ended
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False

    assert len(pids) >= 1 and os.getpid() not in pids
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    stranded = [pid for pid in pids if alive(pid)]
    for pid in stranded:
        os.kill(pid, signal.SIGKILL)
    assert not stranded, "a worker outlived its killed parent"
