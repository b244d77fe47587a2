"""One generation's self-play of a run, played again from a kept checkpoint under several settings.

usage: python lab/precision/selfplay_ab.py RUN CHECKPOINT [ARM ...]

RUN is a run folder (its ``config.json`` gives the settings), CHECKPOINT a ``.pt`` of it (say
``RUN/snapshots/gen_0160.pt``); each ARM is a comma-separated list of ``key=value`` overrides
(``selfplay.cache_positions=0``), ``-`` for the run's own settings (the default: ``- selfplay.cache_positions=0``).
Each arm plays the generation's 160 games (the ``cpu`` preset's) from the same seed in this process, one torch
thread, as ``train`` does; it prints the seconds, the positions the searches asked for and those the network
scored, and the training positions made.  Pin it to an idle core: ``taskset -c 0``.  Behind *The network's
answers kept for a generation* in docs/results.md.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch

from connectx_az.training import config, devices, network, workers


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    run, checkpoint, arms = argv[0], argv[1], argv[2:] or ["-", "selfplay.cache_positions=0"]
    torch.set_num_threads(1)
    base = config.load_config(run)
    net, _ = network.load_checkpoint(checkpoint)
    device = devices.resolve_device("cpu")
    network.place(net, device)
    print(f"{checkpoint}: {base.selfplay.num_games} games, {base.selfplay.num_parallel_games} in flight, "
          f"{base.mcts.num_simulations} simulations a move")
    for arm in arms:
        cfg = base if arm == "-" else config.override(base, arm.split(","))
        evaluator = network.TorchEvaluator(net, device, cfg.precision)
        rng = np.random.default_rng([cfg.seed, 170])
        start = time.perf_counter()
        _, stats = workers.play_games(evaluator, cfg.selfplay.num_games, cfg.selfplay, cfg.mcts, rng)
        seconds = time.perf_counter() - start
        asked, scored = stats.num_evaluations, stats.num_network_evaluations
        precision = str(evaluator.dtype or "float32").removeprefix("torch.")
        print(f"{arm:>36} ({precision}): {seconds:5.1f} s, asked {asked:,} ({asked / seconds:,.0f}/s), "
              f"network {scored:,} ({scored / asked:.3f}), positions {stats.num_positions:,} "
              f"({stats.num_positions / seconds:.1f}/s), forks {stats.fork_rate:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
