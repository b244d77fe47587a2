"""The commands of games: ``arena`` (a round robin with Elo), ``duel`` (the built file against the solver) and
``play`` (in the terminal)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from connectx_az import errors, extras, paths
from connectx_az.cli import bars, common


def cmd_arena(args: argparse.Namespace) -> int:
    from connectx_az.evaluation import arena
    from connectx_az.evaluation import players as reference

    common.require_positive(args, "--games", "--sims", "--act-timeout", zero_allowed=("--opening-plies",))
    common.require(args, *(common.ONNXRUNTIME_EVALUATOR if args.model else ()),
                   *(("kaggle_environments",) if args.builtin else ()))
    try:
        players = reference.lineup(models=args.model, simulations=args.sims, submissions=args.submission,
                                   alphabeta_depths=args.alphabeta, builtins=args.builtin)
    except ValueError as exc:
        raise errors.UserError(str(exc)) from None
    if len(players) < 2:
        raise errors.UserError(f"the arena needs at least two players, got {len(players)}")

    log = logging.getLogger("connectx_az.evaluation.arena")
    results = arena.round_robin(players, args.games, act_timeout=args.act_timeout, opening_plies=args.opening_plies,
                                seed=args.seed, on_game=lambda r: log.info("%s vs %s: %s (%s, %d plies)", r.first,
                                                                           r.second, r.score, r.reason, r.num_plies))
    summary = arena.report(results, list(players), seed=args.seed)
    print(json.dumps(arena.report_json(summary, results)) if args.json else
          "\n".join(arena.format_report(summary, list(players), games=args.games, opening_plies=args.opening_plies)))
    return 0


def cmd_duel(args: argparse.Namespace) -> int:
    from connectx_az.evaluation import duel, kaggle_io

    common.require_positive(args, "--games", "--act-timeout")
    common.require_each((0 <= args.noise <= 1, f"--noise {args.noise:g} must lie in [0, 1]"),
                        (args.max_nodes >= 1, f"--max-nodes {args.max_nodes:g} must be 1 or more"))
    if not Path(args.submission).is_file():
        raise errors.UserError(f"{args.submission} not found; run `make submission` first")
    try:  # every setting checked before the first line of output
        duel.check_settings(games_per_seat=args.games, noise=args.noise, act_timeout=args.act_timeout,
                            opening=args.opening)
    except duel.DuelError as exc:
        raise errors.UserError(str(exc)) from None
    common.require_runtime(args)
    if args.solver == "numba" and not extras.is_installed("numba"):  # the pure-Python referee is far slower
        needed_by = "`connectx-az duel` (its opponent and its checks solve positions)"
        raise extras.MissingPackage(f"{extras.missing_message(['numba'], needed_by)}; or --solver python, far "
                                    "slower", name="numba")
    # a file that is not a submission, or whose network does not load: one line (SubmissionError)
    kaggle_io.check_network(args.submission)
    print(f"duel: {2 * args.games} games, runtime {args.runtime}, {args.act_timeout:g} s a move; the opponent's and "
          "the checks' solver " + ("compiled (numba)" if args.solver == "numba" else "in pure Python (slow)")
          + f"; the first games prove the opening plies, later ones reuse {args.cache}", file=sys.stderr, flush=True)

    def on_game(played: duel.DuelGame) -> None:
        bar.update(1)
        if not args.json:
            print(duel.format_game(played), flush=True)

    args.kept = f"the positions the referee proved are kept in {args.cache}: the same command plays again faster"
    with bars.progress_bar(2 * args.games, "games") as bar:
        try:
            report = duel.duel(args.submission, games_per_seat=args.games, noise=args.noise, runtime=args.runtime,
                               seed=args.seed, cache_path=args.cache, max_nodes=int(args.max_nodes),
                               solver_kind=args.solver, opening=args.opening, act_timeout=args.act_timeout,
                               on_game=on_game)
        except duel.DuelError as exc:
            raise errors.UserError(str(exc)) from None
    print(json.dumps(report.as_dict()) if args.json else duel.format_summary(report))
    return 1 if report.failed else 0


def cmd_play(args: argparse.Namespace) -> int:
    from connectx_az.evaluation import players, terminal

    common.require_positive(args, "--sims")
    common.require(args, *common.ONNXRUNTIME_EVALUATOR)
    terminal.play(players.model_player(args.model, args.sims), human_first=args.first)
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add this group's commands to ``sub``."""
    p = sub.add_parser("arena", help="round robin of models, submissions and reference players, with Elo")
    p.add_argument("--model", nargs="*", default=[str(paths.DEFAULT_MODEL)], metavar="PATH",
                   help="ONNX models played by MCTS at --sims (default: the shipped model)")
    p.add_argument("--submission", nargs="*", default=[], metavar="PATH", help="built submission.py files")
    p.add_argument("--alphabeta", nargs="*", type=int, default=[4], metavar="DEPTH",
                   help="reference alpha-beta players of these depths (default 4)")
    p.add_argument("--builtin", nargs="*", choices=["random", "negamax"], default=["random", "negamax"],
                   help="kaggle-environments' agents (default: both); give a flag no values to leave a group out")
    p.add_argument("--games", type=int, default=10, help="games per pair, seats alternating (default 10)")
    p.add_argument("--sims", type=int, default=200, help="MCTS simulations a move for --model (default 200)")
    p.add_argument("--act-timeout", type=float, default=2.0,
                   help="seconds a move, with a bank of 30 times as much for overruns (default 2)")
    p.add_argument("--opening-plies", type=int, default=2, help="random moves opening each pair of games")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the openings, random players and Elo bootstrap (default 0)")
    p.add_argument("--json", action="store_true", help="one JSON object: ratings, pairs, games")
    p.set_defaults(func=cmd_arena)

    p = sub.add_parser("duel", help="the built file against a perfect opponent (the solver, random at --noise), "
                       "both seats, under the Kaggle clock; every move of the file checked by the solver")
    p.add_argument("submission", nargs="?", default="build/submission.py",
                   help="the built file (default build/submission.py)")
    p.add_argument("--games", type=int, default=10, help="games a seat, seats alternating (default 10)")
    p.add_argument("--noise", type=float, default=0.2,
                   help="probability that the opponent plays a random legal column (default 0.2)")
    common.add_runtime(p)
    p.add_argument("--seed", type=int, default=0, help="seed of the opponent's choices (default 0)")
    p.add_argument("--cache", default="build/duel_cache.sqlite",
                   help="file of solved positions, kept across runs (default build/duel_cache.sqlite)")
    p.add_argument("--max-nodes", type=float, default=1e9,
                   help="solver budget a position; a move of the file it cannot prove is reported unchecked "
                        "(default 1e9: one to two minutes compiled)")
    p.add_argument("--solver", choices=["numba", "python"], default="numba",
                   help="the opponent's and the checks' solver (default numba: compiled where numba imports)")
    p.add_argument("--opening", default="", metavar="MOVES",
                   help="start every game after these moves (Pons notation, 1-based columns, e.g. 43333)")
    p.add_argument("--act-timeout", type=float, default=2.0,
                   help="seconds a move, with a bank of 30 times as much (default 2: Kaggle's clock)")
    p.add_argument("--json", action="store_true", help="one JSON object: every game, then the summary")
    p.set_defaults(func=cmd_duel)

    p = sub.add_parser("play", help="play the agent in the terminal")
    p.add_argument("--model", default=str(paths.DEFAULT_MODEL), help="ONNX model (default: the shipped model)")
    p.add_argument("--sims", type=int, default=400, help="MCTS simulations a move (default 400)")
    p.add_argument("--first", action="store_true", help="you move first (default: the agent does)")
    p.set_defaults(func=cmd_play)
