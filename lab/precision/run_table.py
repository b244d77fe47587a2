"""usage: run_table.py NEW OLD [SCALE_RUN] [PNG]: issue 51's from-scratch run (NEW) beside the `cpu` run before it
(OLD), snapshot by snapshot, and the hours each took to the issue's targets.

NEW and OLD are run folders with ``grades/gen_NNNN.pons.json`` (lab/precision/grade_run.sh: `connectx-az eval pons
--sims 800 --json` of each kept snapshot) and ``metrics.jsonl``. OLD is the 450-generation run, from the history:
``git show 7873780:lab/runs/recipe450/...`` (its grades rate Begin-Hard on the first 474 positions).

The hours are each run's generation seconds before the snapshot, on its own machine. SCALE_RUN, a run of the old
recipe (float32, 32 games in flight, same seed) on NEW's machine, puts OLD's hours on that machine too: its first
generations play the very games OLD's did, so the ratio of their seconds is the ratio of the machines' speeds.

Prints a markdown table, a row per snapshot graded in NEW: hours, MCTS 800 mistakes on Middle-Medium / Begin-Medium /
Begin-Hard (all 800 and the first 474), then OLD at the same generation (its hours, scaled where it can), and the
two paired at MCTS 800 (only NEW wrong / only OLD wrong, per set, Begin-Hard on its first 474) with the one-sided sign
test of the three sets together (p: NEW better; q: OLD better). Then the hours to each target: the old preset's end
(MCTS 800 MM <= 2.3%, BM <= 1.7%, BH <= 6.4% of 800, all three in one snapshot) and BH <= 5.5% and <= 5%.
With PNG, draws MCTS 800 mistakes against hours on NEW's machine for both runs, a panel a set.
"""

import json
import sys
from pathlib import Path

from connectx_az.evaluation import grading
from connectx_az.evaluation.grading import sign_test

SETS = ("Middle-Medium", "Begin-Medium", "Begin-Hard")
OLD_BH = 474  # the positions of Begin-Hard the old run's grades hold
TARGETS = {"the old preset's end": {"Middle-Medium": 0.023, "Begin-Medium": 0.017, "Begin-Hard": 0.064},
           "Begin-Hard <= 5.5%": {"Begin-Hard": 0.055}, "Begin-Hard <= 5%": {"Begin-Hard": 0.05}}


def seconds(run: Path) -> list[float]:
    return [json.loads(line)["seconds"] for line in (run / "metrics.jsonl").read_text().splitlines() if line]


def grades(run: Path) -> dict[int, dict]:
    return {int(p.name.split("_")[1].split(".")[0]): json.loads(p.read_text())["mcts800"]
            for p in sorted((run / "grades").glob("gen_*.pons.json"))}


def first(cell: dict, n: int) -> dict:
    """An ``eval pons`` cell cut to its first ``n`` positions."""
    if cell["n"] < n:
        sys.exit(f"run_table.py: a grade holds {cell['n']} positions, fewer than {n}")
    return {"n": n, "mistakes": [i for i in cell["mistakes"] if i < n]}


def rate(cell: dict) -> float:
    return len(cell["mistakes"]) / cell["n"]


def main() -> None:
    args = sys.argv[1:]
    png = args.pop() if args and args[-1].endswith(".png") else None
    if len(args) not in (2, 3):
        sys.exit(__doc__.splitlines()[0])
    new, old = Path(args[0]), Path(args[1])
    new_s, old_s = seconds(new), seconds(old)
    scale = None
    if len(args) == 3:
        ref = seconds(Path(args[2]))
        k = min(len(ref), len(old_s))
        scale = sum(ref[:k]) / sum(old_s[:k])
        print(f"machines: {args[2]}'s first {k} generations took {sum(ref[:k]) / 60:.1f} min here, "
              f"{old}'s the same games {sum(old_s[:k]) / 60:.1f} min: OLD's hours x {scale:.2f}\n")
    new_g, old_g = grades(new), grades(old)
    print("| generation | hours | MCTS 800 MM / BM / BH (800; 474) | old run: hours | old run: MM / BM / BH (474) "
          "| paired, only new / only old wrong: MM, BM, BH (474) | p new better / old better |")
    print("|---|---|---|---|---|---|---|")
    reached: dict[str, tuple[int, float]] = {}
    for gen, g in new_g.items():
        hours = sum(new_s[:gen]) / 3600
        rates = {s: rate(g[s]) for s in SETS}
        bh474 = rate(first(g["Begin-Hard"], OLD_BH))
        for name, target in TARGETS.items():
            if name not in reached and all(rates[s] <= t + 1e-9 for s, t in target.items()):
                reached[name] = (gen, hours)
        row = (f"| {gen} | {hours:.2f} | {100 * rates['Middle-Medium']:.1f}% / {100 * rates['Begin-Medium']:.1f}% / "
               f"{100 * rates['Begin-Hard']:.1f}%; {100 * bh474:.1f}% |")
        if gen in old_g:
            o = old_g[gen]
            old_hours = sum(old_s[:gen]) / 3600
            mine = {s: g[s] if s != "Begin-Hard" else first(g[s], OLD_BH) for s in SETS}
            theirs = {s: o[s] if s != "Begin-Hard" else first(o[s], OLD_BH) for s in SETS}
            pairs = grading.paired(mine, theirs)
            only_new = sum(pairs[s]["only_a"] for s in SETS)
            only_old = sum(pairs[s]["only_b"] for s in SETS)
            row += (f" {old_hours:.2f}" + (f" ({old_hours * scale:.2f} here)" if scale else "") + " | "
                    + " / ".join(f"{100 * rate(theirs[s]):.1f}%" for s in SETS) + " | "
                    + ", ".join(f"{pairs[s]['only_a']} / {pairs[s]['only_b']}" for s in SETS)
                    + f" | {sign_test(only_old, only_new):.2f} / {sign_test(only_new, only_old):.2f} |")
        else:
            row += " | | | |"
        print(row)
    print()
    for name in TARGETS:
        if name in reached:
            gen, hours = reached[name]
            print(f"{name}: first at generation {gen}, {hours:.2f} hours")
        else:
            print(f"{name}: not yet (graded up to generation {max(new_g, default=0)})")
    if png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(SETS), figsize=(11, 3.8), sharex=True)
        for ax, s in zip(axes, SETS, strict=True):
            ax.plot([sum(new_s[:g]) / 3600 for g in new_g], [100 * rate(new_g[g][s]) for g in new_g], "o-",
                    markersize=3, label="bfloat16, 64 games in flight")
            old_x = [sum(old_s[:g]) / 3600 * (scale or 1) for g in old_g]
            ax.plot(old_x, [100 * rate(old_g[g][s]) for g in old_g], "o-", markersize=3,
                    label="the run before (float32, 32)" + (", its hours scaled" if scale else ""))
            ax.axhline(100 * TARGETS["the old preset's end"][s], color="k", lw=0.8, ls=":")
            ax.set_title(s + (" (new: 800; old: first 474)" if s == "Begin-Hard" else ""))
            ax.set_xlabel("hours of generation time (one core of this machine)")
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("MCTS 800 mistakes (%)")
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(png, dpi=110)


if __name__ == "__main__":
    main()
