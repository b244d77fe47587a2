"""usage: table.py RUN [PNG]: the recipe run's grades (lab/recipe/grade.sh) against its generation time.

Prints a markdown table, a row per graded snapshot: generation, hours of generation time before it
(``metrics.jsonl``'s ``seconds``), MCTS 800 and raw-policy mistake rates on the three hard sets, and the
value head's W/D/L accuracy on Begin-Hard's 1,000 raw positions; with PNG, draws the MCTS 800 rates
against hours beside the old chain's two points (docs/results.md)."""

import json
import sys
from pathlib import Path

SETS = ("Middle-Medium", "Begin-Medium", "Begin-Hard")
#: the old chain (docs/results.md): generation 150 of the first run (graded on all 474 Begin-Hard positions on
#: 2026-11-25, like the recipe's snapshots), and the shipped generation 41
OLD = {"generation 150 of the first run": (3.07, {"Middle-Medium": 0.076, "Begin-Medium": 0.049, "Begin-Hard": 0.141}),
       "shipped network": (13.68, {"Middle-Medium": 0.029, "Begin-Medium": 0.016, "Begin-Hard": 0.0612})}


def rows(run: Path) -> list[dict]:
    seconds = [json.loads(line)["seconds"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    out = []
    for path in sorted((run / "grades").glob("gen_*.pons.json")):
        generation = int(path.name.split("_")[1].split(".")[0])
        grade = json.loads(path.read_text())
        out.append({"generation": generation, "hours": sum(seconds[:generation]) / 3600,
                    **{f"mcts800/{s}": grade["mcts800"][s]["mistake_rate"] for s in SETS},
                    **{f"policy/{s}": grade["policy"][s]["mistake_rate"] for s in SETS},
                    "value/Begin-Hard": grade["value"]["Begin-Hard"]["accuracy"]})
    return out


def main() -> None:
    run = Path(sys.argv[1])
    table = rows(run)
    print("| generation | hours | MCTS 800 MM / BM / BH | raw policy MM / BM / BH | value W/D/L BH |")
    print("|---|---|---|---|---|")
    for r in table:
        mcts = " / ".join(f"{100 * r[f'mcts800/{s}']:.1f}%" for s in SETS)
        policy = " / ".join(f"{100 * r[f'policy/{s}']:.1f}%" for s in SETS)
        print(f"| {r['generation']} | {r['hours']:.2f} | {mcts} | {policy} | {100 * r['value/Begin-Hard']:.1f}% |")
    if len(sys.argv) > 2:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.2))
        for i, s in enumerate(SETS):
            ax.plot([r["hours"] for r in table], [100 * r[f"mcts800/{s}"] for r in table], "o-", color=f"C{i}",
                    label=f"recipe from scratch, {s}")
            for j, (name, (hours, rates)) in enumerate(OLD.items()):
                ax.plot([hours], [100 * rates[s]], "s^"[j], color=f"C{i}", markersize=9, fillstyle="none",
                        label=name if i == 0 else None)
        ax.set_xlabel("hours of generation time (one CPU core)")
        ax.set_ylabel("MCTS 800 mistakes (%)")
        ax.set_title("The cpu preset from scratch against the old chain (squares, triangles)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
