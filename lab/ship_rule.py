"""The ship rule, read from two folders of `lab/book/measure.sh` grades: a candidate's built file against the
shipped one.

    python lab/ship_rule.py NEW OLD [--card CARD.json --grade GRADE.pons.json]

NEW and OLD each hold `pons_RUNTIME.json`, `negamax_RUNTIME.json` and `duel_RUNTIME.json` for both runtimes
(`kaggle`, `numpy`). Prints, a runtime at a time, each Pons set's mistakes under the clock (NEW against OLD, and
paired: only NEW wrong / only OLD wrong), the games against `negamax` and the duel against the perfect opponent,
then `passes` or what fails. The rule: no set with more mistakes than OLD's, every game against `negamax` won,
and in the duel no more value-losing moves or unconverted wins than OLD's and no failure.

With `--card`, writes NEW's figures into that model card's `strength`: `headline` from NEW's Pons grades, and
`network` from `--grade` (the network alone: `connectx-az eval pons --model X.onnx --sims 800 --json`, as
`lab/recipe/grade.sh` writes it), so that no figure in the card is typed by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

RUNTIMES = ("kaggle", "numpy")
SETS = ("End-Easy", "Middle-Easy", "Middle-Medium", "Begin-Easy", "Begin-Medium", "Begin-Hard")
MODE = "submission@2s"


def _load(folder: Path, name: str) -> dict:
    path = folder / name
    if not path.is_file():
        sys.exit(f"ship_rule: {path} is missing (lab/book/measure.sh writes it)")
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        sys.exit(f"ship_rule: {path} is not readable JSON ({type(exc).__name__})")


def _sets(folder: Path, runtime: str) -> dict:
    grades = _load(folder, f"pons_{runtime}.json")
    mode = MODE if MODE in grades else next(iter(grades))
    missing = [s for s in SETS if s not in grades[mode]]
    if missing:
        sys.exit(f"ship_rule: {folder}/pons_{runtime}.json has no {', '.join(missing)}")
    return grades[mode]


def compare(new: Path, old: Path) -> list[str]:
    """Prints the comparison; returns what fails the rule (empty: it passes)."""
    fails = []
    for runtime in RUNTIMES:
        a, b = _sets(new, runtime), _sets(old, runtime)
        print(f"{runtime}: Pons sets under the clock (mistakes NEW / OLD; paired: only NEW wrong / only OLD wrong)")
        for name in SETS:
            if a[name]["n"] != b[name]["n"]:  # Begin-Hard grew from 474 to 800 positions on 2026-11-26
                sys.exit(f"ship_rule: {runtime} {name} graded on {a[name]['n']} positions in {new} and {b[name]['n']} "
                         f"in {old}: grade both on the same positions")
            x, y = set(a[name]["mistakes"]), set(b[name]["mistakes"])
            print(f"  {name:14} {len(x):3} / {len(y):3} of {a[name]['n']:4}   paired {len(x - y)} / {len(y - x)}")
            if len(x) > len(y):
                fails.append(f"{runtime} {name}: {len(x)} mistakes against {len(y)}")
        results = _load(new, f"negamax_{runtime}.json")["results"]
        won, games = sum(r["wins"] for r in results), sum(r["wins"] + r["draws"] + r["losses"] for r in results)
        bad = sum(len(r["bad_statuses"]) for r in results)
        print(f"  negamax: {won} of {games} won, {bad} bad statuses, slowest move "
              f"{max(r['max_move_s'] for r in results)} s")
        if won < games or bad or not games:
            fails.append(f"{runtime} negamax: {won} of {games} won, {bad} bad statuses")
        d, e = _load(new, f"duel_{runtime}.json")["summary"], _load(old, f"duel_{runtime}.json")["summary"]
        print(f"  duel: value-losing moves {d['value_losses']} / {e['value_losses']} of {d['file_moves']} / "
              f"{e['file_moves']}, unconverted wins {d['unconverted']} / {e['unconverted']} of "
              f"{d['won_positions']} / {e['won_positions']}, seat 2 won {d['by_seat']['2']['wins']} / "
              f"{e['by_seat']['2']['wins']}, failures {len(d['failures'])}")
        if d["value_losses"] > e["value_losses"] or d["unconverted"] > e["unconverted"] or d["failures"]:
            fails.append(f"{runtime} duel: {d['value_losses']} value-losing moves, {d['unconverted']} unconverted, "
                         f"{len(d['failures'])} failures")
    return fails


def headline(new: Path) -> str:
    """The card's one-line strength from NEW's Pons grades."""
    kaggle, numpy = _sets(new, "kaggle"), _sets(new, "numpy")
    others = max(g[s]["mistake_rate"] for g in (kaggle, numpy) for s in SETS if s != "Begin-Hard")
    return (f"Kaggle clock, with the book: Pons Begin-Hard {kaggle['Begin-Hard']['mistake_rate']:.1%} mistakes "
            f"(numba) / {numpy['Begin-Hard']['mistake_rate']:.1%} (numpy alone), other sets <= {others:.1%}")


def network(grade: Path) -> str:
    """The card's network-alone line from a `connectx-az eval pons --sims 800 --json` file."""
    g = json.loads(grade.read_text())
    search = ", ".join(f"{s} {g['mcts800'][s]['mistake_rate']:.1%}"
                       for s in ("Begin-Hard", "Begin-Medium", "Middle-Medium"))
    return (f"MCTS 800 (network alone): {search}; "
            f"raw policy Begin-Hard {g['policy']['Begin-Hard']['mistake_rate']:.1%}; "
            f"value head W/D/L on Begin-Hard's {g['value']['Begin-Hard']['n']:,} raw positions "
            f"{g['value']['Begin-Hard']['accuracy']:.1%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("new", type=Path, help="the candidate's grades (lab/book/measure.sh OUT)")
    parser.add_argument("old", type=Path, help="the shipped file's grades")
    parser.add_argument("--card", type=Path, help="model card whose strength to write from NEW's grades")
    parser.add_argument("--grade", type=Path, help="the network alone graded at 800 simulations (with --card)")
    args = parser.parse_args()
    fails = compare(args.new, args.old)
    print("passes" if not fails else "fails: " + "; ".join(fails))
    if args.card:
        card = json.loads(args.card.read_text())
        card["strength"] = {"headline": headline(args.new),
                            "command": "connectx-az eval pons --submission build/submission.py "
                                       "--runtime kaggle|numpy --json",
                            **({"network": network(args.grade)} if args.grade else {})}
        args.card.write_text(json.dumps(card, indent=2, sort_keys=True) + "\n")
        print(f"wrote the strength of {args.card}: {card['strength']['headline']}")
    return 0 if not fails else 1


if __name__ == "__main__":
    sys.exit(main())
