"""The commands of ``bench``: the speed benchmarks (agent, selfplay, solver, precision)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from connectx_az import errors, paths
from connectx_az.cli import bars, common

#: bench solver's default --limit (bench precision's is every position)
SOLVER_LIMIT = 40


def cmd_bench(args: argparse.Namespace) -> int:
    from connectx_az.tools import bench

    common.require_positive(args, "--seconds")
    if args.what == "solver":
        return cmd_bench_solver(args)
    if args.what == "precision":
        return cmd_bench_precision(args)
    if args.what == "selfplay":
        common.require(args, "torch", "onnx", "tqdm")
        from connectx_az.tools import bench_selfplay

        result = bench_selfplay.run(model=args.model, seconds=args.seconds or 5.0, batches=args.batch,
                                    workers=args.workers, preset=args.preset or "cpu", evaluator=args.evaluator,
                                    device=args.device, precision=args.precision)
    else:
        _check_agent_model(args.model)
        from connectx_az.tools import bench_agent

        result = bench_agent.bench_agent(args.model, seconds=args.seconds or 5.0)
    print(json.dumps(result) if args.json else bench.format_result(args.what, result))
    return 0


def cmd_bench_precision(args: argparse.Namespace) -> int:
    common.require(args, "torch", "onnx", "tqdm")
    from connectx_az.tools import bench_precision

    checkpoint = Path(args.checkpoint or paths.DEFAULT_CHECKPOINT)
    if not checkpoint.is_file():
        raise errors.UserError(f"--checkpoint {checkpoint} does not exist; pass a .pt file written by training")
    limit = None if args.limit == SOLVER_LIMIT else args.limit  # the solver's default is not this one's
    common.require_each((limit is None or limit > 0, f"--limit {limit} must be positive"),
                        (args.sims >= 0, f"--sims {args.sims} must be zero or more"))
    print(f"float32 and bfloat16 on the Pons positions{f', MCTS {args.sims}' if args.sims else ''}, then the speed "
          "of each (pin to one idle core: taskset -c 1)", file=sys.stderr if args.json else sys.stdout, flush=True)
    result = bench_precision.run(checkpoint, limit=limit, sets=args.sets, sims=args.sims, seconds=args.seconds or 6.0)
    print(json.dumps(result) if args.json else bench_precision.format_result(result))
    return 0


def _check_agent_model(model: str) -> None:
    """Stop with one line where ``model`` is no ONNX model the agent's numpy runtime can read, or not shaped as the
    network (``backends.check_outputs``)."""
    from connectx_az.agent import backends, onnx_numpy

    path = Path(model)
    if not path.is_file():
        raise errors.UserError(f"model {path} not found; pass --model PATH.onnx")
    try:
        backends.check_outputs(onnx_numpy.NumpyOnnxModel(path.read_bytes()))
    except ValueError as exc:
        raise errors.UserError(f"model {path} cannot run in the agent: {exc}") from None


def cmd_bench_solver(args: argparse.Namespace) -> int:
    from connectx_az.testsets import pons
    from connectx_az.tools import bench_solver

    common.require_each((args.deadline > 0, f"--deadline {args.deadline:g} must be positive"),
                        (args.limit is None or args.limit > 0, f"--limit {args.limit} must be positive"))
    if "numba" in args.solvers:
        common.require(args, "numba")
    sets = tuple(args.sets or bench_solver.SOLVER_SETS)
    solvers = tuple(args.solvers)
    budgets = (*(b for b in bench_solver.SOLVER_BUDGETS if b < args.deadline), args.deadline)
    with bars.progress_bar(len(solvers) * pons.num_positions(sets, args.limit), "positions") as bar:
        result = bench_solver.bench_solver(limit=args.limit, sets=sets, budgets=budgets, solvers=solvers,
                                    on_position=lambda: bar.update(1))
    print(json.dumps(result) if args.json else bench_solver.format_solver_result(result))
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add this group's commands to ``sub``."""
    from connectx_az.testsets import pons  # numpy only: the set names for --sets
    from connectx_az.tools import bench_solver  # numpy only: the solver's budgets

    p = sub.add_parser("bench", help="speed benchmarks")
    p.add_argument("what", choices=["agent", "selfplay", "solver", "precision"],
                   help="agent: the search and the built file; selfplay: training throughput; solver: nodes/s; "
                        "precision: the network in float32 and bfloat16 on the Pons positions, and each one's speed "
                        "(inference and training steps); the GPU check is `make gpu-check`")
    p.add_argument("--model", default=str(paths.DEFAULT_MODEL), help="ONNX model (default: the shipped model)")
    p.add_argument("--seconds", type=float, help="time per measurement (default 5)")
    p.add_argument("--batch", type=int, nargs="*", help="selfplay: also measure these games-in-flight counts")
    p.add_argument("--workers", type=int, nargs="*",
                   help="selfplay: also measure these worker-process counts (0: in this process), "
                        "each with every --batch")
    p.add_argument("--limit", type=int, default=SOLVER_LIMIT,
                   help=f"solver, precision: the first N positions of each set (default: solver {SOLVER_LIMIT}, "
                        "precision all)")
    p.add_argument("--checkpoint", help="precision: the network's checkpoint (default: the shipped one's, "
                                        "models/default.pt)")
    p.add_argument("--sims", type=int, default=0,
                   help="precision: also grade MCTS at this many simulations in each precision (default 0: not)")
    p.add_argument("--solvers", nargs="+", choices=["python", "numba"], default=["python", "numba"],
                   help="solver: which solvers to measure (default both)")
    p.add_argument("--deadline", type=float, default=max(bench_solver.SOLVER_BUDGETS),
                   help=f"solver: seconds a position before it counts as unproven (default "
                        f"{max(bench_solver.SOLVER_BUDGETS):g})")
    p.add_argument("--sets", nargs="+", choices=list(pons.SETS), metavar="SET",
                   help=f"solver, precision: these Pons sets instead (default: solver "
                        f"{' '.join(bench_solver.SOLVER_SETS)}, precision all)")
    p.add_argument("--preset", help="selfplay: the training preset to measure (default cpu)")
    p.add_argument("--evaluator", choices=["network", "free"], default="network",
                   help="selfplay: free replaces the network by one that costs almost nothing, to time the "
                        "tree work alone (default network)")
    p.add_argument("--device", help="selfplay: auto, cpu, cuda, ... (default: the preset's)")
    p.add_argument("--precision", choices=["auto", "float32", "float16", "bfloat16"],
                   help="selfplay: inference precision (default: the preset's, auto)")
    p.add_argument("--json", action="store_true", help="one JSON line")
    p.set_defaults(func=cmd_bench)
