"""Ablation 12's labels: ablation 11's file with the short openings' moves proven at 30 M nodes
(runs/abl11/labels_m30.npz) and new openings of 4-10 plies (runs/abl11/labels_short.npz), the
positions of at most 12 plies only."""
from connectx_az.training import labels as solved

whole = solved.concat(solved.load("runs/abl11/labels_m30.npz"), solved.load("runs/abl11/labels_short.npz"))
keep = whole.plies <= 12
openings = solved.Labels(**{name: getattr(whole, name)[keep] for name in solved.FIELDS})
solved.save("runs/abl12/labels_open.npz", openings)
print(f"{len(openings):,} positions of at most 12 plies (W/D/L {openings.counts()}), "
      f"{int(openings.has_moves().sum()):,} with their best moves, of {len(whole):,}")
