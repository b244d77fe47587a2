"""Ablation 13's tables: arm / control per set and mode, with the paired counts (only the arm wrong /
only the control wrong), on the sets both files graded.  usage: table.py ARM.pons.json CONTROL.pons.json"""
import json
import sys

a, b = (json.load(open(p)) for p in sys.argv[1:3])
sets = [s for s in a["policy"] if s in b["policy"]]
print("| mode | " + " | ".join(sets) + " |")
print("|---" * (len(sets) + 1) + "|")
for mode in ("policy", "mcts800", "value"):
    cells = []
    for s in sets:
        x, y = a[mode][s], b[mode][s]
        if mode == "value":
            ra, rb = x["accuracy"], y["accuracy"]
        else:
            ra, rb = x["mistake_rate"], y["mistake_rate"]
        wa, wb = set(x.get("mistakes", x.get("wrong", []))), set(y.get("mistakes", y.get("wrong", [])))
        cells.append(f"{100 * ra:.1f}% / {100 * rb:.1f}% {len(wa - wb)} / {len(wb - wa)}")
    print(f"| {mode} | " + " | ".join(cells) + " |")
