"""usage: average.py OUT.pt SNAPSHOT.pt ...: one checkpoint whose weights (and BatchNorm statistics) are the mean of the
snapshots' (the same run's, same network), for `connectx-az export OUT.pt`: does averaging the last snapshots of a
run, as stochastic weight averaging does, give a better network than any one of them?"""
import sys

import torch

if len(sys.argv) < 3:
    sys.exit(__doc__.split(":")[0])
out, paths = sys.argv[1], sys.argv[2:]
checkpoints = [torch.load(p, map_location="cpu", weights_only=False) for p in paths]
model = {}
for key, value in checkpoints[-1]["model"].items():
    # integers (BatchNorm's batch counters) are the last snapshot's
    model[key] = sum(c["model"][key] for c in checkpoints) / len(checkpoints) if value.is_floating_point() else value
averaged = {k: v for k, v in checkpoints[-1].items() if k != "optimizer"}
averaged["model"] = model
torch.save(averaged, out)
print(f"wrote {out}: the mean of {len(paths)} snapshots")
