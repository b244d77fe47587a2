"""The compiled search step and memory (``mcts_numba``) against their numpy twins (``mcts``, the dict in
``selfplay.CachedEvaluator``): the same trees, node for node and visit for visit, the same positions sent to the
evaluator in the same order, the same answers, the same self-play games."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from connectx_az.engine import game, mcts, mcts_numba, search_tree
from connectx_az.tools.bench_selfplay import FreeEvaluator
from connectx_az.training import config, selfplay

KERNELS = mcts_numba.compile_kernels()
pytestmark = pytest.mark.skipif(KERNELS is None, reason=f"numba does not compile: {mcts_numba.kernel_error()}")

FIELDS = ("position", "mask", "net_value", "is_expanded", "proven", "node_visits", "node_value_sum", "children",
          "legal_mask", "prior", "visits", "value_sum", "edge_proven", "score_bias", "root", "num_nodes")


class Recording:
    """An evaluator that keeps every batch it is asked for."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, []

    def evaluate(self, obs):
        self.calls.append(obs.copy())
        return self.inner.evaluate(obs)


def _starts(rng: np.random.Generator, count: int, max_plies: int) -> tuple[np.ndarray, np.ndarray]:
    starts = [game.from_moves(selfplay.random_prefix(rng, int(rng.integers(0, max_plies + 1))), one_based=False)
              for _ in range(count)]
    return np.array([p for p, _ in starts], np.uint64), np.array([m for _, m in starts], np.uint64)


def _searched(kernels, position, mask, search, seed: int) -> tuple[search_tree.Tree, Recording]:
    tree = search_tree.Tree(position, mask, capacity=4)  # small: the step grows it
    evaluator = Recording(FreeEvaluator(seed=seed, scale=2.0))
    mcts.search(tree, evaluator, search, rng=np.random.default_rng(seed), kernels=kernels)
    return tree, evaluator


@pytest.mark.parametrize(("num_trees", "num_parallel", "virtual_loss"),
                         [(1, 1, 1.0), (1, 8, 1.0), (9, 1, 1.0), (6, 2, 1.0), (5, 4, 0.5), (11, 8, 3.0)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_compiled_step_grows_the_same_trees_as_numpy(num_trees: int, num_parallel: int, virtual_loss: float,
                                                          seed: int) -> None:
    """Prefixes of up to 30 plies reach proven lines, so the proofs are compared too."""
    rng = np.random.default_rng(100 + seed)
    position, mask = _starts(rng, num_trees, 30)
    search = search_tree.SearchConfig(num_simulations=int(rng.integers(40, 240)), num_parallel=num_parallel,
                                      virtual_loss=virtual_loss)
    (want, want_calls), (got, got_calls) = (_searched(k, position, mask, search, seed) for k in (None, KERNELS))
    assert len(got_calls.calls) == len(want_calls.calls)
    for a, b in zip(want_calls.calls, got_calls.calls, strict=True):
        np.testing.assert_array_equal(a, b)
    used = int(want.num_nodes.max())
    for name in FIELDS:
        a, b = getattr(want, name), getattr(got, name)
        if a.ndim > 1:
            a, b = a[:, :used], b[:, :used]
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert not np.isnan(want.proven[:, :used]).all()  # some proofs were made and compared


def test_the_compiled_step_keeps_searching_an_advanced_tree_as_numpy_does() -> None:
    """After ``Tree.advance`` the root is no longer node 0 (the agent reuses its tree)."""
    search = search_tree.SearchConfig(num_simulations=64, num_parallel=4)
    trees = []
    for kernels in (None, KERNELS):
        tree = search_tree.Tree(*game.from_moves("4453"), capacity=8)
        evaluator = FreeEvaluator(seed=3)
        mcts.search(tree, evaluator, search, kernels=kernels)
        assert tree.advance(0, [int(mcts.best_cols(tree)[0])])
        mcts.search(tree, evaluator, search, kernels=kernels)
        trees.append(tree)
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(trees[0], name), getattr(trees[1], name), err_msg=name)


@pytest.mark.parametrize("max_positions", [1 << 20, 150])
def test_the_hash_table_answers_as_the_dict_does(max_positions: int) -> None:
    """Same answers, the same positions sent on in the same order, through the table's growth (from 4,096 slots,
    kept at most half full) and (150) clears."""
    rng = np.random.default_rng(7)
    position, mask = _starts(rng, 3000, 16)
    pool = game.encode(position, mask)
    memories = [selfplay.CachedEvaluator(Recording(FreeEvaluator()), max_positions, kernels)
                for kernels in (None, KERNELS)]
    for _ in range(40):
        obs = pool[rng.integers(0, len(pool), int(rng.integers(1, 400)))]
        (want_logits, want_value), (got_logits, got_value) = (m.evaluate(obs) for m in memories)
        np.testing.assert_array_equal(got_logits, want_logits)
        np.testing.assert_array_equal(got_value, want_value)
        assert memories[0].num_positions == memories[1].num_positions <= max(max_positions, len(obs))
    assert max_positions < 4096 or len(memories[1]._keys) > 4096  # the table grew
    want, got = (m.inner.calls for m in memories)
    assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(want, got, strict=True))
    assert memories[1].num_network_evaluations == memories[0].num_network_evaluations < memories[1].num_evaluations


def test_a_failed_network_call_leaves_the_table_empty() -> None:
    class Failing:
        def evaluate(self, obs):
            raise RuntimeError("out of memory")

    memory = selfplay.CachedEvaluator(Failing(), kernels=KERNELS)
    obs = game.encode(*game.from_moves("4"))[None]
    with pytest.raises(RuntimeError):
        memory.evaluate(obs)
    assert memory.num_positions == 0
    memory.inner = FreeEvaluator()
    np.testing.assert_array_equal(memory.evaluate(obs)[0], FreeEvaluator().evaluate(obs)[0])


def test_self_play_plays_the_same_games_compiled_or_not(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = config.make_config("smoke", overrides=["selfplay.num_games=12", "selfplay.num_parallel_games=5",
                                                  "mcts.num_simulations=24"])
    runs = []
    for kernels in (None, KERNELS):
        monkeypatch.setattr(mcts_numba, "compile_kernels", lambda cache=False, kernels=kernels: kernels)
        records, stats = selfplay.play_games(FreeEvaluator(), 12, cfg.selfplay, cfg.mcts, np.random.default_rng(5))
        runs.append((records, stats))
    (want, want_stats), (got, got_stats) = runs
    assert got_stats == want_stats
    for a, b in zip(want, got, strict=True):
        for name in ("obs", "policy", "value", "root_value"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        assert (a.start_ply, a.opening, a.num_leaves) == (b.start_ply, b.opening, b.num_leaves)


def test_without_numba_there_are_no_kernels_and_the_reason_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcts_numba, "_KERNELS", None)
    monkeypatch.setattr(mcts_numba, "_ERROR", None)
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba raises ImportError
    assert mcts_numba.compile_kernels() is None
    assert "numba" in mcts_numba.kernel_error()
    assert mcts_numba.compile_kernels() is None  # asked again: the answer is kept, nothing retried


def test_a_cache_numba_cannot_write_falls_back_to_compiling_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    import numba

    def njit(*, cache: bool, nogil: bool):
        if cache:
            raise RuntimeError("cannot cache function: no locator available")
        return lambda f: f  # the kernels run as Python: enough to see which way was taken

    monkeypatch.setattr(mcts_numba, "_KERNELS", None)
    monkeypatch.setattr(mcts_numba, "_ERROR", None)
    monkeypatch.setattr(numba, "njit", njit)
    kernels = mcts_numba.compile_kernels(cache=True)
    assert kernels is not None and mcts_numba.kernel_error() is None
