"""One generation's self-play played again under several settings, in this process, one torch thread.

    python lab/precision/selfplay_ab.py RUN CHECKPOINT [ARM ...] [--games N] [--set KEY=VALUE ...]

RUN is a run folder (its ``config.json`` gives the settings) or a preset's name; CHECKPOINT a ``.pt`` (say
``RUN/snapshots/gen_0160.pt``), or ``free`` for ``bench_selfplay.FreeEvaluator``, a stand-in that costs almost
nothing, so that the time is the tree work's own.  Each ARM is a comma-separated list of ``key=value``
overrides on top of ``--set``'s (``selfplay.cache_positions=0``), ``-`` for none; the default is ``-
selfplay.cache_positions=0``.  Each arm plays the same games from the same seed (``--games``, default the
run's ``num_games``; the same ``selfplay.num_workers=0``) and prints the seconds, the positions the searches
asked for and those the network scored, and the training positions made.  List arms twice (``- A - A``) to
alternate them.  Pin it to an idle core: ``taskset -c 0``.  Behind *The network's answers kept for a
generation* in docs/results.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

from connectx_az.tools.bench_selfplay import FreeEvaluator
from connectx_az.training import config, devices, network, workers


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a run folder or a preset")
    parser.add_argument("checkpoint", help="a .pt, or free")
    parser.add_argument("arms", nargs="*", default=["-", "selfplay.cache_positions=0"])
    parser.add_argument("--games", type=int, default=0, help="games an arm (default: the run's num_games)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="for every arm")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    base = config.load_config(args.run) if Path(args.run).is_dir() else config.make_config(args.run)
    base = config.override(base, [*args.set, "selfplay.num_workers=0"])
    games = args.games or base.selfplay.num_games
    net = None
    if args.checkpoint != "free":
        net, _ = network.load_checkpoint(args.checkpoint)
        network.place(net, devices.resolve_device("cpu"))
    print(f"{args.checkpoint}: {games} games, {base.selfplay.num_parallel_games} in flight, "
          f"{base.mcts.num_simulations} simulations a move")
    for arm in args.arms:
        cfg = base if arm == "-" else config.override(base, arm.split(","))
        evaluator = FreeEvaluator() if net is None else network.TorchEvaluator(net, "cpu", cfg.precision)
        precision = "free" if net is None else str(evaluator.dtype or "float32").removeprefix("torch.")
        rng = np.random.default_rng([cfg.seed, 170])
        start = time.perf_counter()
        _, stats = workers.play_games(evaluator, games, cfg.selfplay, cfg.mcts, rng)
        seconds = time.perf_counter() - start
        asked, scored = stats.num_evaluations, stats.num_network_evaluations
        print(f"{arm:>36} ({precision}): {seconds:5.1f} s, asked {asked:,} ({asked / seconds:,.0f}/s), "
              f"network {scored:,} ({scored / asked:.3f}), positions {stats.num_positions:,} "
              f"({stats.num_positions / seconds:.1f}/s), forks {stats.fork_rate:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
