"""``bench agent``: the submission's search per inference backend, and a freshly built file run as Kaggle runs it
(``bench_submission``, whose child program is ``bench_probes/probe_submission.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from connectx_az.engine import game
from connectx_az.evaluation import kaggle_io
from connectx_az.tools import bench


def bench_agent(model: str | Path, *, seconds: float = 5.0, num_positions: int = 8,
                num_moves: int = 3) -> dict[str, Any]:
    """Per backend: the submission search's simulations per second and the raw evaluation rates.

    The agent's own evaluator factory and search settings (``template.CONFIG``) on Middle-Medium Pons positions, a
    fresh tree per position searched for ``seconds / num_positions``; the raw rates are calls of one position
    (``raw_evals_per_s``) and of ``num_parallel`` (``raw_batch_evals_per_s``), each timed a quarter as long.  The
    backends (``backends.KNOWN_BACKENDS`` that load here) take each position's slices in turn, so a change in the
    machine's load moves all figures alike; ``*_vs_numpy`` divide a backend's figures by the numpy runtime's.  These
    searches run as Python; then, where numba imports, the numpy backend's once more compiled, as the file searches
    on Kaggle (``compiled_sims_per_s``).  Pin the process to one core (``taskset -c 1``) to match Kaggle.  Then
    ``bench_submission`` of a file built for the same model: ``load_seconds``, ``peak_rss_mb`` and a ``submission``
    breakdown."""
    from connectx_az.agent import backends, template
    from connectx_az.engine import mcts, search_tree
    from connectx_az.testsets import pons

    path = Path(model)
    if not path.is_file():
        raise FileNotFoundError(f"model {path} not found; pass --model PATH.onnx")
    data = path.read_bytes()
    num_parallel = template.CONFIG.search.num_parallel
    positions = [pons.position_of(p) for p in pons.load_set("Middle-Medium", limit=num_positions)]
    obs = game.encode(np.array([p for p, _ in positions], np.uint64), np.array([m for _, m in positions], np.uint64))
    batch = np.resize(obs, (num_parallel, *obs.shape[1:]))
    result: dict[str, Any] = {"model": path.name, "num_parallel": num_parallel}
    evaluators = {}
    for backend in backends.KNOWN_BACKENDS:
        try:
            evaluators[backend] = backends.make_evaluator(backend, data)
        except ImportError:
            result[backend] = {"available": False}
            continue
        evaluators[backend].evaluate(obs[:1])
        evaluators[backend].evaluate(batch)
    totals = {b: dict.fromkeys(("raw", "raw_s", "batch", "batch_s", "sims", "search_s"), 0.0) for b in evaluators}
    slice_seconds = seconds / len(positions)
    for i, (position, mask) in enumerate(positions):
        single = obs[i : i + 1]
        for backend, evaluator in evaluators.items():
            t = totals[backend]
            for key, x in (("raw", single), ("batch", batch)):
                start = time.perf_counter()
                while (elapsed := time.perf_counter() - start) < slice_seconds / 4:
                    evaluator.evaluate(x)
                    t[key] += len(x)
                t[key + "_s"] += elapsed
            tree = search_tree.Tree(np.array([position], np.uint64), np.array([mask], np.uint64), capacity=4096)
            start = time.perf_counter()
            t["sims"] += mcts.search(tree, evaluator, template.CONFIG.search, deadline=start + slice_seconds)
            t["search_s"] += time.perf_counter() - start
    rates = {b: {"sims_per_s": t["sims"] / t["search_s"], "raw_evals_per_s": t["raw"] / t["raw_s"],
                 "raw_batch_evals_per_s": t["batch"] / t["batch_s"]} for b, t in totals.items()}
    for backend, r in rates.items():
        result[backend] = {"available": True, **{k: round(v, 1) for k, v in r.items()},
                           "ratio": round(r["sims_per_s"] / r["raw_evals_per_s"], 3)}
        if backend != "numpy" and "numpy" in rates:
            for key, label in (("sims_per_s", "sims"), ("raw_evals_per_s", "raw"), ("raw_batch_evals_per_s", "batch")):
                result[backend][f"{label}_vs_numpy"] = round(r[key] / rates["numpy"][key], 3)
    if "numpy" in evaluators and mcts.compile_search():  # the search compiled, as the file runs it where numba imports
        sims, spent = 0, 0.0
        for position, mask in positions:
            tree = search_tree.Tree(np.array([position], np.uint64), np.array([mask], np.uint64), capacity=4096)
            start = time.perf_counter()
            sims += mcts.search(tree, evaluators["numpy"], template.CONFIG.search, deadline=start + slice_seconds)
            spent += time.perf_counter() - start
        result["numpy"]["compiled_sims_per_s"] = round(sims / spent, 1)
        result["numpy"]["compiled_vs_python"] = round(sims / spent / rates["numpy"]["sims_per_s"], 3)
    probe = bench_submission(path, num_moves=num_moves)
    result["load_seconds"] = probe.pop("load_seconds")
    result["peak_rss_mb"] = probe.pop("peak_rss_mb")
    result["submission"] = probe
    return {**result, **bench.machine()}


_SUBMISSION_PROBE = kaggle_io.sandbox_prelude() + bench.probe_source("submission")


def bench_submission(model: str | Path, *, num_moves: int = 3, act_timeout: float = 2.0,
                     overage: float = 60.0, timeout: float = 300.0) -> dict[str, Any]:
    """Load time and peak memory of a freshly built ``submission.py`` in a fresh interpreter.

    ``load_seconds``: executing the file (numpy already imported, as in Kaggle's harness), decoding the model with
    the numpy backend (onnxruntime blocked, as on Kaggle) and one tiny search of ``num_parallel`` simulations, what a
    game's first move pays before it can search.  ``peak_rss_mb``: the child's peak resident size (``VmHWM``) after
    ``num_moves`` full-budget moves at ``act_timeout`` with ``overage`` in the bank.  ``RuntimeError`` if the child
    fails."""
    from connectx_az.tools import builder

    with tempfile.TemporaryDirectory(prefix="connectx_bench_") as tmp:
        submission = Path(tmp) / "submission.py"
        report = builder.build_submission(model, submission, book_path=None)  # the book would answer the moves
        probe = Path(tmp) / "probe.py"
        probe.write_text(_SUBMISSION_PROBE)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        done = subprocess.run(
            [sys.executable, "-I", str(probe), str(submission), str(num_moves), str(act_timeout), str(overage)],
            cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"submission probe failed: {done.stderr.strip().splitlines()[-1:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    moves = out.pop("moves")
    return {"load_seconds": round(out["load_seconds"], 3), "peak_rss_mb": round(out["peak_rss_mb"], 1),
            "file_mb": round(report.num_bytes / 1e6, 3), "backend": out["backend"],
            **({"load_error": out["load_error"]} if out["backend"] == "uniform" else {}),
            **{k: round(out[k], 3) for k in ("exec_seconds", "decode_seconds", "first_search_seconds")},
            **{k: round(out[k], 1) for k in ("rss_before_mb", "rss_loaded_mb")}, "num_moves": len(moves),
            "clock": f"{act_timeout:g}s + {overage:g}s bank", "move_seconds": [m["seconds"] for m in moves],
            "move_simulations": [m["simulations"] for m in moves], "tree_nodes": out["tree_nodes"]}
