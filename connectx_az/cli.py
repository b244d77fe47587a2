"""``connectx-az``: the command line.

Each command imports what it needs when it runs, so ``build`` works with numpy
alone and ``--help`` is instant.  Expected failures (bad paths, bad configs,
corrupt models, files that are not submissions, optional packages not installed)
print one line starting with ``error:`` and exit with status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

from connectx_az import extras

DEFAULT_MODEL = Path(__file__).parent / "models" / "default.onnx"
DEFAULT_CARD = Path(__file__).parent / "models" / "default.json"
DEFAULT_CHECKPOINT = Path(__file__).parent / "models" / "default.pt"
BENCH_SOLVER_LIMIT = 40
DEFAULT_BOOK = Path(__file__).parent / "data" / "book" / "book.bin"


#: what ``export.OnnxRuntimeEvaluator`` (a model run by onnxruntime) imports
ONNXRUNTIME_EVALUATOR = ("onnxruntime", "onnx", "torch")


class UserError(Exception):
    """An error the user can fix; printed as one line."""


def _user_errors() -> tuple[type[BaseException], ...]:
    from connectx_az.evaluation.kaggle_sandbox import SubmissionError
    from connectx_az.evaluation.reports import ReportError

    errors: list[type[BaseException]] = [UserError, FileNotFoundError, PermissionError, extras.MissingPackage,
                                         SubmissionError, ReportError]
    # A build-only set-up has numpy alone: the error types of modules that need torch
    # cannot have been raised there, so a failed import just leaves them out.
    try:
        from connectx_az.training.config import ConfigError
        from connectx_az.training.network import CheckpointError

        errors += [ConfigError, CheckpointError]
    except ImportError:
        pass
    # a command that never imported export cannot have raised its error
    export = sys.modules.get("connectx_az.training.export")
    if export is not None:
        errors.append(export.ModelError)
    from connectx_az.agent.builder import BuildError
    from connectx_az.cards import CardError
    from connectx_az.evaluation.compare import CompareError

    errors += [BuildError, CardError, CompareError]
    return tuple(errors)


def _require(args: argparse.Namespace, *modules: str) -> None:
    """Stop with one line naming those of ``modules`` (``extras.PACKAGES``) not installed, and how to install them."""
    extras.require(*modules, needed_by=f"`connectx-az {_command(args)}`")


def _require_runtime(args: argparse.Namespace) -> None:
    """Stop with one line where ``--runtime kaggle`` asks for numba and numba is not installed: the file would
    quietly play with its pure-Python solver, the ``numpy`` case, under the ``kaggle`` label."""
    if args.runtime == "kaggle" and not extras.is_installed("numba"):
        needed_by = f"`connectx-az {_command(args)} --runtime kaggle`"
        raise extras.MissingPackage(f"{extras.missing_message(['numba'], needed_by)}; or use --runtime numpy",
                                    name="numba")


def _command(args: argparse.Namespace) -> str:
    """The command as typed, e.g. ``eval pons`` or ``bench solver``."""
    return " ".join(str(getattr(args, key)) for key in ("command", "benchmark", "what") if getattr(args, key, None))


# --------------------------------------------------------------------------- commands


def cmd_train(args: argparse.Namespace) -> int:
    _require(args, "torch", "tqdm")
    from connectx_az.training import config, runs, train

    budget = runs.parse_duration(args.time_budget) if args.time_budget is not None else None
    if args.resume:
        cfg = config.override(config.load_config(args.resume), args.set) if args.set else None
        if args.show_config:
            print(json.dumps(config.to_dict(cfg or config.load_config(args.resume)), indent=2))
            return 0
        ckpt = train.run(args.resume, cfg, resume=True, num_generations=args.generations, progress=not args.quiet,
                         threads=args.threads, device=args.device, time_budget=budget, keep_every=args.keep_every)
    else:
        cfg = config.make_config(args.preset, toml_path=args.config, overrides=args.set)
        if args.init_model and cfg.net == config.make_config(args.preset).net:
            warm = train.warm_start_config(cfg, args.init_model)
            if warm.net != cfg.net:
                print(f"warm start: the {warm.net.label} network of {args.init_model} (set net.* for another of "
                      "the same filters)")
            cfg = warm
        if args.show_config:
            print(json.dumps(config.to_dict(cfg), indent=2))
            return 0
        ckpt = train.run(args.run_dir, cfg, init_model=args.init_model, num_generations=args.generations,
                         progress=not args.quiet, threads=args.threads, device=args.device, time_budget=budget,
                         keep_every=args.keep_every)
    print(f"checkpoint: {ckpt}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    _require(args, "torch", "onnx", "tqdm")
    from connectx_az.training import export
    from connectx_az.training.config import save_json
    from connectx_az.training.network import load_checkpoint, save_checkpoint

    ckpt = _checkpoint_path(args.checkpoint)
    net, data = load_checkpoint(ckpt)
    report = export.export_onnx(net, args.out, float16=args.float16)
    print(f"wrote {report.path} ({report.num_bytes:,} bytes, sha256 {report.sha256[:16]}..., "
          f"torch vs onnxruntime max abs diff {report.max_abs_diff:.2e})")
    card_path = Path(args.out).with_suffix(".json")
    save_json(export.checkpoint_card(report.path, net, ckpt, data), card_path)
    print(f"wrote {card_path} (model card)")
    if args.weights_out:
        save_checkpoint(args.weights_out, net, generation=data.get("generation"), config=data.get("config"))
        print(f"wrote {args.weights_out} (weights for --init-model warm starts)")
    return 0


def _checkpoint_path(path: str) -> Path:
    p = Path(path)
    return p / "checkpoint.pt" if p.is_dir() else p


def cmd_build(args: argparse.Namespace) -> int:
    from connectx_az import cards
    from connectx_az.agent import builder

    model = Path(args.model)
    metadata = cards.load(Path(args.card) if args.card else model.with_suffix(".json"))
    book = None if args.no_book else Path(args.book)
    report = builder.build_submission(model, args.out, metadata=metadata, book_path=book,
                                      torch_backend=args.torch_backend)
    print(f"wrote {report.path} ({report.num_bytes / 1e6:.2f} MB)")
    summary = cards.summary_lines(metadata, model=model, sha256=report.model_sha256, net_label=report.net_label)
    print(summary[0])
    print(f"book: {book.name}, {report.book_entries:,} positions ({report.book_bytes / 1e3:.1f} kB)" if book
          else "book: none (--no-book)")
    for line in summary[1:]:
        print(line)
    return 0


def cmd_card(args: argparse.Namespace) -> int:
    from connectx_az import cards

    path = Path(args.model)
    if not path.is_file():
        raise UserError(f"{path} not found")
    if path.suffix not in (".onnx", ".json"):
        raise UserError(f"{path} is neither an ONNX model nor its .json card")
    card_path = path if path.suffix == ".json" else path.with_suffix(".json")
    card = cards.load(card_path)
    if not card:
        raise UserError(f"no model card in {card_path}: `connectx-az export` writes one beside the model it exports")
    print(json.dumps(card, indent=2) if args.json else "\n".join(cards.describe(card)))
    return 0


def cmd_book(args: argparse.Namespace) -> int:
    from connectx_az.agent import book_build
    from connectx_az.engine import game, solver

    try:
        root = game.from_moves(args.root)
    except ValueError as exc:
        raise UserError(f"--root {args.root}: {exc}") from exc
    if args.workers is None:
        args.workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if args.depth < 0 or args.workers < 1 or not 10 <= min(args.table_bits, args.deep_table_bits) <= 30 \
            or max(args.table_bits, args.deep_table_bits) > 30:
        raise UserError("--depth must be >= 0, --workers >= 1 and the table bits in 10..30")
    if args.workers > 1 and "fork" not in multiprocessing.get_all_start_methods():
        raise UserError("--workers above 1 needs processes started by fork (Linux, macOS); use --workers 1")
    try:
        state = book_build.State.open(args.state, exact_factor=args.exact_factor,
                                      exact_min_nodes=args.exact_min_nodes)
    except (book_build.StateError, OSError) as exc:
        raise UserError(str(exc)) from exc
    with state:
        if state.dropped_tail:
            print(f"{state.path}: dropped a last record cut short by a kill ({state.dropped_tail} bytes); its "
                  "position is proven again")
        prover = book_build.Provers(solver.Solver()) if args.python else book_build.default_provers(
            table_bits=args.table_bits, deep_table_bits=args.deep_table_bits, deep_plies=args.deep_plies)
        print(f"{state.path}: {len(state.entries):,} positions proven before; proving plies up to {args.depth}"
              + (f" and every position up to ply {args.all_plies}" if args.all_plies >= 0 else "")
              + f" with {type(prover.fast).__name__}" + (f" x {args.workers}" if args.workers > 1 else ""))
        bar: Any = _NoBar()

        def progress(p: book_build.Progress) -> None:
            nonlocal bar
            if p.done == 0:
                bar.__exit__(None, None, None)
                bar = _progress(p.total, "positions", desc=f"ply {p.ply} of {p.depth}")
                bar.__enter__()
            else:
                bar.update(1)
            if p.seconds_left is not None and hasattr(bar, "set_postfix_str"):
                bar.set_postfix_str(f"build left ~{p.seconds_left / 3600:.1f} h", refresh=False)

        def ply_done(ply: int, stats: book_build.BuildStats) -> None:
            bar.__exit__(None, None, None)
            path, entries, size = book_build.write_book(state, args.out)
            print(f"ply {ply}: {stats.tree[ply]:,} agent's nodes, {stats.entries[ply]:,} needing a move; wrote "
                  f"{path}: {entries:,} positions, {size:,} bytes; this run {stats.proven:,} proven in "
                  f"{stats.cpu_seconds / 3600:.2f} CPU-h", flush=True)

        try:
            stats = book_build.build(state, depth=args.depth, all_plies=args.all_plies, root=root, prover=prover,
                                     workers=args.workers, on_progress=progress, on_ply=ply_done)
        finally:
            bar.__exit__(None, None, None)
        hours = sum(e.cpu_seconds for e in state.entries.values()) / 3600
        print(f"{state.path}: {len(state.entries):,} positions, {hours:.2f} CPU-h in all")
        if stats.interrupted:
            print("interrupted: what was proven is saved; run the same command to go on")
            return 130
        if args.frontier:
            for share in book_build.frontier_shares(state, args.depth, limit=args.frontier, seed=args.seed,
                                                    root=root):
                print(share.describe(), flush=True)
    return 0


def cmd_label(args: argparse.Namespace) -> int:
    from connectx_az.engine import solver_numba
    from connectx_az.training import solved

    if args.positions is not None and args.positions < 1 or args.seconds is not None and not args.seconds > 0:
        raise UserError("--positions and --seconds must be positive")
    if args.max_nodes < 1 or args.workers < 1:
        raise UserError("--max-nodes and --workers must be positive")
    if args.retry_unproven and not args.moves:
        raise UserError("--retry-unproven retries best moves: add --moves")
    if args.workers > 1 and "fork" not in multiprocessing.get_all_start_methods():
        raise UserError("--workers above 1 needs processes started by fork (Linux, macOS); use --workers 1")
    out = Path(args.out)
    try:
        before = solved.open_file(out)
    except solved.LabelsError as exc:
        raise UserError(f"{exc}; choose another file to write") from exc
    seconds = 60.0 if args.seconds is None and args.positions is None else args.seconds
    prover = solver_numba.make_solver()
    if args.moves:  # the file's positions that lack their best moves get them first
        lacking = int(before.moves_to_seek(args.retry_unproven).sum())
        with _progress(lacking, "positions", desc=f"best moves in {out.name}") as bar:
            before, fill = solved.add_moves_to_file(out, before, max_nodes=args.max_nodes, seconds=seconds,
                                                    prover=prover, workers=args.workers,
                                                    retry_unproven=args.retry_unproven,
                                                    on_progress=lambda stats: bar.update(stats.tried - bar.n))
        if fill.tried:
            print(f"best moves of {fill.with_moves:,} of the {lacking:,} positions of {out} that lacked them "
                  f"({fill.unproven:,} unproven within {args.max_nodes:,} nodes) in {fill.seconds:.0f} s")
        if fill.interrupted:
            print("interrupted: what was proven is saved; run the same command to add more")
            return 130
        if seconds is not None:
            seconds -= fill.seconds
            if seconds <= 0:
                return 0
    with _progress(args.positions or 0, "positions", desc=f"proving into {out.name}") as bar:
        try:
            whole, stats = solved.label_into_file(out, before, num_positions=args.positions, seconds=seconds,
                                                  min_plies=args.plies[0], max_plies=args.plies[1],
                                                  max_nodes=args.max_nodes, seed=args.seed, moves=args.moves,
                                                  prover=prover, workers=args.workers,
                                                  on_progress=lambda stats: bar.update(stats.kept - bar.n))
        except ValueError as exc:
            raise UserError(str(exc)) from exc
        bar.update(stats.kept - bar.n)
    wins, draws, losses = whole.counts()
    moves = f", {stats.with_moves:,} with their best moves" if args.moves else ""
    print(f"wrote {out}: {len(whole):,} positions (W/D/L {wins:,}/{draws:,}/{losses:,}); {stats.kept:,} new of "
          f"{stats.tried:,} tried ({stats.unproven:,} unproven within {args.max_nodes:,} nodes{moves}) in "
          f"{stats.seconds:.0f} s, {type(prover).__name__}" + (f" x {args.workers}" if args.workers > 1 else ""))
    if stats.interrupted:
        print("interrupted: what was proven is saved; run the same command to add more")
        return 130
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from connectx_az.evaluation import kaggle_io, reports

    if not Path(args.submission).is_file():
        raise UserError(f"{args.submission} not found; run `make submission` first")
    _require(args, "kaggle_environments")
    _require_runtime(args)
    kaggle_io.kaggle_like_process(args.runtime)
    kaggle_io.load_submission(args.submission)  # a file that is not a submission stops here, before the games
    # each file's replays in a folder of its own: a broken file's games never replace a good one's
    replays = args.replays or str(Path("build") / "replays" / Path(args.submission).stem)
    with _progress(2 * len(args.opponents) * args.games, "games") as bar:
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
    from connectx_az.evaluation import kaggle_io, pons, reports

    table: dict[str, Any] = {}
    control: dict[str, Any] = {}
    control_label = args.compare
    if args.submission:
        if args.compare:
            raise UserError("--compare pairs two ONNX models; it cannot be used with --submission (give several "
                            "--submission files to pair builds)")
        for path in args.submission:
            if not Path(path).is_file():
                raise UserError(f"{path} not found; run `make submission` first")
        _require_runtime(args)
        kaggle_io.kaggle_like_process(args.runtime)
        for path in args.submission:  # a file that is not a submission stops here, before the positions
            kaggle_io.load_submission(path)
        files = len(args.submission)
        num_positions = pons.num_positions(args.sets, args.limit)
        # a move takes at most its clock and the bank, and executing the file (about 0.3 s) comes on top
        at_most = num_positions * files * (args.act_timeout + args.bank + 0.3)
        print(f"grading {num_positions:,} positions, {files} file{'s' if files > 1 else ''}, runtime {args.runtime}, "
              f"{args.act_timeout:g} s a move: at most about {_duration(at_most)} after a warm-up of a few seconds "
              "(book, solver and forced moves answer faster)", file=sys.stderr, flush=True)
        with _progress(num_positions, "positions") as bar:
            graded = pons.submissions_mistake_rates(args.submission, limit=args.limit, sets=args.sets,
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
        _require(args, *ONNXRUNTIME_EVALUATOR)
        table = _grade_model(args.model, args)
        if args.compare:
            control = _grade_model(args.compare, args)
    rows = reports.pons_rows(table, control)
    if args.json:
        print(json.dumps(rows))
        return 0
    print("\n".join(reports.grades_table(rows, control_label if control else None)))
    return 0


def cmd_eval_value(args: argparse.Namespace) -> int:
    from connectx_az.evaluation import pons, reports
    from connectx_az.training.export import OnnxRuntimeEvaluator

    bands = tuple(args.bands)
    if any(not 0 <= b < 1 for b in bands):
        raise UserError(f"--bands must lie in [0, 1), not {' '.join(f'{b:g}' for b in bands)}")
    _require(args, *ONNXRUNTIME_EVALUATOR)
    graded: dict[str, list[Any]] = {}
    for label, model in zip(reports.file_labels(args.models), args.models, strict=True):
        evaluator = OnnxRuntimeEvaluator(model)
        with _progress(len(args.sets or pons.SETS), "sets", desc=f"values of {Path(model).name}") as bar:
            graded[label] = pons.value_calibrations(evaluator, children=args.children, limit=args.limit,
                                                    sets=args.sets, bands=bands, on_set=lambda: bar.update(1))
    print(json.dumps(reports.value_json(graded)) if args.json else "\n".join(reports.value_table(graded, bands)))
    return 0


def cmd_eval_show(args: argparse.Namespace) -> int:
    from connectx_az.evaluation import reports

    tables = [(Path(path).stem, reports.load_graded(path)) for path in args.files]
    print("\n".join(reports.grades_table(reports.join_graded(tables), None)))
    return 0


def cmd_eval_paired(args: argparse.Namespace) -> int:
    from connectx_az.evaluation import pons, reports

    (label_a, rows_a), (label_b, rows_b) = (reports.graded_mode(spec) for spec in (args.a, args.b))
    try:
        counts = pons.paired(rows_a, rows_b)
    except (KeyError, TypeError) as exc:
        raise UserError(f"not the output of `eval pons --json` (missing {exc}); rerun it to record mistakes") from None
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if not counts:
        raise UserError(f"{label_a} and {label_b} share no set")
    print(json.dumps(counts) if args.json else "\n".join(reports.paired_table(label_a, label_b, counts)))
    return 0


def _grade_model(model: str, args: argparse.Namespace) -> dict[str, list[Any]]:
    """``pons.grade_model`` of ONNX ``model`` at ``args.sims``, with a progress bar on stderr that counts the
    work in network evaluations per position (``pons.grading_evals``)."""
    from connectx_az.evaluation import pons
    from connectx_az.training.export import OnnxRuntimeEvaluator

    evaluator = OnnxRuntimeEvaluator(model)
    with _progress(pons.grading_evals(args.sims, args.sets), "evals", desc=f"grading {Path(model).name}") as bar:
        return pons.grade_model(evaluator, sims=args.sims, limit=args.limit, sets=args.sets, on_evals=bar.update)


class _NoBar:
    """A bar that counts (``n``) and shows nothing."""

    def __init__(self) -> None:
        self.n = 0

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int) -> None:
        self.n += n


class _LineBar(_NoBar):
    """What ``_progress`` gives without tqdm: a plain line on stderr at the first step and then every
    ``interval`` seconds, with the count, the time spent and, where the total is known, the time left."""

    interval = 30.0

    def __init__(self, total: int, unit: str, desc: str) -> None:
        super().__init__()
        self.total, self.unit, self.desc = total, unit, desc
        self._start = time.monotonic()
        self._shown: float | None = None

    def update(self, n: int) -> None:
        super().update(n)
        now = time.monotonic()
        if self._shown is not None and now - self._shown < self.interval:
            return
        self._shown = now
        spent = now - self._start
        count = f"{self.n:,}/{self.total:,}" if self.total else f"{self.n:,}"
        left = (f", about {_duration(spent / self.n * (self.total - self.n))} left"
                if self.total and 0 < self.n < self.total else "")
        print(f"{self.desc}: {count} {self.unit}, {_duration(spent)}{left}", file=sys.stderr, flush=True)


def _duration(seconds: float) -> str:
    """``seconds`` in words a person reads at a glance: 45 s, 12 min, 3.4 h."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def _progress(total: int, unit: str, desc: str | None = None) -> Any:
    """A tqdm bar on stderr where tqdm is installed, else a plain line now and then (``_LineBar``; a build-only
    set-up lacks tqdm)."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _LineBar(total, unit, desc or unit)
    return tqdm(total=total, unit=unit[:-1] if unit.endswith("s") else unit, desc=desc or unit, leave=False)


def _add_runtime(parser: argparse.ArgumentParser) -> None:
    from connectx_az.evaluation.kaggle_io import RUNTIMES

    parser.add_argument("--runtime", choices=list(RUNTIMES), default="numpy",
                        help="what the agent may import: numpy (default; onnxruntime, torch and numba blocked: "
                             "the worst case), kaggle (onnxruntime blocked: numba and torch as Kaggle's image most "
                             "likely has them), full (everything installed here)")


def cmd_plot(args: argparse.Namespace) -> int:
    _require(args, "matplotlib", "torch", "tqdm")  # plots reads the metrics with train's reader
    from connectx_az.training import plots

    paths = plots.plot_run(args.run_dir, args.out)
    for p in paths:
        print(f"wrote {p}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from connectx_az.evaluation import bench

    if args.what == "solver":
        return cmd_bench_solver(args)
    if args.what == "clock":
        return cmd_bench_clock(args)
    if args.what == "gpu":
        return cmd_bench_gpu(args)
    if args.what == "precision":
        return cmd_bench_precision(args)
    if args.what == "selfplay":
        _require(args, "torch", "onnx", "tqdm")
    else:
        _check_agent_model(args.model)
    result = bench.run(args.what, model=args.model, seconds=args.seconds or 5.0, batches=args.batch,
                       workers=args.workers, preset=args.preset or "cpu", evaluator=args.evaluator, device=args.device,
                       precision=args.precision, game_repeats=args.game)
    print(json.dumps(result) if args.json else bench.format_result(args.what, result))
    return 0


def cmd_bench_precision(args: argparse.Namespace) -> int:
    _require(args, "torch", "onnx", "tqdm")
    from connectx_az.evaluation import bench_precision

    checkpoint = Path(args.checkpoint or DEFAULT_CHECKPOINT)
    if not checkpoint.is_file():
        raise UserError(f"--checkpoint {checkpoint} does not exist; pass a .pt file written by training")
    limit = None if args.limit == BENCH_SOLVER_LIMIT else args.limit  # the solver's default is not this one's
    if limit is not None and limit <= 0 or args.sims < 0:
        raise UserError("--limit must be positive and --sims not negative")
    print(f"float32 and bfloat16 on the Pons positions{f', MCTS {args.sims}' if args.sims else ''}, then the speed "
          "of each (pin to one idle core: taskset -c 1)", file=sys.stderr if args.json else sys.stdout, flush=True)
    result = bench_precision.run(checkpoint, limit=limit, sets=args.sets, sims=args.sims, seconds=args.seconds or 6.0)
    print(json.dumps(result) if args.json else bench_precision.format_result(result))
    return 0


def cmd_bench_gpu(args: argparse.Namespace) -> int:
    _require(args, "torch", "onnx", "tqdm")
    from connectx_az.evaluation import bench_gpu

    if not args.budget > 0:
        raise UserError(f"--budget must be a positive number of seconds, not {args.budget:g}")
    check = bench_gpu.CheckConfig(preset=args.preset or "gpu", device=args.device or "auto", budget=args.budget,
                                  generations=args.generations, seconds=args.seconds or 3.0)
    out = Path(args.out or "build/gpu-check")
    print(f"GPU check into {out} (budget {args.budget:g} s; progress in {out / 'gpu_check.log'})", flush=True)
    record = bench_gpu.run(out, check)
    print(json.dumps(record) if args.json else bench_gpu.format_result(record))
    print(f"wrote {out / 'gpu_check.json'}")
    return 0 if all(s["status"] != "failed" for s in record["steps"].values()) else 1


def cmd_compare(args: argparse.Namespace) -> int:
    from connectx_az import cards
    from connectx_az.evaluation import compare

    sizes = compare.QUICK if args.quick else compare.FULL
    changes = {k: v for k, v in (("limit", args.limit), ("games", args.games), ("network_limit", args.limit),
                                 ("act_timeout", args.act_timeout)) if v is not None}
    if any(v <= 0 for v in changes.values()):
        raise UserError("--limit, --games and --act-timeout must be positive")
    if args.duel_opening:
        changes["duel_opening"] = args.duel_opening
    sizes = compare.Sizes(**{**dataclasses.asdict(sizes), **changes})
    candidate = Path(args.candidate)
    out = Path(args.out or f"build/compare/{candidate.stem or candidate.name}{'-quick' if args.quick else ''}")
    print(f"compare into {out} ({sizes.label}); a killed compare resumes where it stopped", flush=True)
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
    if run:
        from connectx_az.training import runs, train

        run_dir = Path(run)
        if not (run_dir / runs.METRICS).is_file() or not (run_dir / "config.json").is_file():
            raise UserError(f"--run {run_dir}: not a training run folder (no {runs.METRICS} and config.json)")
        card["training"] = train.summarize(runs.read_metrics(run_dir), json.loads((run_dir / "config.json").read_text()))
        card["trained_by"] = card["training"].pop("command")
        card["generation"] = card["training"]["generations"]
    return card


def _check_agent_model(model: str) -> None:
    """Stop with one line where ``model`` is no ONNX model the agent's numpy runtime can read."""
    from connectx_az.agent import onnx_numpy

    path = Path(model)
    if not path.is_file():
        raise UserError(f"model {path} not found; pass --model PATH.onnx")
    try:
        onnx_numpy.NumpyOnnxModel(path.read_bytes())
    except ValueError as exc:
        raise UserError(f"model {path} cannot run in the agent: {exc}") from None


def cmd_bench_clock(args: argparse.Namespace) -> int:
    from connectx_az.evaluation import bench_clock

    if not hasattr(os, "sched_setaffinity"):
        raise UserError("bench clock pins processes to a core (os.sched_setaffinity): Linux only")
    _check_agent_model(args.model)
    result = bench_clock.bench_clock(args.model)
    print(json.dumps(result) if args.json else bench_clock.format_clock(result))
    return 0


def cmd_bench_solver(args: argparse.Namespace) -> int:
    from connectx_az.evaluation import bench, pons

    if args.deadline <= 0 or args.limit is not None and args.limit <= 0:
        raise UserError("--deadline and --limit must be positive")
    if "numba" in args.solvers:
        _require(args, "numba")
    sets = tuple(args.sets or bench.SOLVER_SETS)
    solvers = tuple(args.solvers)
    budgets = (*(b for b in bench.SOLVER_BUDGETS if b < args.deadline), args.deadline)
    with _progress(len(solvers) * pons.num_positions(sets, args.limit), "positions") as bar:
        result = bench.bench_solver(limit=args.limit, sets=sets, budgets=budgets, solvers=solvers,
                                    on_position=lambda: bar.update(1))
    print(json.dumps(result) if args.json else bench.format_solver_result(result))
    return 0


def cmd_arena(args: argparse.Namespace) -> int:
    from connectx_az.evaluation import arena
    from connectx_az.evaluation import players as reference

    if args.games < 1 or args.sims < 1 or args.opening_plies < 0 or not args.act_timeout > 0:
        raise UserError("--games and --sims must be >= 1, --opening-plies >= 0 and --act-timeout > 0")
    _require(args, *(ONNXRUNTIME_EVALUATOR if args.model else ()), *(("kaggle_environments",) if args.builtin else ()))
    players: dict[str, reference.Player] = {}

    def add(name: str, make: Any, *make_args: Any) -> None:
        unique, k = name, 2
        while unique in players:
            unique, k = f"{name}#{k}", k + 1
        players[unique] = make(*make_args)

    for path in args.model:
        add(f"{Path(path).stem}@{args.sims}", reference.model_player, path, args.sims)
    for path in args.submission:
        if not Path(path).is_file():
            raise UserError(f"{path} not found; run `make submission` first")
        add(f"sub:{Path(path).stem}", reference.submission_player, path)
    for depth in args.alphabeta:
        if depth < 1:
            raise UserError(f"--alphabeta depths must be >= 1, got {depth}")
        add(f"alphabeta{depth}", reference.alphabeta_player, depth)
    for name in args.builtin:
        add(name, reference.builtin_player, name)
    if len(players) < 2:
        raise UserError(f"the arena needs at least two players, got {len(players)}")

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

    if not Path(args.submission).is_file():
        raise UserError(f"{args.submission} not found; run `make submission` first")
    if args.max_nodes < 1:
        raise UserError("--max-nodes must be >= 1")
    _require_runtime(args)
    kaggle_io.load_submission(args.submission)  # a file that is not a submission: one line (SubmissionError)
    compiled = args.solver == "numba" and extras.is_installed("numba")
    print(f"duel: {2 * args.games} games, runtime {args.runtime}, {args.act_timeout:g} s a move; the opponent's and "
          "the checks' solver " + ("compiled (numba)" if compiled else "in pure Python (slow" + (
              ": numba is not installed, `make install-validate`)" if args.solver == "numba" else ")"))
          + f"; the first games prove the opening plies (minutes each), later ones reuse {args.cache}",
          file=sys.stderr, flush=True)

    def on_game(played: duel.DuelGame) -> None:
        bar.update(1)
        if not args.json:
            print(duel.format_game(played), flush=True)

    with _progress(2 * args.games, "games") as bar:
        try:
            report = duel.duel(args.submission, games_per_seat=args.games, noise=args.noise, runtime=args.runtime,
                               seed=args.seed, cache_path=args.cache, max_nodes=int(args.max_nodes),
                               solver_kind=args.solver, opening=args.opening, act_timeout=args.act_timeout,
                               on_game=on_game)
        except duel.DuelError as exc:
            raise UserError(str(exc)) from None
    print(json.dumps(report.as_dict()) if args.json else duel.format_summary(report))
    return 1 if report.failed else 0


def cmd_play(args: argparse.Namespace) -> int:
    from connectx_az.engine import game
    from connectx_az.evaluation import kaggle_io, players, reports

    if args.sims < 1:
        raise UserError("--sims must be >= 1")
    _require(args, *ONNXRUNTIME_EVALUATOR)
    agent = players.model_player(args.model, args.sims)
    human = 0 if args.first else 1  # seat: 0 moves first
    position, mask = game.initial()
    print(f"you are {'X' if human == 0 else 'O'} ({'first' if human == 0 else 'second'}); "
          "type a column 1-7, or q to quit")
    while True:
        observation, configuration = kaggle_io.kaggle_inputs(position, mask)
        print(f"\n{reports.render_board(observation['board'])}")
        over = game.outcome(position, mask)
        if over is not None:
            mover_is_human = (game.num_stones(mask) - 1) % 2 == human
            print("draw" if over == 0 else "you win" if mover_is_human else "the agent wins")
            return 0
        if game.num_stones(mask) % 2 == human:
            while True:
                try:
                    text = input("your move (1-7, q quits): ").strip().lower()
                except EOFError:
                    print("\nno more input: quitting")
                    return 0
                if text in ("q", "quit"):
                    print("bye")
                    return 0
                if text.isdigit() and 1 <= int(text) <= game.COLS and game.is_legal(mask, int(text) - 1):
                    col = int(text) - 1
                    break
                print(f"{text!r} is not a playable column: type 1-7 (a column that is not full) or q")
        else:
            col = int(agent(observation, configuration))
            print(f"agent plays {col + 1}")
        position, mask = game.play(position, mask, col)


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    from connectx_az.evaluation import bench, pons  # numpy only: the set names for --sets, the solver's budgets

    parser = argparse.ArgumentParser(prog="connectx-az", description="AlphaZero for Kaggle ConnectX: "
                                     "train, export, build a one-file submission, validate, measure.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("train", help="train by self-play (new run, or --resume)")
    p.add_argument("run_dir", nargs="?", default="runs/latest", help="folder of the run (default runs/latest)")
    p.add_argument("--preset", default="cpu", help="smoke, cpu or gpu (default cpu)")
    p.add_argument("--config", help="TOML file of settings applied over the preset")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a setting, e.g. mcts.num_simulations=400 (repeatable); with --resume it "
                        "changes the run's saved settings, e.g. num_generations=120 to extend it")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR")
    p.add_argument("--init-model", help="warm start from this checkpoint: its network and weights, unless "
                   "--set net.* or --config chooses a network (then the same filters: changed heads start afresh, "
                   "extra blocks start as identities, e.g. --set net.num_blocks=6 to deepen a 4x64 net)")
    p.add_argument("--generations", type=int, help="stop after this many generations (resumable)")
    p.add_argument("--time-budget", metavar="DURATION",
                   help="stop cleanly between generations before this much time has passed (resumable): "
                        "seconds, or e.g. 90s, 45m, 11.5h")
    p.add_argument("--show-config", action="store_true",
                   help="print the settings the run would use, then exit without training")
    p.add_argument("--threads", type=int, help="torch threads for this call (not saved; e.g. when resuming)")
    p.add_argument("--device", help="cpu, cuda, ... for this call (not saved; e.g. resuming on a GPU)")
    p.add_argument("--keep-every", type=int, default=0, metavar="N",
                   help="also keep the checkpoint after every N-th generation and the last, as "
                        "RUN_DIR/snapshots/gen_NNNN.pt (to grade along the way; default 0: only the latest)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("export", help="export a checkpoint to ONNX (with a parity check)")
    p.add_argument("checkpoint", help="checkpoint .pt file or run folder")
    p.add_argument("--out", default="build/model.onnx", help="ONNX file to write (default build/model.onnx)")
    p.add_argument("--float16", action="store_true", help="store weights as float16 (half the size)")
    p.add_argument("--weights-out", help="also save the bare weights (no optimizer) as a .pt checkpoint")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("label", help="prove random openings with the exact solver (value and, with --moves, "
                       "policy targets for train.solved_labels)")
    p.add_argument("out", help=".npz file to write; one that exists is added to (new positions only)")
    p.add_argument("--positions", type=int, help="stop after this many new proven positions")
    p.add_argument("--seconds", type=float, help="stop after this many seconds (default 60 without --positions)")
    p.add_argument("--plies", type=int, nargs=2, default=[4, 16], metavar=("MIN", "MAX"),
                   help="random openings of MIN to MAX plies, uniformly (default 4 16)")
    p.add_argument("--max-nodes", type=int, default=3_000_000,
                   help="solver budget a position; unproven ones are dropped (default 3,000,000: about 0.3 s "
                        "compiled)")
    p.add_argument("--seed", type=int, default=0, help="random seed (a file added to draws afresh)")
    p.add_argument("--moves", action="store_true",
                   help="also prove each position's best moves (policy targets for train.solved_policy; "
                        "about 1.6 times the work), first for the file's positions that lack them")
    p.add_argument("--retry-unproven", action="store_true",
                   help="with --moves: seek again the best moves of the file's positions where they were not "
                        "proven within the budget (give a bigger --max-nodes)")
    p.add_argument("--workers", type=int, default=1,
                   help="prove this many positions at once, one process (and core) each (default 1)")
    p.set_defaults(func=cmd_label)

    p = sub.add_parser("build", help="build the one-file Kaggle submission.py")
    p.add_argument("--model", default=str(DEFAULT_MODEL), help="ONNX model (default: the shipped model)")
    p.add_argument("--card", help="JSON model card to record (default: beside the model)")
    p.add_argument("--out", default="build/submission.py", help="file to write (default build/submission.py)")
    p.add_argument("--book", default=str(DEFAULT_BOOK), help="opening book to embed (default: the shipped one)")
    p.add_argument("--no-book", action="store_true", help="embed no opening book")
    p.add_argument("--torch-backend", action="store_true",
                   help="also paste the torch runtime (agent/onnx_torch.py), for an agent configured to try "
                        "backend torch (benchmarks; the default agent never uses it)")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("card", help="show a model's card: what it is, how it was trained, how strong")
    p.add_argument("model", nargs="?", default=str(DEFAULT_MODEL),
                   help="ONNX model or its .json card (default: the shipped model)")
    p.add_argument("--json", action="store_true", help="print the card as JSON")
    p.set_defaults(func=cmd_card)

    p = sub.add_parser("book", help="build the opening book: the agent's openings proven by the exact solver "
                       "(resumable: run it again to go on or to go deeper)")
    p.add_argument("state", nargs="?", default="build/book/state.bin",
                   help="journal of proven positions, created or resumed (default build/book/state.bin)")
    p.add_argument("--depth", type=int, required=True,
                   help="prove the agent's positions (as first and second player) up to this ply")
    p.add_argument("--all-plies", type=int, default=-1, metavar="PLY",
                   help="also every position up to this ply (random openings; default none)")
    p.add_argument("--out", default="build/book/book.bin",
                   help="book file to write after each ply (default build/book/book.bin)")
    p.add_argument("--workers", type=int,
                   help="prove this many positions at once, one process each (default: one per core this process "
                        "may use, e.g. 1 under `taskset -c 1`)")
    p.add_argument("--exact-factor", type=float, default=2.0,
                   help="won or lost: seek the fastest win or slowest loss within this many times the nodes of "
                        "the weak proof (default 2; a state file keeps its own)")
    p.add_argument("--exact-min-nodes", type=int, default=1_000_000,
                   help="... but at least this many nodes (default 1,000,000)")
    p.add_argument("--table-bits", type=int, default=18,
                   help="transposition table of 2^N entries for the compiled solver (default 18: fits the cache)")
    p.add_argument("--deep-table-bits", type=int, default=24,
                   help="... and of 2^N entries for the positions of --deep-plies or fewer (default 24, 128 MiB)")
    p.add_argument("--deep-plies", type=int, default=2,
                   help="positions of this many plies or fewer get the deep table (default 2)")
    p.add_argument("--python", action="store_true", help="use the pure-Python solver (slow; tests)")
    p.add_argument("--root", default="", metavar="MOVES",
                   help="start the tree from this position (1-based columns, e.g. 4453) instead of the empty board")
    p.add_argument("--frontier", type=int, default=0, metavar="N",
                   help="then, on N sampled positions at depth + 1 and + 2 each, the share each solver proves "
                        "within the agent's budget")
    p.add_argument("--seed", type=int, default=0, help="seed of --frontier's sample")
    p.set_defaults(func=cmd_book)

    p = sub.add_parser("validate", help="play the submission through kaggle-environments")
    p.add_argument("submission", nargs="?", default="build/submission.py",
                   help="the built file (default build/submission.py)")
    p.add_argument("--games", type=int, default=20, help="games per opponent and seat (default 20)")
    p.add_argument("--opponents", nargs="+", default=["random", "negamax"],
                   help="kaggle-environments agents to play (default: random negamax)")
    p.add_argument("--replays", help="folder for the HTML replays of the last game against each opponent and seat "
                   "(default build/replays/NAME, NAME the file's name without .py)")
    p.add_argument("--act-timeout", type=float,
                   help="seconds a move instead of Kaggle's 2 (the bank scales with it): quick checks only")
    _add_runtime(p)
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("eval", help="accuracy against perfect play")
    esub = p.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    e = esub.add_parser("pons", help="mistake rates on the six Pons sets")
    e.add_argument("--model", default=str(DEFAULT_MODEL),
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
    _add_runtime(e)
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
    e.add_argument("--models", nargs="+", default=[str(DEFAULT_MODEL)], metavar="MODEL",
                   help="ONNX models (default: the shipped one)")
    e.add_argument("--bands", type=float, nargs="+", default=list(pons.VALUE_BANDS), metavar="B",
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

    p = sub.add_parser("arena", help="round robin of models, submissions and reference players, with Elo")
    p.add_argument("--model", nargs="*", default=[str(DEFAULT_MODEL)], metavar="PATH",
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
    _add_runtime(p)
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
    p.add_argument("--model", default=str(DEFAULT_MODEL), help="ONNX model (default: the shipped model)")
    p.add_argument("--sims", type=int, default=400, help="MCTS simulations a move (default 400)")
    p.add_argument("--first", action="store_true", help="you move first (default: the agent does)")
    p.set_defaults(func=cmd_play)

    p = sub.add_parser("plot", help="PNG training curves of a run")
    p.add_argument("run_dir", help="a training run folder (its metrics.jsonl)")
    p.add_argument("--out", help="output folder (default RUN_DIR/plots)")
    p.set_defaults(func=cmd_plot)

    from connectx_az.evaluation import compare  # numpy only: the rule's text and the defaults

    p = sub.add_parser("compare", help="may a candidate ship? Its file and the shipped one graded paired; a verdict",
                       description="Build CANDIDATE with the shipped book, grade it and the shipped file on the same "
                       "positions (the six Pons sets under the Kaggle clock in both runtimes, games against negamax, "
                       "the duel against the noisy perfect opponent, the two networks alone at 800 simulations), "
                       "print each figure with the paired counts and p-values, and a verdict (exit 0: may ship; 1: "
                       "not). " + compare.RULE + " The full compare takes hours on one core; --quick about ten "
                       "minutes a runtime.")
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

    p = sub.add_parser("bench", help="speed benchmarks")
    p.add_argument("what", choices=["agent", "selfplay", "solver", "clock", "gpu", "precision"],
                   help="agent: the search and the built file; selfplay: training throughput; solver: nodes/s; "
                        "precision: the network in float32 and bfloat16 on the Pons positions, and each one's speed; "
                        "clock: how close the built file's moves come to their budgets on a shared core (about "
                        "two minutes); gpu: device, CUDA tests, self-play per precision, a few generations of "
                        "the gpu preset and the whole run projected, a file built and played (`make gpu-check`, "
                        "about seven minutes on an H100)")
    p.add_argument("--model", default=str(DEFAULT_MODEL), help="ONNX model (default: the shipped model)")
    p.add_argument("--seconds", type=float, help="time per measurement (default 5; gpu: 3)")
    p.add_argument("--batch", type=int, nargs="*", help="selfplay: also measure these games-in-flight counts")
    p.add_argument("--workers", type=int, nargs="*",
                   help="selfplay: also measure these worker-process counts (0: in this process), "
                        "each with every --batch")
    p.add_argument("--limit", type=int, default=BENCH_SOLVER_LIMIT,
                   help=f"solver, precision: the first N positions of each set (default: solver "
                        f"{BENCH_SOLVER_LIMIT}, precision all)")
    p.add_argument("--checkpoint", help="precision: the network's checkpoint (default: the shipped one's, "
                                        "models/default.pt)")
    p.add_argument("--sims", type=int, default=0,
                   help="precision: also grade MCTS at this many simulations in each precision (default 0: not)")
    p.add_argument("--solvers", nargs="+", choices=["python", "numba"], default=["python", "numba"],
                   help="solver: which solvers to measure (default both)")
    p.add_argument("--deadline", type=float, default=max(bench.SOLVER_BUDGETS),
                   help=f"solver: seconds a position before it counts as unproven (default "
                        f"{max(bench.SOLVER_BUDGETS):g})")
    p.add_argument("--sets", nargs="+", choices=list(pons.SETS), metavar="SET",
                   help=f"solver, precision: these Pons sets instead (default: solver {' '.join(bench.SOLVER_SETS)}, "
                        "precision all)")
    p.add_argument("--preset", help="selfplay, gpu: the training preset to measure (default cpu; gpu: gpu)")
    p.add_argument("--budget", type=float, default=420.0,
                   help="gpu: seconds for all the steps; a step that would overrun it is skipped (default 420)")
    p.add_argument("--generations", type=int, default=3, help="gpu: generations of the preset to time (default 3)")
    p.add_argument("--out", help="gpu: folder for gpu_check.json, its log and the run (default build/gpu-check)")
    p.add_argument("--evaluator", choices=["network", "free"], default="network",
                   help="selfplay: free replaces the network by one that costs almost nothing, to time the "
                        "tree work alone (default network)")
    p.add_argument("--device", help="selfplay, gpu: auto, cpu, cuda, ... (default: the preset's)")
    p.add_argument("--precision", choices=["auto", "float32", "float16", "bfloat16"],
                   help="selfplay: inference precision (default: the preset's, auto)")
    p.add_argument("--game", type=int, default=0, metavar="N",
                   help="agent: also play a scripted game N times per backend, numpy and torch in turns, the "
                        "model's load charged to the first move (about a minute per game; default 0: skip)")
    p.add_argument("--json", action="store_true", help="one JSON line")
    p.set_defaults(func=cmd_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    try:
        return int(args.func(args))
    except _user_errors() as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:  # an optional package a command's ``_require`` did not name
        if not extras.is_optional(exc.name):
            raise
        print(f"error: {extras.missing_message([exc.name], f'`connectx-az {_command(args)}`')}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`... | head`): stop quietly, as a Unix tool does
        # Python flushes stdout again at exit, which would raise once more: point it at /dev/null.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
