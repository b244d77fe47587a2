"""On a real CUDA GPU: the device and precision ``auto`` picks, the evaluator in every precision against the
CPU's float32, self-play with worker processes serving the GPU, and a generation trained there and exported.

Skipped where torch sees no GPU (``make test``, CI); ``make gpu-check`` runs them on one
(``lab/device/gpu_check.py``).  ``tests/test_network.py`` holds the same rules with ``torch.cuda`` stood in for.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conftest import assert_consistent_records, make_small_net  # noqa: E402

from connectx_az.training import config, devices, export, network, runs, train, workers  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA GPU")]


def test_auto_is_this_gpu_with_the_precision_of_its_capability() -> None:
    assert devices.cuda_problem(torch.device("cuda")) is None
    assert devices.resolve_device("auto") == torch.device("cuda")
    major, _ = torch.cuda.get_device_capability()
    expected = torch.bfloat16 if major >= 8 else torch.float16 if major == 7 else None
    assert network.autocast_dtype("cuda", "auto") is expected


@pytest.mark.parametrize("precision, tolerance", [("float32", 1e-2), ("float16", 5e-2), ("bfloat16", 1.5e-1)])
def test_the_gpu_evaluator_agrees_with_the_cpu_in_every_precision(precision: str, tolerance: float) -> None:
    net = make_small_net(seed=1)
    obs = export.random_positions(256, np.random.default_rng(0))
    cpu_logits, cpu_value = network.TorchEvaluator(net, "cpu", "float32").evaluate(obs)
    logits, value = network.TorchEvaluator(make_small_net(seed=1), "cuda", precision).evaluate(obs)
    assert logits.dtype == np.float32 and value.dtype == np.float32
    assert logits.shape == (256, 7) and value.shape == (256,)
    scale = max(1.0, float(np.abs(cpu_logits).max()))
    error = float(np.abs(logits - cpu_logits).max())
    assert error <= tolerance * scale
    assert np.abs(value - cpu_value).max() <= tolerance
    # the best move is the CPU's wherever the CPU's margin is clear of the error measured
    order = np.sort(cpu_logits, axis=1)
    clear = order[:, -1] - order[:, -2] > 2 * error
    assert clear.mean() > 0.5
    np.testing.assert_array_equal(logits[clear].argmax(1), cpu_logits[clear].argmax(1))


def test_worker_processes_play_complete_games_against_the_gpu() -> None:
    cfg = config.make_config("smoke", overrides=["selfplay.num_workers=2", "selfplay.num_games=8"])
    evaluator = network.TorchEvaluator(make_small_net(), "cuda", "auto")
    records, stats = workers.play_games(evaluator, 8, cfg.selfplay, cfg.mcts, np.random.default_rng(0))
    assert len(records) == 8 and stats.num_evaluations > 0
    assert_consistent_records(records)


def test_a_generation_trains_on_the_gpu_and_its_checkpoint_exports_on_the_cpu(tmp_path) -> None:
    cfg = config.make_config("smoke", overrides=["device=cuda", "num_generations=1"])
    ckpt = train.run(tmp_path / "run", cfg, progress=False)
    rows = runs.read_metrics(tmp_path / "run")
    assert [r["generation"] for r in rows] == [0] and rows[0]["device"].startswith("cuda")
    # auto on a GPU is the faster of float32 and the GPU's lower precision, timed at self-play's batch
    low = str(network.autocast_dtype("cuda", "auto")).removeprefix("torch.")
    assert rows[0]["precision"] in {"float32", low}
    assert np.isfinite(rows[0]["policy_loss"]) and np.isfinite(rows[0]["value_loss"])
    net, data = network.load_checkpoint(ckpt)
    assert data["generation"] == 1 and next(net.parameters()).device.type == "cpu"
    report = export.export_onnx(net, tmp_path / "model.onnx")
    assert report.path.is_file() and report.numpy_max_abs_diff is not None
