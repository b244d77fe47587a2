"""A run on Kaggle's T4 projected from a GPU check's figures on another GPU (``gpu_check.py``'s generations step).

The network's forward time is scaled by the two GPUs' peak throughput from their data sheets
(``PEAK_TFLOPS``), the tree work by the T4 box's cores; see ``project``.
"""

from __future__ import annotations

import statistics
from typing import Any

#: peak dense throughput in TFLOP/s, (float16/bfloat16 tensor cores, float32), by a word of the device's name:
#: the vendor's data sheets (the SXM parts where there are two).  Used only to scale a measured rate to a T4.
PEAK_TFLOPS = {
    "H200": (989.0, 67.0), "H100": (989.0, 67.0), "A100": (312.0, 19.5), "L4": (121.0, 30.3),
    "A10G": (125.0, 31.2), "V100": (125.0, 15.7), "T4": (65.0, 8.1), "P100": (18.7, 9.3),
}
#: the CPU cores of a Kaggle "GPU T4 x2" session, which do the tree work there
KAGGLE_CORES = 4
#: the batch sizes at which the network's forward time is measured, for the latency + per-position model
FORWARD_BATCHES = (32, 512)


def project(rows: list[dict[str, Any]], *, num_generations: int, num_parallel_games: int, num_workers: int,
            figures: dict[str, Any] | None, device_name: str, t4_parallel_games: int | None = None) -> dict[str, Any]:
    """The preset's whole run projected from a few of its generations' ``rows``, here and on a T4.

    Here: the median generation's seconds (leaving out the first, which pays CUDA's warm-up, where there are others)
    times ``num_generations``.  On a T4 (Kaggle's "GPU T4 x2": one GPU used, ``KAGGLE_CORES`` cores, a worker each,
    ``t4_parallel_games`` in flight a worker as ``sizing.sized`` gives them), each part of a generation on its own:

    - self-play is bounded by the slower of the network's work and the tree work (the network scores only what the
      searches' cache does not answer, ``num_network_evaluations``).  The network: its forward time measured here at
      two batch sizes (``figures["forward"]``) fits ``t(B) = latency + B * per_position``; on the T4 the latency is
      kept (launching kernels is host work) and ``per_position`` grows by the ratio of the two GPUs' peak float16
      tensor throughput (``PEAK_TFLOPS``), at the batch the server sends (the games in flight of half the workers).
      The tree work: where ``figures["rows"]`` has self-play sized for ``KAGGLE_CORES`` cores and pinned to them
      (``cores``), that row's measured rate, at this machine's core speed; else the free evaluator's rate per core
      times the workers, and the same bound computed for this machine (``num_workers``) against the self-play rate
      measured here gives the share of its bound that self-play reaches (``efficiency``).  ``hours_at_best`` is at
      the bound, ``hours`` at the measured 4-core rate or at this machine's share of the bound;
    - training, float32, grows by the ratio of the peak float32 throughputs, an upper bound where small steps are
      bound by latency rather than arithmetic;
    - the rest of a generation (replay loading, the held-out and Pons evaluations) is kept as measured here.

    ``t4`` is the reason instead where this device's peak figures are unknown or no throughput was measured.
    """
    steady = rows[1:] or rows
    gen_seconds = statistics.median(r["seconds"] for r in steady)
    selfplay_seconds = statistics.median(r["selfplay_seconds"] for r in steady)
    train_seconds = statistics.median(r["train_seconds"] for r in steady)
    evaluations = statistics.median(r["num_evaluations"] for r in steady)
    network_evaluations = statistics.median(r.get("num_network_evaluations", r["num_evaluations"]) for r in steady)
    out: dict[str, Any] = {
        "generation_seconds": round(gen_seconds, 1), "selfplay_seconds": round(selfplay_seconds, 1),
        "train_seconds": round(train_seconds, 1), "evaluations_per_generation": int(evaluations),
        "selfplay_evals_per_s": round(evaluations / selfplay_seconds),
        "hours_here": round(gen_seconds * num_generations / 3600, 2), "num_generations": num_generations,
    }
    peaks = next((v for k, v in PEAK_TFLOPS.items() if k in device_name.upper().split()), None)
    free = [r for r in (figures or {}).get("rows", []) if r.get("evaluator") == "free"]
    if peaks is None or not free:
        out["t4"] = (f"no projection: the peak figures of {device_name!r} are unknown" if peaks is None
                     else "no projection: the tree work's rate was not measured")
        return out
    forward = figures["forward"]["seconds"]  # type: ignore[index]
    (b1, b2), (t1, t2) = FORWARD_BATCHES, (forward[str(FORWARD_BATCHES[0])], forward[str(FORWARD_BATCHES[1])])
    per_position = max((t2 - t1) / (b2 - b1), 0.0)
    latency = max(t1 - b1 * per_position, 1e-6)
    tree_per_core = free[0]["tree_evals_per_s_per_core"]

    def bound(workers: int, scale: float, in_flight: int) -> tuple[float, float]:
        batch = in_flight * max(1, (workers + 1) // 2)
        return batch / (latency + batch * per_position * scale), tree_per_core * max(1, workers)

    def selfplay_bound(workers: int, scale: float, in_flight: int) -> float:
        """Self-play's seconds at the slower rate: the network scores only what the cache does not answer."""
        network_rate, tree_rate = bound(workers, scale, in_flight)
        return max(network_evaluations / network_rate, evaluations / tree_rate)

    t4_in_flight = t4_parallel_games or num_parallel_games
    efficiency = min(1.0, selfplay_bound(num_workers, 1.0, num_parallel_games) / selfplay_seconds)
    tensor_ratio, fp32_ratio = peaks[0] / PEAK_TFLOPS["T4"][0], peaks[1] / PEAK_TFLOPS["T4"][1]
    network_rate, tree_rate = bound(KAGGLE_CORES, tensor_ratio, t4_in_flight)
    rest = max(gen_seconds - selfplay_seconds - train_seconds, 0.0)
    t4_train = train_seconds * fp32_ratio
    t4_bound = selfplay_bound(KAGGLE_CORES, tensor_ratio, t4_in_flight)
    best = t4_bound + t4_train + rest
    measured = next((r for r in (figures or {}).get("rows", []) if r.get("cores") == KAGGLE_CORES), None)
    if measured is not None:  # self-play sized for the T4 box's cores, pinned to them here: its rate, measured
        tree_rate = measured["selfplay_evals_per_s"]
        likely = max(network_evaluations / network_rate, evaluations / tree_rate) + t4_train + rest
    else:
        likely = t4_bound / efficiency + t4_train + rest
    out["t4"] = {
        "hours": round(likely * num_generations / 3600, 2), "generation_seconds": round(likely, 1),
        "generations_in_11h": int(11 * 3600 // likely), "tree_rate_measured_on_4_cores": measured is not None,
        "hours_at_best": round(best * num_generations / 3600, 2), "efficiency": round(efficiency, 3),
        "train_seconds": round(t4_train, 1), "network_evals_per_s": round(network_rate),
        "tree_evals_per_s": round(tree_rate),
        "bound": "network" if network_evaluations / network_rate > evaluations / tree_rate else "tree work",
        "forward_latency_s": round(latency, 6), "forward_per_position_s": round(per_position, 10),
        "tensor_ratio": round(tensor_ratio, 2), "fp32_ratio": round(fp32_ratio, 2),
    }
    return out
