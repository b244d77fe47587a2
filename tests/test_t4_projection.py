"""The T4 projection's arithmetic (``lab/device/t4_projection.py``), on figures made up to check it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab" / "device"))
import t4_projection  # noqa: E402


def test_the_t4_projection_scales_each_part_of_a_generation_as_its_docstring_says() -> None:
    rows = [{"seconds": 99.0, "selfplay_seconds": 90.0, "train_seconds": 5.0, "num_evaluations": 1_600_000},
            *[{"seconds": 25.0, "selfplay_seconds": 20.0, "train_seconds": 2.0, "num_evaluations": 1_600_000}] * 2]
    # forward time 1 ms + 1 us a position; tree work 10,000 evaluations a second per core
    figures = {"forward": {"seconds": {"32": 1e-3 + 32e-6, "512": 1e-3 + 512e-6}},
               "rows": [{"evaluator": "free", "tree_evals_per_s_per_core": 10_000.0}]}
    p = t4_projection.project(rows, num_generations=100, num_parallel_games=64, num_workers=16, figures=figures,
                          device_name="NVIDIA H100 80GB HBM3")
    # here: the median generation after the first (warm-up), times the run's generations
    assert p["generation_seconds"] == 25.0 and p["hours_here"] == round(25.0 * 100 / 3600, 2)
    # here the bound is the tree work (16 x 10,000 < 512 / 1.512 ms); self-play reached 80,000 of its 160,000
    t4 = p["t4"]
    assert t4["efficiency"] == 0.5
    # T4: 4 workers' tree work (40,000) is slower than the network at 128 a call, its per-position time x 989/65
    assert t4["bound"] == "tree work" and t4["tree_evals_per_s"] == 40_000
    assert t4["network_evals_per_s"] == round(128 / (1e-3 + 128e-6 * 989 / 65))
    train = 2.0 * 67 / 8.1
    rest = 25.0 - 20.0 - 2.0
    assert t4["hours_at_best"] == round((1_600_000 / 40_000 + train + rest) * 100 / 3600, 2)
    assert t4["hours"] == round((1_600_000 / 20_000 + train + rest) * 100 / 3600, 2)
    # The network scores only what the searches' cache does not answer: with a quarter of the positions its
    # share (400,000 / 43,425 a second on the T4) falls below the tree work's (1,600,000 / 80,000), which bounds.
    cached = [{**row, "num_network_evaluations": 400_000} for row in rows]
    figures["rows"][0]["tree_evals_per_s_per_core"] = 20_000.0
    t4 = t4_projection.project(cached, num_generations=100, num_parallel_games=64, num_workers=16, figures=figures,
                           device_name="NVIDIA H100 80GB HBM3")["t4"]
    assert t4["bound"] == "tree work" and t4["efficiency"] == 0.25  # here: 5 s of tree work, 20 s measured
    assert t4["hours_at_best"] == round((1_600_000 / 80_000 + train + rest) * 100 / 3600, 2)
    uncached = t4_projection.project(rows, num_generations=100, num_parallel_games=64, num_workers=16, figures=figures,
                                 device_name="NVIDIA H100 80GB HBM3")["t4"]
    assert uncached["bound"] == "network"
    network_seconds = 1_600_000 / uncached["network_evals_per_s"]
    assert uncached["hours_at_best"] == round((network_seconds + train + rest) * 100 / 3600, 2)
    # sized for the T4 box (256 in flight a worker) and with self-play measured here on 4 cores, pinned: the
    # network is called with 512 positions, and the tree work runs at the measured rate
    measured = {**figures, "rows": [*figures["rows"], {"cores": 4, "selfplay_evals_per_s": 50_000.0}]}
    t4 = t4_projection.project(rows, num_generations=100, num_parallel_games=64, num_workers=16, figures=measured,
                           device_name="NVIDIA H100 80GB HBM3", t4_parallel_games=256)["t4"]
    network_rate = 512 / (1e-3 + 512e-6 * 989 / 65)
    assert t4["network_evals_per_s"] == round(network_rate) and t4["tree_rate_measured_on_4_cores"]
    likely = max(1_600_000 / network_rate, 1_600_000 / 50_000) + train + rest
    assert t4["hours"] == round(likely * 100 / 3600, 2) and t4["generations_in_11h"] == int(11 * 3600 // likely)
    cpu = t4_projection.project(rows, num_generations=100, num_parallel_games=64, num_workers=2, figures=figures,
                            device_name="cpu")
    assert cpu["hours_here"] == p["hours_here"] and "unknown" in cpu["t4"]
