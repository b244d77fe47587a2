"""The commands of training: ``train``, ``export``, ``label`` (proven openings for training) and ``plot``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from connectx_az import errors
from connectx_az.cli import bars, common


def cmd_train(args: argparse.Namespace) -> int:
    common.require_positive(args, "--generations", "--threads", zero_allowed=("--keep-every", "--workers"))
    common.require(args, "torch", "tqdm")
    from connectx_az.training import config, devices, runs, sizing, train

    if args.preset is not None and args.preset not in config.PRESETS:
        raise errors.UserError(f"--preset {args.preset}: choose one of {', '.join(config.PRESETS)}")
    if args.device is not None:
        try:
            devices.resolve_device(args.device)
        except config.ConfigError as exc:
            raise errors.UserError(f"--device {args.device}: {exc}") from None
    budget = runs.parse_duration(args.time_budget, "--time-budget") if args.time_budget is not None else None
    total = [f"total_time={runs.parse_duration(args.total_time, '--total-time')}"] if args.total_time is not None \
        else []
    if args.resume:
        if not (Path(args.resume) / "config.json").is_file():
            raise errors.UserError(f"--resume {args.resume}: not a run's folder (one that holds config.json); "
                                   "a new run is `train FOLDER --preset ...`")
        if args.run_dir is not None and Path(args.run_dir) != Path(args.resume):
            raise errors.UserError(f"give the run's folder once: --resume {args.resume} continues that run, and "
                                   f"{args.run_dir} names another")
        if args.preset is not None or args.config or args.init_model:
            raise errors.UserError("--preset, --config and --init-model choose a new run's settings; a resumed run "
                                   "keeps its own (change one with --set KEY=VALUE)")
        if args.workers is not None:
            raise errors.UserError("--workers sizes a new run; a resumed run keeps the workers it started with "
                                   "(they decide its games)")
        settings = [*args.set, *total]
        cfg = config.override(config.load_config(args.resume), settings) if settings else None
        if args.show_config:
            print(json.dumps(config.to_dict(cfg or config.load_config(args.resume)), indent=2))
            return 0
        run_dir = Path(args.resume)
        saved = cfg or config.load_config(run_dir)
        cores = devices.available_cores()
        num_workers = sizing.capped_workers(saved.selfplay.num_workers, cores)
        if num_workers is not None:
            print(f"the run's {saved.selfplay.num_workers} self-play workers capped at {cores}, the cores found, "
                  f"for this session (its {saved.selfplay.num_games:,} games a generation stay)")
        call = dict(resume=True, workers=num_workers)
    else:
        preset = args.preset or "cpu"
        cfg = config.make_config(preset, toml_path=args.config, overrides=[*args.set, *total])
        if args.init_model and cfg.net == config.make_config(preset).net:
            warm = train.warm_start_config(cfg, args.init_model)
            if warm.net != cfg.net:
                print(f"warm start: the {warm.net.label} network of {args.init_model} (set net.* for another of "
                      "the same filters)")
            cfg = warm
        machine = devices.detect(devices.resolve_device(args.device or cfg.device))
        cfg, capped = sizing.sized_within(cfg, cores=args.threads or machine.cores, found=machine.cores,
                                          gpu=bool(machine.gpu), workers=args.workers,
                                          keep=_user_keys(args) & set(sizing.SIZED_KEYS))
        if capped:
            print(capped, file=sys.stderr if args.show_config else sys.stdout)
        if args.show_config:  # the machine's line on stderr, so that stdout stays JSON
            print(devices.describe(cfg, machine), file=sys.stderr)
            print(json.dumps(config.to_dict(cfg), indent=2))
            return 0
        print(devices.describe(cfg, machine))
        if cfg.total_time:
            print(f"--total-time {runs.format_duration(cfg.total_time)}: the first generation measures how many fit "
                  f"(at least {sizing.MIN_TIMED_GENERATIONS}: the later ones shrink where fewer would)")
        run_dir = Path(args.run_dir or "runs/latest")
        call = dict(init_model=args.init_model)
    shown = cfg if cfg is not None else config.load_config(run_dir)  # what the run trains with, for its lines
    try:
        train.run(run_dir, cfg, num_generations=args.generations, progress=not args.quiet, threads=args.threads,
                  device=args.device, time_budget=budget, keep_every=args.keep_every,
                  on_generation=lambda row: bars.write(runs.generation_line(row, shown)), **call)
    except KeyboardInterrupt:
        where = runs.status_line(run_dir) if (run_dir / "config.json").is_file() else "nothing was written"
        print(f"interrupted: {where}")
        return 130
    print(runs.status_line(run_dir))
    return 0


def _user_keys(args: argparse.Namespace) -> set[str]:
    """The dotted keys the user set with ``--set`` or in the ``--config`` file."""
    import tomllib

    from connectx_az.training import config

    keys = {item.partition("=")[0].strip() for item in args.set}
    if args.config:
        keys |= set(config.leaves(tomllib.loads(Path(args.config).read_text())))
    return keys


def cmd_export(args: argparse.Namespace) -> int:
    common.require(args, "torch", "onnx", "tqdm")
    from connectx_az.training import export, runs
    from connectx_az.training.config import save_json
    from connectx_az.training.network import load_checkpoint, save_checkpoint

    ckpt = _checkpoint_path(args.checkpoint)
    net, data = load_checkpoint(ckpt)
    if args.out is None:  # one file a run: a second run's export does not land on the first's
        args.out = str(runs.export_path(ckpt.parent if ckpt.name == "checkpoint.pt" else ckpt.with_suffix("")))
    export.check_out(args.out, ckpt, force=args.force)  # the shipped model, another run's export, /dev/full: refused
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


def cmd_label(args: argparse.Namespace) -> int:
    from connectx_az.engine import solver_numba
    from connectx_az.tools import labeller
    from connectx_az.training import labels

    if args.positions is not None and args.positions < 1 or args.seconds is not None and not args.seconds > 0:
        raise errors.UserError("--positions and --seconds must be positive")
    if args.max_nodes < 1 or args.workers < 1:
        raise errors.UserError("--max-nodes and --workers must be positive")
    if args.retry_unproven and not args.moves:
        raise errors.UserError("--retry-unproven retries best moves: add --moves")
    common.require_fork(args.workers)
    out = Path(args.out)
    try:
        before = labeller.open_file(out)
    except labels.LabelsError as exc:
        raise errors.UserError(f"{exc}; choose another file to write") from exc
    seconds = 60.0 if args.seconds is None and args.positions is None else args.seconds
    prover = solver_numba.make_solver()
    if args.moves:  # the file's positions that lack their best moves get them first
        lacking = int(before.moves_to_seek(args.retry_unproven).sum())
        with bars.progress_bar(lacking, "positions", desc=f"best moves in {out.name}") as bar:
            before, fill = labeller.add_moves_to_file(out, before, max_nodes=args.max_nodes, seconds=seconds,
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
    with bars.progress_bar(args.positions or 0, "positions", desc=f"proving into {out.name}") as bar:
        try:
            whole, stats = labeller.label_into_file(out, before, num_positions=args.positions, seconds=seconds,
                                                  min_plies=args.plies[0], max_plies=args.plies[1],
                                                  max_nodes=args.max_nodes, seed=args.seed, moves=args.moves,
                                                  prover=prover, workers=args.workers,
                                                  on_progress=lambda stats: bar.update(stats.kept - bar.n))
        except ValueError as exc:
            raise errors.UserError(str(exc)) from exc
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


def cmd_plot(args: argparse.Namespace) -> int:
    common.require(args, "matplotlib", "torch", "tqdm")  # plots reads the metrics with train's reader
    from connectx_az.training import plots

    paths = plots.plot_run(args.run_dir, args.out)
    for p in paths:
        print(f"wrote {p}")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add this group's commands to ``sub``."""
    p = sub.add_parser("train", help="train by self-play (new run, or --resume)")
    p.add_argument("run_dir", nargs="?", help="folder of a new run (default runs/latest)")
    p.add_argument("--preset", help="smoke, cpu or gpu (default cpu)")
    p.add_argument("--config", help="TOML file of settings applied over the preset")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a setting, e.g. mcts.num_simulations=400 (repeatable); with --resume it "
                        "changes the run's saved settings, e.g. num_generations=120 to extend it")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR")
    p.add_argument("--init-model", help="warm start from this checkpoint: its network and weights, unless "
                   "--set net.* or --config chooses a network (then the same filters: changed heads start afresh, "
                   "extra blocks start as identities, e.g. --set net.num_blocks=6 to deepen a 4x64 net)")
    p.add_argument("--generations", type=int, help="stop after this many generations (resumable)")
    p.add_argument("--total-time", metavar="DURATION",
                   help="train for this long in all, across resumes (e.g. 3h, 90m, 20h as two sessions each with "
                        "its own --time-budget): the learning rate falls with the share of it spent, and the run "
                        "ends before a generation that would not finish inside it (default: the preset's "
                        "generations); with --resume it changes the run's total")
    p.add_argument("--workers", type=int, metavar="N",
                   help="self-play worker processes of a new run (default: one a core found, none on one core; "
                        "0 plays in the training process); the games a generation follow from it")
    p.add_argument("--time-budget", metavar="DURATION",
                   help="stop cleanly between generations before this much time has passed (resumable): "
                        "seconds, or e.g. 90s, 45m, 11.5h, 2h30m")
    p.add_argument("--show-config", action="store_true",
                   help="print the settings the run would use, then exit without training")
    p.add_argument("--threads", type=int, help="cores to use: a new run is sized for this many (default: all the "
                   "cores found); with --resume, torch threads for this call (not saved)")
    p.add_argument("--device", help="cpu, cuda, ... for this call (not saved; e.g. resuming on a GPU)")
    p.add_argument("--keep-every", type=int, default=None, metavar="N",
                   help="also keep the checkpoint after every N-th generation and the last, as "
                        "RUN_DIR/snapshots/gen_NNNN.pt (to grade along the way; default: only the latest for a new "
                        "run, and as the run was started for --resume; 0 stops keeping them)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("export", help="export a checkpoint to ONNX (with a parity check)")
    p.add_argument("checkpoint", help="checkpoint .pt file or run folder")
    p.add_argument("--out", help="ONNX file to write (default build/RUN.onnx, RUN the run folder's name, or the "
                   "checkpoint file's without .pt)")
    p.add_argument("--float16", action="store_true", help="store weights as float16 (half the size)")
    p.add_argument("--weights-out", help="also save the bare weights (no optimizer) as a .pt checkpoint")
    p.add_argument("--force", action="store_true", help="replace --out even where it is the shipped model or another "
                   "run's export (refused without it)")
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

    p = sub.add_parser("plot", help="PNG training curves of a run")
    p.add_argument("run_dir", help="a training run folder (its metrics.jsonl)")
    p.add_argument("--out", help="output folder (default RUN_DIR/plots)")
    p.set_defaults(func=cmd_plot)

