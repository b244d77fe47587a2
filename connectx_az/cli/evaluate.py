"""The commands of grading: ``validate`` (games through kaggle-environments) and ``eval`` (``pons``, ``value``,
``show``, ``paired``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from connectx_az import errors, paths
from connectx_az.cli import bars, common


def cmd_validate(args: argparse.Namespace) -> int:
    from connectx_az.evaluation import kaggle_io, reports

    common.require_positive(args, "--games", "--act-timeout")
    if not Path(args.submission).is_file():
        raise errors.UserError(f"{args.submission} not found; run `make submission` first")
    common.require(args, "kaggle_environments")
    common.require_runtime(args)
    kaggle_io.kaggle_like_process(args.runtime)
    # a file that is not a submission, or whose network does not load, stops here, before the games
    kaggle_io.check_network(args.submission)
    # each file's replays in a folder of its own: a broken file's games never replace a good one's
    replays = args.replays or str(Path("build") / "replays" / Path(args.submission).stem)
    # no time left shown: a game against random takes a fraction of one against negamax, whose games come later
    with bars.progress_bar(2 * len(args.opponents) * args.games, "games", eta=False) as bar:
        results = kaggle_io.validate(args.submission, opponents=tuple(args.opponents), games=args.games,
                                     replay_dir=replays, act_timeout=args.act_timeout,
                                     on_game=lambda _: bar.update(1))
    rows = [r.as_dict() for r in results]
    if args.json:
        print(json.dumps({"results": rows}))
    else:
        print("\n".join(reports.validate_report(rows, runtime=args.runtime, replays=replays)))
    bad = sum(r["losses"] + len(r["bad_statuses"]) for r in rows)
    return 1 if bad else 0


def cmd_eval_pons(args: argparse.Namespace) -> int:
    from connectx_az.evaluation import grading, kaggle_io, reports
    from connectx_az.testsets import pons

    common.require_positive(args, "--limit", "--sims", "--act-timeout", zero_allowed=("--bank",))
    table: dict[str, Any] = {}
    control: dict[str, Any] = {}
    control_label = args.compare
    if args.submission:
        if args.compare:
            raise errors.UserError("--compare pairs two ONNX models; it cannot be used with --submission (give several "
                            "--submission files to pair builds)")
        for path in args.submission:
            if not Path(path).is_file():
                raise errors.UserError(f"{path} not found; run `make submission` first")
        common.require_runtime(args)
        kaggle_io.kaggle_like_process(args.runtime)
        for path in args.submission:  # a file that is not a submission, or whose network does not load, stops
            kaggle_io.check_network(path)  # here, before the positions
        files = len(args.submission)
        num_positions = pons.num_positions(args.sets, args.limit)
        # a move takes at most its clock and the bank, and executing the file (about 0.3 s) comes on top
        at_most = num_positions * files * (args.act_timeout + args.bank + 0.3)
        print(f"grading {num_positions:,} positions, {files} file{'s' if files > 1 else ''}, runtime {args.runtime}, "
              f"{args.act_timeout:g} s a move: at most about {bars.duration(at_most)} after a warm-up of a few seconds "
              "(book, solver and forced moves answer faster)", file=sys.stderr, flush=True)
        with bars.progress_bar(num_positions, "positions") as bar:
            graded = grading.submissions_mistake_rates(args.submission, limit=args.limit, sets=args.sets,
                                                    act_timeout=args.act_timeout, overage=args.bank,
                                                    on_position=lambda: bar.update(1))
        clock = reports.clock_label(args.act_timeout, args.bank, args.runtime)
        for name, results in zip(reports.file_labels(args.submission), graded, strict=True):
            table[(name if files > 1 else "submission") + clock] = results
        if files > 1:  # pair every later file with the first, on the same positions
            first, *later = table
            control = {mode: table[first] for mode in later}
            control_label = f"{first} ({args.submission[0]})"
    else:
        from connectx_az.agent.backends import OnnxRuntimeEvaluator

        common.require(args, *common.ONNXRUNTIME_EVALUATOR)
        # both models loaded, and checked to be networks of this package (ModelError: one line), before any grade
        evaluators = {model: OnnxRuntimeEvaluator(model) for model in (args.model, args.compare) if model}
        table = _grade_model(args.model, evaluators[args.model], args)
        if args.compare:
            control = _grade_model(args.compare, evaluators[args.compare], args)
    rows = reports.pons_rows(table, control)
    if args.json:
        print(json.dumps(rows))
        return 0
    print("\n".join(reports.grades_table(rows, control_label if control else None)))
    return 0


def cmd_eval_value(args: argparse.Namespace) -> int:
    from connectx_az.agent.backends import OnnxRuntimeEvaluator
    from connectx_az.evaluation import grading, reports
    from connectx_az.testsets import pons

    common.require_positive(args, "--limit")
    bands = tuple(args.bands)
    wrong = " ".join(f"{b:g}" for b in bands if not 0 <= b < 1)
    common.require_each((not wrong, f"--bands {wrong} must lie in [0, 1)"))
    common.require(args, *common.ONNXRUNTIME_EVALUATOR)
    graded: dict[str, list[Any]] = {}
    for label, model in zip(reports.file_labels(args.models), args.models, strict=True):
        evaluator = OnnxRuntimeEvaluator(model)
        with bars.progress_bar(len(args.sets or pons.SETS), "sets", desc=f"values of {Path(model).name}") as bar:
            graded[label] = grading.value_calibrations(evaluator, children=args.children, limit=args.limit,
                                                    sets=args.sets, bands=bands, on_set=lambda: bar.update(1))
    print(json.dumps(reports.value_json(graded)) if args.json else "\n".join(reports.value_table(graded, bands)))
    return 0


def cmd_eval_show(args: argparse.Namespace) -> int:
    from connectx_az.evaluation import reports

    tables = [(Path(path).stem, reports.load_graded(path)) for path in args.files]
    print("\n".join(reports.grades_table(reports.join_graded(tables), None)))
    return 0


def cmd_eval_paired(args: argparse.Namespace) -> int:
    from connectx_az.evaluation import grading, reports

    (label_a, rows_a), (label_b, rows_b) = (reports.graded_mode(spec) for spec in (args.a, args.b))
    try:
        counts = grading.paired(rows_a, rows_b)
    except (KeyError, TypeError) as exc:
        raise errors.UserError(f"not the output of `eval pons --json` (missing {exc}); rerun it to record "
                               "mistakes") from None
    except ValueError as exc:
        raise errors.UserError(str(exc)) from None
    if not counts:
        raise errors.UserError(f"{label_a} and {label_b} share no set")
    print(json.dumps(counts) if args.json else "\n".join(reports.paired_table(label_a, label_b, counts)))
    return 0


def _grade_model(model: str, evaluator: Any, args: argparse.Namespace) -> dict[str, list[Any]]:
    """``grading.grade_model`` of ONNX ``model`` (loaded as ``evaluator``) at ``args.sims``, with a progress bar on
    stderr that counts the work in network evaluations per position (``grading.grading_evals``)."""
    from connectx_az.evaluation import grading

    total = grading.grading_evals(args.sims, args.sets)
    with bars.progress_bar(total, "evals", desc=f"grading {Path(model).name}") as bar:
        return grading.grade_model(evaluator, sims=args.sims, limit=args.limit, sets=args.sets, on_evals=bar.update)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add this group's commands to ``sub``."""
    from connectx_az.evaluation import grading
    from connectx_az.testsets import pons  # numpy only: the set names for --sets

    p = sub.add_parser("validate", help="play the submission through kaggle-environments")
    p.add_argument("submission", nargs="?", default="build/submission.py",
                   help="the built file (default build/submission.py)")
    p.add_argument("--games", type=int, default=20, help="games per opponent and seat (default 20)")
    p.add_argument("--opponents", nargs="+", default=["random", "negamax"], choices=["random", "negamax"],
                   help="kaggle-environments' built-in agents to play (default: random negamax)")
    p.add_argument("--replays", help="folder for the HTML replays of the last game against each opponent and seat "
                   "(default build/replays/NAME, NAME the file's name without .py)")
    p.add_argument("--act-timeout", type=float,
                   help="seconds a move instead of Kaggle's 2 (the bank scales with it): quick checks only")
    common.add_runtime(p)
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("eval", help="accuracy against perfect play")
    esub = p.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    e = esub.add_parser("pons", help="mistake rates on the six Pons sets")
    e.add_argument("--model", default=str(paths.DEFAULT_MODEL),
                   help="ONNX model: raw policy, MCTS and the value head's W/D/L accuracy")
    e.add_argument("--compare", metavar="CONTROL",
                   help="also grade this ONNX model and pair the two on each set: how many positions each "
                        "gets right that the other misses")
    e.add_argument("--sims", type=int, nargs="*", default=[64, 200], help="MCTS simulation counts")
    e.add_argument("--submission", nargs="+", metavar="PATH",
                   help="grade this built submission.py under the Kaggle clock instead (one core, loaded afresh "
                        "per position); several files are graded in turns on each position and each later one "
                        "is paired with the first")
    e.add_argument("--act-timeout", type=float, default=2.0, help="seconds a move for --submission")
    common.add_runtime(e)
    e.add_argument("--bank", type=float, default=0.0,
                   help="overage bank the agent sees for --submission (default 0: the plain 2 s a move)")
    e.add_argument("--limit", type=int, help="positions per set (default: all)")
    e.add_argument("--sets", nargs="+", choices=list(pons.SETS), metavar="SET",
                   help=f"only these sets (default all: {', '.join(pons.SETS)})")
    e.add_argument("--json", action="store_true",
                   help="one JSON object, with the positions each mode got wrong (for `eval show` and `eval paired`)")
    e.set_defaults(func=cmd_eval_pons)
    e = esub.add_parser("value", help="the value head against the true results: W/D/L accuracy at several draw "
                            "bands, its sign on decisive positions, mean value and confusion of each result")
    e.add_argument("--models", nargs="+", default=[str(paths.DEFAULT_MODEL)], metavar="MODEL",
                   help="ONNX models (default: the shipped one)")
    e.add_argument("--bands", type=float, nargs="+", default=list(grading.VALUE_BANDS), metavar="B",
                   help="draw bands to read the classes at (v > B a win, v < -B a loss; default: 1/3, as "
                        "`eval pons`, then 0.2 0.1 0.05)")
    e.add_argument("--children", action="store_true",
                   help="the positions one move after the annotated ones instead of the sets' own")
    e.add_argument("--limit", type=int, help="positions per set (default: all)")
    e.add_argument("--sets", nargs="+", choices=list(pons.SETS), metavar="SET",
                   help=f"only these sets (default all: {', '.join(pons.SETS)})")
    e.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    e.set_defaults(func=cmd_eval_value)
    e = esub.add_parser("show", help="the table of saved `eval pons --json` outputs, their modes together "
                            "(each row labelled FILE:MODE where two files grade the same mode on a set)")
    e.add_argument("files", nargs="+", metavar="FILE", help="outputs of `eval pons --json`")
    e.set_defaults(func=cmd_eval_show)
    e = esub.add_parser("paired", help="paired counts of two `eval pons --json` gradings of the same positions")
    e.add_argument("a", metavar="A", help="FILE[:MODE]: the output of `eval pons --json`, and which of its modes "
                   "(e.g. arm.json:mcts800; may be left out when the file holds one)")
    e.add_argument("b", metavar="B", help="the same for the other arm, graded on the same positions")
    e.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    e.set_defaults(func=cmd_eval_paired)
