"""Device and precision by GPU capability, with ``torch.cuda``'s queries stood in for.

No GPU is needed: each test tells torch what GPU it has (a P100 under a CUDA
12.8 build that dropped its kernels, a T4, an A100, an H100) and checks what
``devices.resolve_device`` and ``network.autocast_dtype`` choose.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest
import torch

from connectx_az.engine import game
from connectx_az.training import config, devices, export, network, replay, train

# torch.cuda.get_arch_list() of a CUDA 12.8 wheel (no Pascal, no Maxwell) and of an older CUDA 12.1 wheel
CU128 = ["sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]
CU121 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]


def fake_gpu(monkeypatch: pytest.MonkeyPatch, name: str, capability: tuple[int, int], arch_list: list[str]) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: list(arch_list))


def test_a_p100_under_a_build_without_its_kernels_falls_back_to_the_cpu_with_one_line(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    fake_gpu(monkeypatch, "Tesla P100-PCIE-16GB", (6, 0), CU128)
    with caplog.at_level(logging.WARNING, logger="connectx_az.training.devices"):
        assert devices.resolve_device("auto") == torch.device("cpu")
    [record] = [r for r in caplog.records if r.name == "connectx_az.training.devices"]
    line = record.getMessage()
    assert "\n" not in line
    assert "Tesla P100-PCIE-16GB" in line and "6.0" in line and "GPU T4 x2" in line and "CPU instead" in line
    with pytest.raises(config.ConfigError, match="compute capability 6.0.*use device auto or cpu"):
        devices.resolve_device("cuda")


def test_a_p100_under_a_build_with_its_kernels_uses_the_gpu_in_float32(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_gpu(monkeypatch, "Tesla P100-PCIE-16GB", (6, 0), CU121)
    assert devices.resolve_device("auto") == torch.device("cuda")
    assert network.autocast_dtype("cuda") is None


@pytest.mark.parametrize(("name", "capability", "dtype"), [
    ("Tesla T4", (7, 5), torch.float16),
    ("Tesla V100-SXM2-16GB", (7, 0), torch.float16),
    ("NVIDIA A100-SXM4-40GB", (8, 0), torch.bfloat16),
    ("NVIDIA L4", (8, 9), torch.bfloat16),
    ("NVIDIA H100 80GB HBM3", (9, 0), torch.bfloat16),
])
def test_supported_gpus_get_cuda_and_the_fast_precision_for_their_capability(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        name: str, capability: tuple[int, int], dtype: torch.dtype) -> None:
    fake_gpu(monkeypatch, name, capability, CU128)
    with caplog.at_level(logging.WARNING):
        assert devices.resolve_device("auto") == torch.device("cuda")
        assert devices.resolve_device("cuda:0") == torch.device("cuda:0")
    assert [r for r in caplog.records if r.name.startswith("connectx_az")] == []
    assert network.autocast_dtype(torch.device("cuda"), "auto") is dtype
    assert network.autocast_dtype("cuda", "float32") is None
    assert network.autocast_dtype("cuda", "float16") is torch.float16
    assert network.autocast_dtype("cuda", "bfloat16") is torch.bfloat16


def test_no_gpu_means_the_cpu_and_bfloat16_only_where_it_has_bfloat16_instructions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert devices.resolve_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    assert not network.cpu_has_fast_bfloat16() and network.autocast_dtype("cpu") is None
    assert network.autocast_dtype("cpu", "bfloat16") is torch.bfloat16  # asked for explicitly
    assert network.autocast_dtype("cpu", "float32") is None
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)  # AMX alone will do
    assert network.cpu_has_fast_bfloat16() and network.autocast_dtype("cpu") is torch.bfloat16
    assert network.autocast_dtype("cpu", "float32") is None  # an explicit float32 is obeyed
    monkeypatch.delattr(torch.cpu, "_is_amx_tile_supported")  # a torch without a probe: no, not an error
    assert not network.cpu_has_fast_bfloat16()
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)  # no oneDNN: no fast bfloat16
    assert not network.cpu_has_fast_bfloat16()
    with pytest.raises(config.ConfigError, match="sees no CUDA GPU"):
        devices.resolve_device("cuda")


def test_bad_device_and_precision_names_are_one_line_config_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_gpu(monkeypatch, "Tesla T4", (7, 5), CU128)
    with pytest.raises(config.ConfigError, match="unknown device 'gpu'"):
        devices.resolve_device("gpu")
    with pytest.raises(config.ConfigError, match="no CUDA device 3"):
        devices.resolve_device("cuda:3")
    with pytest.raises(ValueError, match="precision must be one of auto, float32, float16, bfloat16"):
        network.autocast_dtype("cuda", "fp8")
    with pytest.raises(config.ConfigError, match="precision must be one of"):
        config.make_config("smoke", overrides=["precision=half"])
    assert config.make_config("gpu", overrides=["precision=float16"]).precision == "float16"


def test_training_precision_is_float32_or_bfloat16_and_auto_follows_inference_but_never_float16(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert network.train_autocast_dtype("cpu", "bfloat16") is torch.bfloat16
    monkeypatch.setattr(network, "cpu_has_fast_bfloat16", lambda: True)
    assert network.train_autocast_dtype("cpu", "auto") is torch.bfloat16
    assert network.train_autocast_dtype("cpu", "float32") is None
    monkeypatch.setattr(network, "cpu_has_fast_bfloat16", lambda: False)
    assert network.train_autocast_dtype("cpu", "auto") is None
    fake_gpu(monkeypatch, "Tesla T4", (7, 5), CU128)  # float16 for inference there, float32 for training
    assert network.autocast_dtype("cuda", "auto") is torch.float16
    assert network.train_autocast_dtype("cuda", "auto") is None
    fake_gpu(monkeypatch, "NVIDIA A100", (8, 0), CU128)
    assert network.train_autocast_dtype("cuda", "auto") is torch.bfloat16
    with pytest.raises(ValueError, match="train.precision must be one of auto, float32, bfloat16"):
        network.train_autocast_dtype("cpu", "float16")
    with pytest.raises(config.ConfigError, match="train.precision must be one of"):
        config.make_config("smoke", overrides=["train.precision=float16"])
    assert all(config.make_config(preset).train.precision == "auto" for preset in config.PRESETS)  # the default


@pytest.mark.parametrize(("arch_list", "capability", "covered"), [
    (CU128, (6, 0), False),
    (CU128, (6, 1), False),
    (CU121, (6, 1), True),  # sm_60 machine code runs on 6.1
    (["sm_80"], (8, 6), True),
    (["sm_80"], (7, 5), False),
    (["sm_80"], (9, 0), False),  # machine code does not cross a major version
    (["sm_90a"], (9, 0), True),
    (["sm_90a"], (10, 0), False),
    (["compute_90"], (10, 0), True),  # PTX is compiled at load time for newer GPUs
    (["compute_90"], (8, 9), False),
    ([], (7, 5), False),
])
def test_arch_covers_follows_cuda_compatibility(arch_list: list[str], capability: tuple[int, int],
                                                covered: bool) -> None:
    assert devices.arch_covers(arch_list, capability) is covered


def test_the_evaluator_runs_in_reduced_precision_and_returns_float32(small_net) -> None:
    obs = export.random_positions(64, np.random.default_rng(3))
    logits32, value32 = network.TorchEvaluator(small_net, "cpu", "float32").evaluate(obs)
    evaluator = network.TorchEvaluator(small_net, "cpu", "bfloat16")
    assert evaluator.dtype is torch.bfloat16
    logits16, value16 = evaluator.evaluate(obs)
    assert logits16.dtype == np.float32 and value16.dtype == np.float32
    assert np.abs(logits16 - logits32).max() < 0.1 and np.abs(value16 - value32).max() < 0.05
    assert not np.array_equal(logits16, logits32)  # it did run in bfloat16


def test_folding_batchnorm_keeps_the_eval_outputs(small_net) -> None:
    """The folded copy computes what the eval-mode net does (its BatchNorms hold non-trivial statistics)."""
    folded = network.fold_batchnorm(small_net)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in folded.modules())
    assert any(isinstance(m, torch.nn.BatchNorm2d) for m in small_net.modules())  # the original is untouched
    x = torch.from_numpy(export.random_positions(64, np.random.default_rng(4))).float()
    with torch.inference_mode():
        (logits, value), (want_logits, want_value) = folded(x), small_net(x)
    assert torch.allclose(logits, want_logits, atol=1e-5) and torch.allclose(value, want_value, atol=1e-5)


def test_placing_on_the_cpu_goes_channels_last_and_keeps_outputs_and_checkpoints(make_net, tmp_path) -> None:
    plain = make_net(7)
    placed = network.place(make_net(7), "cpu")
    conv = placed.stem[0].weight
    assert conv.is_contiguous(memory_format=torch.channels_last) and not conv.is_contiguous()
    x = torch.from_numpy(export.random_positions(32, np.random.default_rng(7))).float()
    with torch.inference_mode():
        for got, want in zip(placed(x), plain(x), strict=True):
            assert torch.allclose(got, want, atol=1e-5)
    network.save_checkpoint(tmp_path / "placed.pt", placed)  # read back in the default layout
    loaded, _ = network.load_checkpoint(tmp_path / "placed.pt")
    with torch.inference_mode():
        for got, want in zip(loaded(x), placed(x), strict=True):
            assert torch.allclose(got, want, atol=1e-5)


def test_the_evaluator_answers_for_the_weights_the_net_holds_now(make_net) -> None:
    """Training steps the net in place between self-play calls: the evaluator's folded copy must follow."""
    net = make_net(5)
    evaluator = network.TorchEvaluator(net, "cpu", "float32")
    obs = export.random_positions(32, np.random.default_rng(5))
    before, _ = evaluator.evaluate(obs)
    assert np.array_equal(evaluator.evaluate(obs)[0], before)  # unchanged weights: the same answers
    optimizer = torch.optim.AdamW(net.parameters(), lr=0.05)
    policy = np.full((32, 7), 1 / 7, np.float32)
    data = replay.ReplayData(obs, policy, np.ones(32, np.float32))
    train.train_steps(net, optimizer, data, 3, 16, np.random.default_rng(0), torch.device("cpu"), progress=False)
    after, value = evaluator.evaluate(obs)
    fresh_logits, fresh_value = network.TorchEvaluator(net, "cpu", "float32").evaluate(obs)
    assert not np.allclose(after, before, atol=1e-3)
    np.testing.assert_allclose(after, fresh_logits, atol=1e-6)
    np.testing.assert_allclose(value, fresh_value, atol=1e-6)
    net.load_state_dict(make_net(6).state_dict())  # a checkpoint loaded into it
    np.testing.assert_allclose(evaluator.evaluate(obs)[0],
                               network.TorchEvaluator(make_net(6), "cpu", "float32").evaluate(obs)[0], atol=1e-6)


def test_export_without_onnxruntime_checks_the_numpy_runtime_against_torch(
        small_net, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kaggle's image has no onnxruntime: the notebook's export must still check the file."""
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnxruntime" else real_find_spec(name, *a))
    report = export.export_onnx(small_net, tmp_path / "net.onnx")
    assert report.max_abs_diff is None
    assert report.numpy_max_abs_diff is not None and report.numpy_max_abs_diff <= 1e-4
    monkeypatch.setattr(export, "FP32_TOLERANCE", -1.0)
    with pytest.raises(export.ExportError, match="numpy runtime differs from torch"):
        export.export_onnx(small_net, tmp_path / "other.onnx")
    assert not (tmp_path / "other.onnx").exists()


def test_a_gpu_torch_cannot_use_is_refused_before_the_run_folder_is_written(
        monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    fake_gpu(monkeypatch, "Tesla P100-PCIE-16GB", (6, 0), CU128)
    cfg = config.make_config("smoke", overrides=["device=cuda"])
    with pytest.raises(config.ConfigError, match="compute capability 6.0"):
        train.run(tmp_path / "run", cfg, progress=False)
    assert not (tmp_path / "run").exists()


# --------------------------------------------------------------------------- head widths


def test_default_heads_are_the_recipes_and_a_label_names_heads_other_than_the_first_networks() -> None:
    shapes = {k: tuple(v.shape) for k, v in network.PolicyValueNet(network.NetConfig()).state_dict().items()}
    assert shapes["policy_conv.0.weight"] == (32, 64, 1, 1) and shapes["policy_fc.weight"] == (7, 32 * 42)
    assert shapes["value_conv.0.weight"] == (32, 64, 1, 1) and shapes["value_fc1.weight"] == (64, 32 * 42 + 64)
    assert network.NetConfig().label == "4x64 p32 v32+pool"
    plain = dict(zip(("policy_filters", "value_filters", "value_pool"), config.PLAIN_HEADS, strict=True))
    assert network.NetConfig(**plain).label == "4x64"


def test_wide_heads_with_pooling_and_a_warm_start_from_a_narrow_net(tmp_path) -> None:
    wide = network.NetConfig(num_blocks=1, num_filters=16, policy_filters=32, value_filters=32, value_pool=True)
    assert wide.label == "1x16 p32 v32+pool"
    net = network.PolicyValueNet(wide).eval()
    logits, value = net(torch.zeros(3, 2, 6, 7))
    assert logits.shape == (3, 7) and value.shape == (3,)
    assert net.value_fc1.in_features == 32 * 42 + 16 and net.policy_fc.in_features == 32 * 42
    narrow = network.PolicyValueNet(network.NetConfig(num_blocks=1, num_filters=16, policy_filters=2, value_filters=1,
                                                      value_pool=False))
    path = tmp_path / "narrow.pt"
    network.save_checkpoint(path, narrow)
    with pytest.raises(network.CheckpointError, match="holds a 1x16 network but a 1x16 p32 v32"):
        network.load_into(net, path)
    fresh = network.load_into(net, path, warm_start=True)
    assert fresh == ["policy_conv", "policy_fc", "value_conv", "value_fc1"]
    for name, tensor in narrow.state_dict().items():
        if name.split(".")[0] not in fresh:
            assert torch.equal(net.state_dict()[name], tensor), name
    other_tower = network.PolicyValueNet(network.NetConfig(num_blocks=1, num_filters=24, value_filters=32))
    with pytest.raises(network.CheckpointError, match="holds a 1x16 network.*add blocks, nothing else"):
        network.load_into(other_tower, path, warm_start=True)
    with pytest.raises(config.ConfigError, match="value_filters"):
        config.make_config("smoke", overrides=["net.value_filters=0"])


def test_a_warm_start_into_a_deeper_tower_computes_what_the_checkpoint_did(tmp_path) -> None:
    shallow_config = network.NetConfig(num_blocks=2, num_filters=16, policy_filters=4, value_filters=4,
                                       value_pool=True)
    torch.manual_seed(0)
    shallow = network.PolicyValueNet(shallow_config)
    for module in shallow.modules():  # batch-norm statistics away from their defaults, as after training
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
            torch.nn.init.uniform_(module.weight, 0.5, 1.5)
    path = tmp_path / "shallow.pt"
    network.save_checkpoint(path, shallow)
    deep = network.PolicyValueNet(dataclasses.replace(shallow_config, num_blocks=4))
    assert network.load_into(deep, path, warm_start=True) == ["blocks.2", "blocks.3"]
    obs = torch.from_numpy(np.stack([game.encode(*game.from_moves([4, 4, 5, 3, i])) for i in range(1, 8)])).float()
    with torch.no_grad():
        for training in (False, True):  # running statistics, then training mode's batch statistics
            for a, b in zip(shallow.train(training)(obs), deep.train(training)(obs), strict=True):
                assert torch.allclose(a, b, atol=1e-5), training
    assert all(not block.conv2[1].weight.detach().any() for block in deep.blocks[2:])
    assert deep.blocks[2].conv1[0].weight.detach().any()  # the rest of a new block is random, to learn
    with pytest.raises(network.CheckpointError, match="holds a 2x16"):
        network.load_into(network.PolicyValueNet(dataclasses.replace(shallow_config, num_blocks=1)), path,
                          warm_start=True)


def test_the_fastest_precision_is_float32_or_the_one_auto_picks_and_float32_where_auto_has_none(
        monkeypatch: pytest.MonkeyPatch) -> None:
    net = network.PolicyValueNet(network.NetConfig(num_blocks=1, num_filters=8))
    low = network.autocast_dtype("cpu", "auto")
    expected = {"float32"} | ({str(low).removeprefix("torch.")} if low is not None else set())
    assert network.fastest_precision(net, "cpu", 64, seconds=0.05) in expected
    monkeypatch.setattr(network, "cpu_has_fast_bfloat16", lambda: False)
    assert network.fastest_precision(net, "cpu", 64, seconds=0.05) == "float32"  # nothing to time against
