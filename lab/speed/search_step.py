"""The search's own speed, without a network: the compiled walk step, and the search run as Python.

    taskset -c 1 python lab/speed/search_step.py [--rounds 5]

1. The walk step compiled (the step self-play repeats most): 64 trees searched 200 simulations each from the
   empty board with ``FreeEvaluator`` (uniform priors, level values), then one walk per tree timed on that
   frozen state (a walk adds nothing, so each call repeats the last), best of ``--rounds`` x 2,000 calls.
2. The search as Python (the numpy-only agent's): one tree, 800 simulations from the empty board, the same
   evaluator, best of ``--rounds``; simulations a second.

Run at another commit with that commit's worktree first on the path (``PYTHONPATH=/tmp/tree-45a8a96``): where
the package still has the numba kernels (``engine/mcts_numba.py``, before issue 69) they are timed in place
of the one search (and the Python figure is then their batched numpy twin's).  Figures: docs/results.md,
*Speed* (issue 69)."""
from __future__ import annotations

import argparse
import time

import numpy as np

from connectx_az.engine import mcts, search_tree
from connectx_az.tools.bench_selfplay import FreeEvaluator

TREES, DEPTH, CELLS = 64, 43, 84


def _walk_step_kernels(tree: search_tree.Tree):
    """One walk per tree through the numba kernels of 45a8a96 (``mcts_numba``), its leaves encoded."""
    from connectx_az.engine import mcts_numba  # only before issue 69

    kernels = mcts_numba.compile_kernels()
    mcts.search(tree, FreeEvaluator(), search_tree.SearchConfig(num_simulations=200),
                rng=np.random.default_rng(0), kernels=kernels)

    def step() -> None:
        path_node, path_action = np.zeros((TREES, DEPTH), np.int64), np.zeros((TREES, DEPTH), np.int64)
        depth, leaf = np.zeros(TREES, np.int64), np.zeros(TREES, np.int64)
        open_b, open_node = np.zeros(TREES, np.int64), np.zeros(TREES, np.int64)
        count = kernels._walk(tree.visits, tree.value_sum, tree.prior, tree.score_bias, tree.children,
                              tree.is_expanded, tree.proven, tree.node_visits, tree.node_value_sum, tree.net_value,
                              tree.position, tree.mask, tree.legal_mask, tree.root, tree.num_nodes, 2.0, 0.2, 0.0,
                              1, path_node, path_action, depth, leaf, open_b, open_node)
        kernels._encode(tree.position, tree.mask, open_b, open_node, count, np.empty((count, CELLS), np.uint8))
    return step


def _walk_step(tree: search_tree.Tree):
    """One walk per tree through the one search compiled (``mcts._walk_trees``, its leaves encoded in it)."""
    if not mcts.compile_search():
        raise SystemExit(f"the search did not compile: {mcts.compile_error()}")
    mcts.search(tree, FreeEvaluator(), search_tree.SearchConfig(num_simulations=200), rng=np.random.default_rng(0))
    steps = mcts._steps()

    def step() -> None:
        path_node, path_action = np.zeros((TREES, 1, DEPTH), np.int64), np.zeros((TREES, 1, DEPTH), np.int64)
        depth, leaf = np.zeros((TREES, 1), np.int64), np.zeros((TREES, 1), np.int64)
        open_b, open_node = np.zeros(TREES, np.int64), np.zeros(TREES, np.int64)
        steps._walk_trees(tree.visits, tree.value_sum, tree.prior, tree.score_bias, tree.children,
                          tree.is_expanded, tree.proven, tree.node_visits, tree.node_value_sum, tree.net_value,
                          tree.position, tree.mask, tree.legal_mask, tree.root, tree.num_nodes, 2.0, 0.2, 0.0,
                          path_node, path_action, depth, leaf, np.zeros(1, np.int64), open_b, open_node,
                          np.empty((TREES, CELLS), np.uint8))
    return step


def _python_rate(rounds: int) -> float:
    """Simulations a second of one 800-simulation search run as Python (before any compile in this process)."""
    best = []
    for _ in range(rounds):
        tree = search_tree.Tree(np.zeros(1, np.uint64), np.zeros(1, np.uint64), capacity=1024)
        start = time.perf_counter()
        mcts.search(tree, FreeEvaluator(), search_tree.SearchConfig(num_simulations=800),
                    rng=np.random.default_rng(0))
        best.append(time.perf_counter() - start)
    return 800 / min(best)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="timings of each; the best is printed (default 5)")
    args = parser.parse_args()
    python_rate = _python_rate(args.rounds)  # first: nothing compiled yet in this process
    tree = search_tree.Tree(np.zeros(TREES, np.uint64), np.zeros(TREES, np.uint64), capacity=4096)
    try:
        step, name = _walk_step_kernels(tree), "the numba kernels"
    except ImportError:
        step, name = _walk_step(tree), "the one search"
    step()
    best = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        for _ in range(2000):
            step()
        best.append((time.perf_counter() - start) / 2000 * 1e6)
    print(f"{name}: walk step compiled {min(best):.1f} us for {TREES} trees (best of {args.rounds} x 2,000); "
          f"the search as Python {python_rate:,.0f} simulations a second")


if __name__ == "__main__":
    main()
