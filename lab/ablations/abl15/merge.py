"""usage: merge.py OUT MAX_PLIES IN...: the positions of the label files IN of at most MAX_PLIES plies, each once."""
import sys

import numpy as np

from connectx_az.training import labels as solved

out, max_plies, *inputs = sys.argv[1:]
parts = [solved.load(path) for path in inputs]
parts = [p.take(p.plies <= int(max_plies)) for p in parts]
labels = solved.concat(*parts)
solved.save(out, labels)
print(f"{out}: {len(labels)} positions, {int(labels.has_moves().sum())} with best moves, plies "
      f"{dict(zip(*np.unique(labels.plies, return_counts=True)))}")
