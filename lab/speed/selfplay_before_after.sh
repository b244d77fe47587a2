#!/bin/bash
# Self-play's speed at two commits, on one core: the figures of docs/results.md, *Speed* (issue 62).
#
#   bash lab/speed/selfplay_before_after.sh BEFORE AFTER [CORE] [OUT]
#
# Each commit is checked out in a worktree under OUT (default /tmp/speed) and run with this checkout's .venv
# (PYTHONPATH points at the worktree). For each: `bench selfplay` of the cpu preset (the tree work alone,
# then the network in auto and float32 precision), three generations of a new run and two from the
# shipped network (`--init-model`), then a profile of 30 training steps. Everything is pinned to CORE (1).
set -euo pipefail
before=$1 after=$2 core=${3:-1} out=${4:-/tmp/speed}
root=$(cd "$(dirname "$0")/../.." && pwd)
py=$root/.venv/bin/python
mkdir -p "$out"
for commit in "$before" "$after"; do
  tree=$out/tree-$commit
  [ -d "$tree" ] || git -C "$root" worktree add --detach "$tree" "$commit" > /dev/null
  export PYTHONPATH=$tree
  cd "$out"
  echo "== $commit"
  for args in "--evaluator free" "--precision auto" "--precision float32"; do
    echo "-- bench selfplay --seconds 6 $args"
    taskset -c "$core" "$py" -m connectx_az.cli.main bench selfplay --seconds 6 $args \
      | grep -E "evals_per_s|ratio|positions_per_s|network_share"
  done
  rm -rf "$out/new-$commit" "$out/warm-$commit"
  taskset -c "$core" "$py" -m connectx_az.cli.main train "$out/new-$commit" --preset cpu --generations 3 \
    --workers 0 --quiet
  taskset -c "$core" "$py" -m connectx_az.cli.main train "$out/warm-$commit" --preset cpu --generations 2 \
    --workers 0 --quiet --init-model "$tree/connectx_az/models/default.pt"
done
echo "-- a wave of the cpu preset's self-play with the shipped network, profiled ($after): the network's share"
taskset -c "$core" "$py" - "$out/tree-$after/connectx_az/models/default.pt" <<'PY'
import cProfile, pstats, sys
import numpy as np, torch
from connectx_az.engine import mcts_numba
from connectx_az.training import config, selfplay
from connectx_az.training.network import TorchEvaluator, load_checkpoint
torch.set_num_threads(1)
cfg = config.make_config("cpu")
evaluator = TorchEvaluator(load_checkpoint(sys.argv[1])[0], "cpu", cfg.precision)
mcts_numba.compile_kernels(cache=True)
profile = cProfile.Profile()
profile.runcall(selfplay.play_games, evaluator, 64, cfg.selfplay, cfg.mcts, np.random.default_rng(0))
stats = pstats.Stats(profile)
total = stats.total_tt
network = stats.stats[next(k for k in stats.stats if k[2] == "evaluate" and "network.py" in k[0])][3]
print(f"self-play {total:.2f} s, of which the network (TorchEvaluator.evaluate) {network:.2f} s ({network / total:.0%})")
PY
echo "-- 30 training steps of the cpu preset's batch, profiled ($after)"
taskset -c "$core" "$py" - "$out/tree-$after/connectx_az/models/default.pt" <<'PY'
import cProfile, pstats, sys
import numpy as np, torch
from connectx_az.training import config, export, replay, train
from connectx_az.training.network import load_checkpoint, place
torch.set_num_threads(1)
cfg, rng = config.make_config("cpu"), np.random.default_rng(0)
net = place(load_checkpoint(sys.argv[1])[0], "cpu")
obs = export.random_positions(30_000, rng)
data = replay.ReplayData(obs, rng.dirichlet(np.ones(7), len(obs)).astype(np.float32),
                         rng.choice([-1.0, 0.0, 1.0], len(obs)).astype(np.float32))
optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3)
args = (net, optimizer, data)
train.train_steps(*args, 3, cfg.train.batch_size, rng, torch.device("cpu"), progress=False)  # warm-up
profile = cProfile.Profile()
profile.runcall(train.train_steps, *args, 30, cfg.train.batch_size, rng, torch.device("cpu"), progress=False)
pstats.Stats(profile).sort_stats("tottime").print_stats(6)
PY
