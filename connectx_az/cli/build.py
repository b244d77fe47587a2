"""The commands of what ships: ``build`` (submission.py), ``card`` and ``book`` (the opening book)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from connectx_az import errors, paths
from connectx_az.cli import bars, common


def cmd_build(args: argparse.Namespace) -> int:
    from connectx_az import cards
    from connectx_az.tools import builder

    model = Path(args.model)
    out = Path(args.out) if args.out else default_out(model)
    metadata = cards.load(Path(args.card) if args.card else model.with_suffix(".json"))
    book = None if args.no_book else Path(args.book)
    before = _embedded_sha256(out)
    report = builder.build_submission(model, out, metadata=metadata, book_path=book)
    print(f"wrote {report.path} ({report.num_bytes / 1e6:.2f} MB)")
    if before is not None and before != report.model_sha256:
        print(f"replaced: {out} held another model (sha256 {before[:12]})")
    summary = cards.summary_lines(metadata, model=model, sha256=report.model_sha256, net_label=report.net_label)
    print(summary[0])
    print(f"book: {book.name}, {report.book_entries:,} positions ({report.book_bytes / 1e3:.1f} kB)" if book
          else "book: none (--no-book)")
    for line in summary[1:]:
        print(line)
    return 0


def default_out(model: Path) -> Path:
    """Where ``build`` writes without ``--out``: ``build/submission.py`` for the shipped model, and a name of its own
    for any other (``build/submission_STEM.py``), so that neither build replaces the other."""
    if model.resolve() == paths.DEFAULT_MODEL.resolve():
        return Path("build/submission.py")
    return Path("build") / f"submission_{model.stem}.py"


def _embedded_sha256(path: Path) -> str | None:
    """The sha256 of the model a built file at ``path`` embeds; None where there is no such file."""
    import hashlib

    from connectx_az.tools import builder

    if not path.is_file():
        return None
    try:
        return hashlib.sha256(builder.embedded_model(path)).hexdigest()
    except (builder.BuildError, ValueError):  # not a file built by connectx-az: nothing to compare
        return None


def cmd_card(args: argparse.Namespace) -> int:
    from connectx_az import cards

    path = Path(args.model)
    if not path.is_file():
        raise errors.UserError(f"{path} not found")
    if path.suffix not in (".onnx", ".json"):
        raise errors.UserError(f"{path} is neither an ONNX model nor its .json card")
    card_path = path if path.suffix == ".json" else path.with_suffix(".json")
    card = cards.load(card_path)
    if not card:
        raise errors.UserError(f"no model card in {card_path}: `{paths.COMMAND} export` writes one beside the model it "
                               "exports")
    model = path.with_suffix(".onnx")
    mismatch = cards.mismatch(card, model) if model.is_file() else None
    if mismatch:  # first, where it is seen: the card below describes another file
        print(f"error: {model} is not the model this card describes: {mismatch}", file=sys.stderr)
    print(json.dumps(card, indent=2) if args.json else "\n".join(cards.describe(card, model=path)))
    return 1 if mismatch else 0


def cmd_book(args: argparse.Namespace) -> int:
    from connectx_az.engine import game, solver
    from connectx_az.tools import book_build, book_journal

    try:
        root = game.from_moves(args.root)
    except ValueError as exc:
        raise errors.UserError(f"--root {args.root}: {exc}") from exc
    if args.workers is None:
        args.workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    common.require_each((args.depth >= 0, f"--depth {args.depth} must be zero or more"),
                        (args.workers >= 1, f"--workers {args.workers} must be positive"),
                        (10 <= args.table_bits <= 30, f"--table-bits {args.table_bits} must lie in 10..30"),
                        (10 <= args.deep_table_bits <= 30, f"--deep-table-bits {args.deep_table_bits} must lie in "
                                                           "10..30"))
    common.require_fork(args.workers)
    try:
        state = book_journal.State.open(args.state, exact_factor=args.exact_factor,
                                      exact_min_nodes=args.exact_min_nodes)
    except (book_journal.StateError, OSError) as exc:
        raise errors.UserError(str(exc)) from exc
    with state:
        if state.dropped_tail:
            print(f"{state.path}: dropped a last record cut short by a kill ({state.dropped_tail} bytes); its "
                  "position is proven again")
        prover = book_build.Provers(solver.Solver()) if args.python else book_build.default_provers(
            table_bits=args.table_bits, deep_table_bits=args.deep_table_bits, deep_plies=args.deep_plies)
        print(f"{state.path}: {len(state.entries):,} positions proven before; proving plies up to {args.depth}"
              + (f" and every position up to ply {args.all_plies}" if args.all_plies >= 0 else "")
              + f" with {type(prover.fast).__name__}" + (f" x {args.workers}" if args.workers > 1 else ""))
        bar: Any = bars.NoBar()

        def progress(p: book_build.Progress) -> None:
            nonlocal bar
            if p.done == 0:
                bar.__exit__(None, None, None)
                bar = bars.progress_bar(p.total, "positions", desc=f"ply {p.ply} of {p.depth}")
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


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add this group's commands to ``sub``."""
    p = sub.add_parser("build", help="build the one-file Kaggle submission.py")
    p.add_argument("--model", default=str(paths.DEFAULT_MODEL), help="ONNX model (default: the shipped model)")
    p.add_argument("--card", help="JSON model card to record (default: beside the model)")
    p.add_argument("--out", help="file to write (default: build/submission.py for the shipped model, "
                   "build/submission_NAME.py for another model NAME.onnx, so that neither replaces the other)")
    p.add_argument("--book", default=str(paths.DEFAULT_BOOK), help="opening book to embed (default: the shipped one)")
    p.add_argument("--no-book", action="store_true", help="embed no opening book")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("card", help="show a model's card: what it is, how it was trained, how strong")
    p.add_argument("model", nargs="?", default=str(paths.DEFAULT_MODEL),
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
