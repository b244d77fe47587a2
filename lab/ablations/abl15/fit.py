"""Raw-policy fit of ONNX models on a label file's positions with best moves, by plies: share whose argmax is a best move."""
import sys
import numpy as np
from connectx_az.agent import backends
from connectx_az.training import labels as solved
from connectx_az.engine import game

labels = solved.load(sys.argv[1])
keep = labels.has_moves() & (labels.best != solved.UNPROVEN_MOVES)
L = labels.take(keep)
obs = np.stack([game.encode(np.uint64(p), np.uint64(m)) for p, m in zip(L.position, L.mask)])
legal = np.stack([game.legal_mask(np.uint64(m)) for m in L.mask])
for path in sys.argv[2:]:
    ev = backends.OnnxRuntimeEvaluator(path)
    logits = np.concatenate([ev.evaluate(obs[i:i + 1024])[0] for i in range(0, len(obs), 1024)])
    logits = np.where(legal, logits, -np.inf)
    pick = logits.argmax(1)
    ok = (L.best.astype(int) >> pick) & 1
    out = [f"{path}: {ok.mean():.3f} of {len(ok)}"]
    for n in range(4, 13):
        sel = L.plies == n
        if sel.any():
            out.append(f"{n}:{ok[sel].mean():.3f}")
    print(" ".join(out))
