"""usage: table.py RUN [RUN ...] [PNG]: recipe runs' grades (RUN/grades/gen_NNNN.pons.json: `connectx-az eval pons
--sims 800 --json` of each checkpoint `train --keep-every` kept; lab/recipe/grade.sh at commit 6d9786f) against their
generation time.

Prints a markdown table per run, a row per graded snapshot: generation, hours of generation time before it
(``metrics.jsonl``'s ``seconds``), MCTS 800 and raw-policy mistake rates on the three hard sets, and the value
head's W/D/L accuracy on Begin-Hard's 1,000 raw positions; Begin-Hard's search and policy rates are on its first 474
annotated positions whatever a grade holds (800 since 2026-11-26), as the old chain's points are; with PNG, draws
each run's MCTS 800 rates against hours, a panel a set, beside the old chain's two points (docs/results.md)."""

import json
import sys
from pathlib import Path

SETS = ("Middle-Medium", "Begin-Medium", "Begin-Hard")
#: positions per set the rates are on: the Begin-Hard annotated before 2026-11-26, first in the package's file
ON = {"Begin-Hard": 474}
#: the old chain (docs/results.md): generation 150 of the first run (graded on all 474 Begin-Hard positions on
#: 2026-11-25, like the recipe's snapshots), and the shipped generation 41
OLD = {"generation 150 of the first run": (3.07, {"Middle-Medium": 0.076, "Begin-Medium": 0.049, "Begin-Hard": 0.141}),
       "shipped network": (13.68, {"Middle-Medium": 0.029, "Begin-Medium": 0.016, "Begin-Hard": 0.0612})}


def rate(cell: dict, name: str, path: Path) -> float:
    """A grade's mistake rate on set ``name``, on its first ``ON[name]`` positions where ``ON`` names it."""
    n = ON.get(name, cell["n"])
    if cell["n"] < n:
        sys.exit(f"table.py: {path} holds {cell['n']} {name} positions, fewer than {n}")
    return sum(i < n for i in cell["mistakes"]) / n


def rows(run: Path) -> list[dict]:
    seconds = [json.loads(line)["seconds"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    out = []
    for path in sorted((run / "grades").glob("gen_*.pons.json")):
        generation = int(path.name.split("_")[1].split(".")[0])
        grade = json.loads(path.read_text())
        out.append({"generation": generation, "hours": sum(seconds[:generation]) / 3600,
                    **{f"mcts800/{s}": rate(grade["mcts800"][s], s, path) for s in SETS},
                    **{f"policy/{s}": rate(grade["policy"][s], s, path) for s in SETS},
                    "value/Begin-Hard": grade["value"]["Begin-Hard"]["accuracy"]})
    return out


def label(run: Path) -> str:
    config = json.loads((run / "config.json").read_text())
    return f"from scratch, {config['num_generations']} generations"


def main() -> None:
    args = sys.argv[1:]
    png = args.pop() if args and args[-1].endswith(".png") else None
    if not args:
        sys.exit(__doc__.splitlines()[0])
    tables = {}
    for run in map(Path, args):
        tables[run] = table = rows(run)
        print(f"{run} ({label(run)})\n")
        print("| generation | hours | MCTS 800 MM / BM / BH | raw policy MM / BM / BH | value W/D/L BH |")
        print("|---|---|---|---|---|")
        for r in table:
            mcts = " / ".join(f"{100 * r[f'mcts800/{s}']:.1f}%" for s in SETS)
            policy = " / ".join(f"{100 * r[f'policy/{s}']:.1f}%" for s in SETS)
            print(f"| {r['generation']} | {r['hours']:.2f} | {mcts} | {policy} | {100 * r['value/Begin-Hard']:.1f}% |")
        print()
    if png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(SETS), figsize=(11, 3.8), sharex=True)
        for ax, s in zip(axes, SETS, strict=True):
            for i, (run, table) in enumerate(tables.items()):
                ax.plot([r["hours"] for r in table], [100 * r[f"mcts800/{s}"] for r in table], "o-", color=f"C{i}",
                        markersize=3, label=label(run))
            for j, (name, (hours, rates)) in enumerate(OLD.items()):
                ax.plot([hours], [100 * rates[s]], "s^"[j], color="k", markersize=8, fillstyle="none", label=name)
            ax.axhline(100 * OLD["shipped network"][1][s], color="k", lw=0.8, ls=":")
            ax.axvline(10, color="grey", lw=0.8, ls="--")
            ax.set_title(s)
            ax.set_xlabel("hours of generation time (one CPU core)")
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("MCTS 800 mistakes (%)")
        axes[0].legend(fontsize=7)
        fig.suptitle("The cpu preset from scratch against the old chain "
                     "(dotted: the shipped network; dashed: 10 hours)", fontsize=10)
        fig.tight_layout()
        fig.savefig(png, dpi=110)


if __name__ == "__main__":
    main()
