"""The command of the release: ``compare`` (may a candidate ship? its file and the shipped one graded paired)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

from connectx_az import errors
from connectx_az.cli import common


def cmd_compare(args: argparse.Namespace) -> int:
    from connectx_az.tools import compare

    common.require_positive(args, "--limit", "--games", "--act-timeout")
    sizes = compare.QUICK if args.quick else compare.FULL
    changes = {k: v for k, v in (("limit", args.limit), ("games", args.games), ("network_limit", args.limit),
                                 ("act_timeout", args.act_timeout)) if v is not None}
    if args.duel_opening:  # checked here, not in the duel step an hour of grading later
        from connectx_az.evaluation import duel

        try:
            duel.check_settings(games_per_seat=1, noise=0.0, act_timeout=1.0, opening=args.duel_opening)
        except duel.DuelError as exc:
            why = str(exc).removeprefix(f"bad opening {args.duel_opening!r}: ")
            raise errors.UserError(f"--duel-opening {args.duel_opening}: {why}") from None
        changes["duel_opening"] = args.duel_opening
    sizes = compare.Sizes(**{**dataclasses.asdict(sizes), **changes})
    candidate = Path(args.candidate)
    out = Path(args.out or f"build/compare/{candidate.stem or candidate.name}{'-quick' if args.quick else ''}")
    args.kept = f"the grades done are kept in {out}: the same command goes on from them"
    print(f"compare into {out} ({sizes.label}); a killed compare resumes where it stopped; the time left is "
          "measured from the steps as they end", flush=True)
    result = compare.run(candidate, out, against=args.against, sizes=sizes, runtimes=args.runtimes, cores=args.cores,
                         duel_cache=args.duel_cache)
    print("\n".join(compare.format_verdict(result, sizes=sizes, candidate=str(candidate), shipped=args.against)))
    if args.card:
        card = _candidate_card(out / "candidate.onnx" if (out / "candidate.onnx").is_file() else candidate, args.run)
        card["strength"] = compare.strength_card(out)
        Path(args.card).write_text(json.dumps(card, indent=2, sort_keys=True) + "\n")
        print(f"wrote {args.card}: {card['strength']['headline']}")
    return 0 if result["ships"] else 1


def _candidate_card(model: Path, run: str | None) -> dict[str, Any]:
    """The card of the compared ONNX ``model``: the one beside it, else the facts read from the file; with ``run``
    (the run folder it came from), how that run trained it (its ``config.json`` and ``metrics.jsonl``)."""
    from connectx_az import cards

    card = cards.load(model.with_suffix(".json"))
    if not card:
        from connectx_az.training import export

        card = export.model_card(model)
    card["path"] = Path(card.get("path", model)).name  # where it was graded means nothing in another folder
    card.pop("checkpoint", None)  # nor does the checkpoint's path on the machine that exported it
    if run:
        from connectx_az.training import runs, train

        run_dir = Path(run)
        if not (run_dir / runs.METRICS).is_file() or not (run_dir / "config.json").is_file():
            raise errors.UserError(f"--run {run_dir}: not a training run folder (no {runs.METRICS} and config.json)")
        run_config = json.loads((run_dir / "config.json").read_text())
        card["training"] = train.summarize(runs.read_metrics(run_dir), run_config)
        card["trained_by"] = card["training"].pop("command")
        card["generation"] = card["training"]["generations"]
    return card


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add this group's command to ``sub``."""
    from connectx_az.tools import compare  # numpy only: the rule's text and the defaults

    p = sub.add_parser("compare", help="may a candidate ship? Its file and the shipped one graded paired; a verdict",
                       description="Build CANDIDATE with the shipped book, grade it and the shipped file on the same "
                       "positions (the six Pons sets under the Kaggle clock in both runtimes, games against negamax, "
                       "the duel against the noisy perfect opponent, the two networks alone at 800 simulations), "
                       "print each figure with the paired counts and p-values, and a verdict (exit 0: may ship; 1: "
                       "not). " + compare.RULE + " Its timings: README, \"Is my model better than the shipped "
                       "one?\"; the progress lines measure the time left as steps end.")
    p.add_argument("candidate", help="an ONNX model, a training run folder or a built submission.py")
    p.add_argument("--against", default=str(compare.SHIPPED_MODEL),
                   help="what to compare with (default: the shipped model, built with the shipped book)")
    p.add_argument("--quick", action="store_true",
                   help=f"samples: {compare.QUICK.label}, the networks on {compare.QUICK.network_limit} positions "
                        "a set")
    p.add_argument("--out", help="folder for the builds and grades (default build/compare/CANDIDATE[-quick])")
    p.add_argument("--card", metavar="PATH", help="write the candidate's model card, its strength from these grades")
    p.add_argument("--run", metavar="RUN_DIR",
                   help="with --card: the training run the candidate came from, for the card's training facts")
    p.add_argument("--runtimes", nargs="+", choices=list(compare.RUNTIMES), default=list(compare.RUNTIMES),
                   help="the agent's runtimes to grade (default both)")
    p.add_argument("--cores", type=int, nargs="+", default=[], metavar="CORE",
                   help="pin the grading to these CPU cores; two grade the two runtimes at once, a core each (the "
                        "clock is what is measured: cores nothing else uses)")
    p.add_argument("--limit", type=int, help="positions a set instead (also for the networks)")
    p.add_argument("--games", type=int, help="games a seat against negamax and in the duel instead")
    p.add_argument("--act-timeout", type=float, help="seconds a move instead of Kaggle's 2: quick checks only")
    p.add_argument("--duel-opening", metavar="MOVES",
                   help="start every duel game from this position (1-based columns, e.g. 4444333): quick checks only")
    p.add_argument("--duel-cache", default="build/duel_cache.sqlite",
                   help="the duel referee's solved positions (default build/duel_cache.sqlite)")
    p.set_defaults(func=cmd_compare)
