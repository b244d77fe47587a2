# ruff: noqa: F821
# exec_submission and kaggle_dicts come from kaggle_io.sandbox_prelude(), which bench_agent.py puts before this.
"""Runs in a fresh interpreter with the package, onnxruntime and torch blocked, as on Kaggle. argv: submission path,
number of full-budget moves, actTimeout, overage bank.  Prints one JSON line."""
import json
import sys
import time


def status_mb(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field)) / 1024  # kB

def rss_mb():
    return status_mb("VmRSS:")

def peak_rss_mb():
    # VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss across fork and exec, so a
    # child started by a large parent (torch loaded) would report the parent's size.
    return status_mb("VmHWM:")


def main() -> None:
    submission, num_moves, act_timeout, overage = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    rss_before = rss_mb()
    start = time.perf_counter()
    agent, env = exec_submission(submission)
    exec_done = time.perf_counter()
    template, player = env["_template"], env["_agent"]
    mcts, search_tree, game = env["_MODULES"]["mcts"], env["_MODULES"]["search_tree"], env["_MODULES"]["game"]
    evaluator = player.load_model()
    decode_done = time.perf_counter()
    # the first tiny search: one batch of leaves from the empty board
    tiny = search_tree.SearchConfig(num_simulations=template.CONFIG.search.num_parallel,
                                    num_parallel=template.CONFIG.search.num_parallel)
    tree = search_tree.Tree(numpy.zeros(1, numpy.uint64), numpy.zeros(1, numpy.uint64), capacity=64)
    mcts.search(tree, evaluator, tiny)
    search_done = time.perf_counter()
    rss_loaded = rss_mb()

    # full-budget moves against a fixed reply (the column left of ours, or the first open one),
    # so the agent finds the reply in its tree and keeps growing it, as in a real game
    position, mask, moves = 0, 0, []
    for _ in range(num_moves):
        obs, cfg = kaggle_dicts(game.to_kaggle(position, mask, 1), 1, 2 * len(moves), overage, act_timeout)
        t0 = time.perf_counter()
        col = agent(obs, cfg)
        info = dict(player.info)
        moves.append({"col": col, "seconds": round(time.perf_counter() - t0, 3), "source": info.get("source"),
                      "simulations": int(info.get("simulations", 0))})
        position, mask = game.play(position, mask, col)
        if game.outcome(position, mask) is not None:
            break
        reply = next(c for c in ((col + 6) % 7, *range(7)) if game.is_legal(mask, c))
        position, mask = game.play(position, mask, reply)
        if game.outcome(position, mask) is not None:
            break
    print(json.dumps({"exec_seconds": exec_done - start, "decode_seconds": decode_done - exec_done,
                      "first_search_seconds": search_done - decode_done, "load_seconds": search_done - start,
                      "backend": player.backend, "load_error": player.load_error, "rss_before_mb": rss_before,
                      "rss_loaded_mb": rss_loaded, "peak_rss_mb": peak_rss_mb(),
                      "tree_nodes": int(player.tree.num_nodes[0]) if player.tree is not None else 0, "moves": moves}))


if __name__ == "__main__":
    main()
