"""The GPU check (``make gpu-check``, ``python lab/device/gpu_check.py``): what only a GPU can show, in one
time-boxed command that writes one JSON and its log.  A maintainer's tool, run from a clone (``lab/device/README.md``).

Steps, in order (``STEPS``):

``device``       versions, the device and its memory, and the precision ``auto`` picks there.
``tests``        the tests that touch CUDA (``tests/test_gpu.py``, the device and precision rules of
                 ``tests/test_network.py``) in a child pytest, where the source tree is here.
``throughput``   self-play of the preset (``bench_selfplay``) per precision, in this process and with worker
                 processes; then sized for 4 and 2 cores (Kaggle's T4 box, Colab), pinned to them, at the precision a
                 run would choose; the tree work's own rate per core (the free evaluator); the network's forward time
                 at two batch sizes (what the T4 projection scales).
``generations``  a fresh run of the preset sized for this machine, for a few generations, and the whole run
                 projected from them, here and on a T4 (``t4_projection.project``).
``submission``   the run exported, built with the shipped book, and a few full-budget moves played by the file as
                 Kaggle runs it (``bench_agent.bench_submission``).

``gpu_check.json`` is rewritten as each step ends, so a killed check keeps what it measured; ``gpu_check.log`` holds
the terminal's lines.  A step starts only when the budget left covers its estimate, else it is skipped with the
reason; a failed step is recorded with its error's last line and the next one still runs.  ``make test`` runs the
same command on the CPU with the ``smoke`` preset (``tests/test_gpu_check.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from t4_projection import FORWARD_BATCHES, KAGGLE_CORES, project  # beside this file

from connectx_az import files, paths
from connectx_az.tools import bench, bench_agent, bench_selfplay

log = logging.getLogger(__name__)

STEPS = ("device", "tests", "throughput", "generations", "submission")
PRECISIONS = ("float32", "float16", "bfloat16")
#: the CPU cores of a Colab GPU runtime
COLAB_CORES = 2


@dataclass(frozen=True, kw_only=True)
class CheckConfig:
    """What the check runs and how big; the defaults are the GPU form."""

    preset: str = "gpu"
    device: str = "auto"
    budget: float = 420.0  # seconds for all the steps together
    generations: int = 3
    seconds: float = 3.0  # each raw-rate measurement
    precisions: tuple[str, ...] = PRECISIONS
    # self-play worker processes per throughput row (-1: one per core), in this order, each with every precision
    # (the device's auto precision first): the rows that do not fit the step's share of the budget are the last
    workers: tuple[int, ...] = (-1, 0)
    # self-play rows sized for this many cores, the process pinned to them (those past the machine's are skipped)
    core_counts: tuple[int, ...] = (KAGGLE_CORES, COLAB_CORES)
    num_moves: int = 3  # moves the built file plays
    act_timeout: float = 2.0  # the clock of those moves, Kaggle's by default
    tests: bool = True


def run(out_dir: str | Path, config: CheckConfig = CheckConfig(), *,
        clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Run the check's steps into ``out_dir`` (created); returns the record also saved as ``gpu_check.json``.

    The record: ``config`` (this ``CheckConfig``), ``steps`` (per name: ``status`` ``ok``, ``failed`` or
    ``skipped``, ``seconds``, ``reason`` where not ok, and the step's figures) and ``total_seconds``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(out_dir / "gpu_check.log", mode="w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    record: dict[str, Any] = {"config": {k: list(v) if isinstance(v, tuple) else v
                                         for k, v in config.__dict__.items()},
                              "steps": {}, "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    started = clock()
    ctx = _Context(config=config, out_dir=out_dir)
    steps: dict[str, tuple[Callable[[_Context], dict[str, Any]], float]] = {
        "device": (_device, 5.0), "tests": (_tests, 20.0), "throughput": (_throughput, 30.0),
        "generations": (_generations, 30.0), "submission": (_submission, 15.0),
    }
    try:
        for name in STEPS:
            fn, estimate = steps[name]
            left = config.budget - (clock() - started)
            ctx.left = left
            if name == "tests" and not config.tests:
                result = {"status": "skipped", "reason": "not asked for"}
            elif left < estimate:
                result = {"status": "skipped", "reason": f"{left:.0f} s of the budget left, the step needs about "
                                                         f"{estimate:.0f} s"}
            else:
                log.info("%s ...", name)
                t0 = clock()
                try:
                    result = {"status": "ok", **fn(ctx)}
                except Exception as exc:  # one broken step must not cost the others their figures
                    log.info("%s", traceback.format_exc())
                    result = {"status": "failed", "reason": _last_line(exc)}
                result["seconds"] = round(clock() - t0, 1)
            record["steps"][name] = result
            record["total_seconds"] = round(clock() - started, 1)
            log.info("%s: %s", name, _short(result))
            _save(out_dir, record)
    finally:
        log.removeHandler(handler)
        handler.close()
    return record


@dataclass
class _Context:
    """What the steps hand on: the config, the output folder, the time left, and earlier steps' figures."""

    config: CheckConfig
    out_dir: Path
    left: float = 0.0
    auto_precision: str = "float32"
    chosen_precision: str = "float32"  # what a run chooses here: the faster (``network.fastest_precision``)
    figures: dict[str, Any] | None = None
    run_dir: Path | None = None


def _save(out_dir: Path, record: dict[str, Any]) -> None:
    files.atomic_write_bytes(out_dir / "gpu_check.json", (json.dumps(record, indent=2) + "\n").encode())


def _last_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}"


def _short(result: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in result.items() if not isinstance(v, list | dict)})


# --------------------------------------------------------------------------- steps


def _device(ctx: _Context) -> dict[str, Any]:
    import torch

    from connectx_az.training import devices, network

    device = devices.resolve_device(ctx.config.device)
    out: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda,
                           "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
                           "device": str(device), "cpus": os.cpu_count(), "python": platform.python_version(),
                           "machine": platform.machine(), "cpu": bench.cpu_name()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        out.update(name=props.name, capability=f"{props.major}.{props.minor}",
                   memory_gib=round(props.total_memory / 2**30, 1), multiprocessors=props.multi_processor_count,
                   arch_list=torch.cuda.get_arch_list())
    else:
        out.update(name=bench.cpu_name(), capability=None)
    dtype = network.autocast_dtype(device, "auto")
    out["auto_precision"] = ctx.auto_precision = str(dtype).removeprefix("torch.") if dtype is not None else "float32"
    if device.type == "cuda":  # what train.run picks at a run's start, at the batch of the run sized for here
        from connectx_az.training import config, sizing, train

        sized = sizing.sized(config.make_config(ctx.config.preset), cores=devices.available_cores(), gpu=True)
        net = network.PolicyValueNet(sized.net)
        ctx.chosen_precision = network.fastest_precision(net, device, train.inference_batch(sized))
    else:
        ctx.chosen_precision = ctx.auto_precision
    out["chosen_precision"] = ctx.chosen_precision
    return out


def _tests(ctx: _Context) -> dict[str, Any]:
    root = Path(__file__).resolve().parents[2]
    paths = [root / "tests" / name for name in ("test_gpu.py", "test_network.py")]
    if not all(p.is_file() for p in paths):
        return {"status": "skipped", "reason": f"no source tree at {root} (the tests are not installed)"}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]).rstrip(":")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                           *map(str, paths)], cwd=root, env=env, capture_output=True, text=True,
                          timeout=max(10.0, ctx.left - 5))
    lines = done.stdout.strip().splitlines()
    (ctx.out_dir / "gpu_check_tests.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"pytest exited {done.returncode}: {lines[-1] if lines else done.stderr[-200:]}")
    return {"summary": lines[-1] if lines else "", "skipped": [line for line in lines if line.startswith("SKIPPED")]}


def _throughput(ctx: _Context) -> dict[str, Any]:
    cfg = ctx.config
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    t_start = time.monotonic()
    # the tree work's own rate, at the preset's games in flight in one process: what bounds a machine of few cores
    precisions = sorted(cfg.precisions, key=lambda p: p != ctx.auto_precision)
    settings = [("free", None, 0)] + [("network", p, w) for w in cfg.workers for p in precisions]
    last = 0.0
    for evaluator, precision, workers in settings:
        used = time.monotonic() - t_start
        # the throughput rows get at most 40% of the time left at the step's start, the rest is the generations'
        if used + last > 0.4 * ctx.left:
            skipped.append(f"{evaluator} {precision or ''} workers {workers} (out of time)".replace("  ", " "))
            continue
        t0 = time.monotonic()
        num_workers = _workers(workers)
        row = bench_selfplay.bench_selfplay(preset=cfg.preset, seconds=cfg.seconds, num_workers=num_workers,
                                   evaluator=evaluator, device=cfg.device, precision=precision,
                                   checkpoint=_shipped_checkpoint(cfg.preset))
        last = time.monotonic() - t0
        rows.append({**{k: row[k] for k in _ROW_KEYS if k in row}, "seconds": round(last, 1)})
        log.info("  %s", rows[-1])
    rows += _sized_rows(ctx, skipped, lambda: time.monotonic() - t_start + last > 0.4 * ctx.left)
    forward = _forward_times(cfg)
    out: dict[str, Any] = {"rows": rows, "forward": forward}
    if skipped:
        out["skipped_rows"] = skipped
        out["reason"] = f"{len(skipped)} rows skipped: {'; '.join(skipped)}"
    ctx.figures = {"rows": rows, "forward": forward}
    return out


_ROW_KEYS = ("evaluator", "precision", "workers", "batch", "raw_batch", "raw_evals_per_s", "selfplay_evals_per_s",
             "tree_evals_per_s_per_core", "positions_per_s", "games_per_hour", "mean_leaf_depth")


def _sized_rows(ctx: _Context, skipped: list[str], out_of_time: Callable[[], bool]) -> list[dict[str, Any]]:
    """Self-play as a run sized for each of ``core_counts`` cores plays it, pinned to that many cores."""
    from connectx_az.training import devices

    cfg, rows = ctx.config, []
    for cores in cfg.core_counts:
        if cores > devices.available_cores() or out_of_time():
            skipped.append(f"sized for {cores} cores" + (f" (this machine has {devices.available_cores()})"
                                                         if cores > devices.available_cores() else " (out of time)"))
            continue
        t0 = time.monotonic()
        row = _bench_sized(preset=cfg.preset, cores=cores, seconds=cfg.seconds, device=cfg.device,
                                         precision=ctx.chosen_precision, checkpoint=_shipped_checkpoint(cfg.preset))
        rows.append({**{k: row[k] for k in (*_ROW_KEYS, "cores") if k in row},
                     "seconds": round(time.monotonic() - t0, 1)})
        log.info("  %s", rows[-1])
    return rows


def _shipped_checkpoint(preset: str) -> Path | None:
    """The shipped network's weights where the preset trains that network (its trees are as deep as a trained
    network's, a fresh one's about half as deep), else None (a fresh network of the preset's shape)."""
    from connectx_az.training import config
    from connectx_az.training.network import load_checkpoint

    path = paths.DEFAULT_CHECKPOINT
    if not path.is_file() or load_checkpoint(path)[0].config != config.make_config(preset).net:
        return None
    return path


def _workers(workers: int) -> int:
    from connectx_az.training import workers as workers_module

    return workers_module.resolve_num_workers(workers)


def _forward_times(cfg: CheckConfig) -> dict[str, Any]:
    """Seconds of one forward pass of the preset's network at ``FORWARD_BATCHES``, at the auto precision."""
    import torch

    from connectx_az.training import config, devices, export
    from connectx_az.training.network import PolicyValueNet, TorchEvaluator

    run_config = config.make_config(cfg.preset)
    device = devices.resolve_device(cfg.device)
    torch.manual_seed(0)
    evaluator = TorchEvaluator(PolicyValueNet(run_config.net), device, "auto")
    out = {}
    for batch in FORWARD_BATCHES:
        obs = export.random_positions(batch, np.random.default_rng(0))
        out[str(batch)] = round(batch / bench.rate(lambda obs=obs: evaluator.evaluate(obs), batch, cfg.seconds / 2), 7)
    return {"batches": list(FORWARD_BATCHES), "seconds": out}


def _generations(ctx: _Context) -> dict[str, Any]:
    from connectx_az.training import config, devices, runs, sizing, train

    cfg = ctx.config
    run_config = config.make_config(cfg.preset, overrides=[f"device={cfg.device}"])
    run_config = sizing.sized(run_config, cores=devices.available_cores(),
                              gpu=devices.resolve_device(cfg.device).type == "cuda")
    ctx.run_dir = ctx.out_dir / "run"
    if (ctx.run_dir / "config.json").exists():
        shutil.rmtree(ctx.run_dir)  # an earlier check's run in the same folder
    reserve = 40.0 if cfg.num_moves else 10.0  # for the submission step
    wanted = min(cfg.generations, run_config.num_generations)
    train.run(ctx.run_dir, run_config, num_generations=wanted, progress=False,
              time_budget=max(1.0, ctx.left - reserve))
    rows = runs.read_metrics(ctx.run_dir)
    if not rows:
        raise RuntimeError("no generation finished inside the budget")
    keep = ("generation", "seconds", "selfplay_seconds", "train_seconds", "num_games", "num_positions",
            "num_evaluations", "evals_per_second", "replay_positions")
    out: dict[str, Any] = {"rows": [{k: r[k] for k in keep if k in r} for r in rows]}
    if len(rows) < wanted:
        out["reason"] = f"{len(rows)} of {wanted} generations inside the budget"
    t4 = sizing.sized(config.make_config(cfg.preset), cores=KAGGLE_CORES, gpu=True)
    out["projection"] = project(out["rows"], num_generations=run_config.num_generations,
                                num_parallel_games=run_config.selfplay.num_parallel_games,
                                num_workers=_workers(run_config.selfplay.num_workers),
                                figures=ctx.figures, device_name=_device_name(cfg.device),
                                t4_parallel_games=t4.selfplay.num_parallel_games)
    return out


def _device_name(device: str) -> str:
    import torch

    from connectx_az.training import devices

    resolved = devices.resolve_device(device)
    return torch.cuda.get_device_name(resolved) if resolved.type == "cuda" else "cpu"


def _submission(ctx: _Context) -> dict[str, Any]:
    from connectx_az.tools import builder
    from connectx_az.training import export
    from connectx_az.training.network import load_checkpoint

    if ctx.run_dir is None or not (ctx.run_dir / "checkpoint.pt").is_file():
        return {"status": "skipped", "reason": "no run to export (the generations step did not finish one)"}
    net, _ = load_checkpoint(ctx.run_dir / "checkpoint.pt")
    report = export.export_onnx(net, ctx.run_dir / "model.onnx")
    built = builder.build_submission(report.path, ctx.run_dir / "submission.py")
    out: dict[str, Any] = {"onnx_bytes": report.num_bytes, "submission_mb": round(built.num_bytes / 1e6, 3),
                           "book_entries": built.book_entries}
    if ctx.config.num_moves:
        played = bench_agent.bench_submission(report.path, num_moves=ctx.config.num_moves,
                                        act_timeout=ctx.config.act_timeout, timeout=max(30.0, ctx.left))
        out.update({k: played[k] for k in ("backend", "load_seconds", "move_seconds", "move_simulations",
                                           "peak_rss_mb")})
    return out


# --------------------------------------------------------------------------- the summary


def format_result(record: dict[str, Any]) -> str:
    """The check's record as the lines the terminal shows."""
    lines = [f"GPU check ({record['date']}, {record.get('total_seconds', 0):.0f} s of a "
             f"{record['config']['budget']:.0f} s budget, preset {record['config']['preset']})"]
    for name, step in record["steps"].items():
        head = f"  {name:<12}{step['status']}" + (f" ({step['seconds']:.0f} s)" if "seconds" in step else "")
        lines.append(head + (f": {step['reason']}" if "reason" in step else ""))
        if step["status"] != "ok":
            continue
        if name == "device":
            lines.append(f"    {step['name']} (capability {step['capability']}), torch {step['torch']}, CUDA "
                         f"{step['cuda']}, {step['cpus']} CPUs; auto precision: {step['auto_precision']} by "
                         f"capability, {step.get('chosen_precision', step['auto_precision'])} chosen by speed")
        elif name == "tests":
            lines.append(f"    {step['summary']}")
        elif name == "throughput":
            for row in step["rows"]:
                if row["evaluator"] == "free":
                    lines.append(f"    tree work alone, batch {row['batch']}: {row['tree_evals_per_s_per_core']:,.0f} "
                                 f"evaluations/s per core")
                else:
                    sized = f" (sized for {row['cores']} cores)" if "cores" in row else ""
                    lines.append(f"    {row['precision']:<9} workers {row['workers']:>2}{sized}: "
                                 f"{row['positions_per_s']:,.1f} positions/s, {row['selfplay_evals_per_s']:,.0f} "
                                 f"evaluations/s (raw {row['raw_evals_per_s']:,.0f} at batch {row['raw_batch']})")
        elif name == "generations":
            for row in step["rows"]:
                lines.append(f"    generation {row['generation']}: {row['seconds']:.1f} s (self-play "
                             f"{row['selfplay_seconds']:.1f}, training {row['train_seconds']:.1f})")
            p = step["projection"]
            lines.append(f"    the preset's {p['num_generations']} generations: {p['hours_here']} hours here")
            t4 = p["t4"]
            lines.append((f"    on a T4 (projected): {t4['generation_seconds']} s a generation, {t4['hours']} hours "
                          + ("at the self-play rate measured here on 4 cores" if t4["tree_rate_measured_on_4_cores"]
                             else f"at this machine's share of the bound ({t4['efficiency']:.0%})")
                          + f", {t4['hours_at_best']} at the bound ({t4['bound']}); "
                          f"{t4['generations_in_11h']} generations in 11 hours")
                         if isinstance(t4, dict) else f"    on a T4: {t4}")
        elif name == "submission":
            lines.append(f"    submission.py {step['submission_mb']} MB with {step['book_entries']:,} book entries"
                         + (f"; moves {step['move_seconds']} s, {step['move_simulations']} simulations "
                            f"({step['backend']})" if "move_seconds" in step else ""))
    return "\n".join(lines)


@contextlib.contextmanager
def _pinned(cores: int) -> Iterator[None]:
    """This process, and what it starts meanwhile, on its first ``cores`` CPUs, as ``taskset`` runs a command."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, sorted(before)[:cores])
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def _bench_sized(*, preset: str, cores: int, seconds: float = 5.0, device: str | None = None,
                precision: str | None = None, checkpoint: str | Path | None = None) -> dict[str, Any]:
    """``bench_selfplay`` of ``preset`` as a run sized for ``cores`` cores plays it (``sizing.sized``, with a GPU
    where ``device`` is one), this process pinned to its first ``cores`` CPUs as ``taskset`` runs it (the workers
    it starts inherit that); the row carries ``cores``."""
    from connectx_az.training import config, devices, sizing

    gpu = devices.resolve_device(device or config.make_config(preset).device).type == "cuda"
    sp = sizing.sized(config.make_config(preset), cores=cores, gpu=gpu).selfplay
    with _pinned(cores):
        row = bench_selfplay.bench_selfplay(
            preset=preset, seconds=seconds, num_workers=sp.num_workers, device=device, precision=precision,
            checkpoint=checkpoint,
            overrides=(f"selfplay.num_parallel_games={sp.num_parallel_games}", f"threads={cores}"))
    return {**row, "cores": cores}


def main(argv: list[str] | None = None) -> int:
    """``python lab/device/gpu_check.py [--out DIR] [--budget S] [--preset P] [--device D] [--json]``; exit 1 if a
    step failed."""
    from connectx_az import errors, extras

    p = argparse.ArgumentParser(prog="gpu_check.py", description="The GPU check: device, CUDA tests, self-play per "
                                "precision, a few generations of the preset and its run projected (here and on a "
                                "T4), a file built and played; skips what would overrun --budget")
    p.add_argument("--out", default="build/gpu-check", help="folder for gpu_check.json, its log and the run "
                   "(default build/gpu-check)")
    p.add_argument("--budget", type=float, default=420.0, help="seconds for all the steps (default 420)")
    p.add_argument("--preset", default="gpu", help="the training preset to measure (default gpu)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, ... (default auto)")
    p.add_argument("--generations", type=int, default=3, help="generations of the preset to time (default 3)")
    p.add_argument("--seconds", type=float, default=3.0, help="each raw-rate measurement (default 3)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = p.parse_args(argv)
    try:
        extras.require("torch", "onnx", "tqdm", needed_by="`make gpu-check`")
        if not (args.budget > 0 and args.generations > 0 and args.seconds > 0):
            raise errors.UserError("--budget, --generations and --seconds must be positive")
    except errors.UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    check = CheckConfig(preset=args.preset, device=args.device, budget=args.budget, generations=args.generations,
                        seconds=args.seconds)
    out = Path(args.out)
    print(f"GPU check into {out} (budget {args.budget:g} s; progress in {out / 'gpu_check.log'})", flush=True)
    record = run(out, check)
    print(json.dumps(record) if args.json else format_result(record))
    print(f"wrote {out / 'gpu_check.json'}")
    return 0 if all(s["status"] != "failed" for s in record["steps"].values()) else 1


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    sys.exit(main())
