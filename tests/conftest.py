"""Shared fixtures: a small policy-value net with non-trivial BatchNorm, exported once per session; a uniform
evaluator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: a 1x16 net with the first networks' plain heads (``config.PLAIN_HEADS``); ``WIDE_HEADS`` for wide ones
SMALL_NET = {"num_blocks": 1, "num_filters": 16, "value_hidden": 16, "policy_filters": 2, "value_filters": 1,
             "value_pool": False}
WIDE_HEADS = {"policy_filters": 8, "value_filters": 4, "value_pool": True}


def assert_consistent_records(records) -> None:
    """Self-play records (``selfplay.GameRecord``) whose targets have the documented shapes and signs."""
    import numpy as np

    for r in records:
        t = len(r.value)
        assert r.obs.shape == (t, 2, 6, 7) and r.policy.shape == (t, 7)
        np.testing.assert_allclose(r.policy.sum(axis=1), 1, atol=1e-5)
        assert set(np.unique(r.value)) <= {-1.0, 0.0, 1.0}
        # The first position is the game's start (the empty board unless a prefix or a fork); every ply is recorded.
        assert r.obs[0].sum() == r.start_ply and (r.opening != "empty" or r.start_ply == 0)
        # The game's one result, from the side to move at each ply: the last mover won, or the board filled up.
        assert r.value[-1] == 1 or (r.value[-1] == 0 and r.num_plies == 42)
        np.testing.assert_array_equal(r.value, r.value[-1] * (-1.0) ** np.arange(t)[::-1])
        assert r.first_player_result == (r.value[0] if r.start_ply % 2 == 0 else -r.value[0])


@pytest.fixture(params=["python", "compiled"])
def search_path(request, monkeypatch) -> str:
    """Run the test twice: the search (and self-play's memory) as plain Python, then compiled by numba (skipped
    where numba does not compile).  The same functions either way (``engine/jit.py``)."""
    from connectx_az.engine import mcts
    from connectx_az.training import selfplay

    if request.param == "compiled":
        if not selfplay.compile_selfplay():
            pytest.skip(f"numba does not compile: {mcts.compile_error()}")
    else:
        for compiler in (mcts._COMPILER, selfplay._COMPILER):
            monkeypatch.setattr(compiler, "cached", lambda: None)
    return request.param


class UniformEvaluator:
    """Equal priors and a drawn value everywhere (``search_tree.Evaluator``); counts calls."""

    def __init__(self) -> None:
        self.num_calls = 0
        self.num_positions = 0

    def evaluate(self, obs):
        import numpy as np

        self.num_calls += 1
        self.num_positions += len(obs)
        return np.zeros((len(obs), 7), np.float32), np.zeros(len(obs), np.float32)


def make_small_net(seed: int = 0, **net_config):
    """A 1x16 net (``net_config`` overrides its ``NetConfig``) whose BatchNorm layers hold made-up
    statistics, so that folding them matters."""
    import torch

    from connectx_az.training.network import NetConfig, PolicyValueNet

    generator = torch.Generator().manual_seed(seed)
    net = PolicyValueNet(NetConfig(**{**SMALL_NET, **net_config}))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.3)
        for module in net.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.copy_(torch.randn(module.num_features, generator=generator) * 0.2)
                module.running_var.copy_(torch.rand(module.num_features, generator=generator) + 0.5)
    return net.eval()


@pytest.fixture(scope="session")
def make_net():
    """``make_net(seed)`` -> a fresh small net (for tests that change or train it)."""
    return make_small_net


@pytest.fixture(scope="session")
def small_net():
    return make_small_net()


@pytest.fixture(scope="session")
def small_onnx(small_net, tmp_path_factory) -> Path:
    """Path of the small net exported as float32 ONNX (parity-checked by the export)."""
    from connectx_az.training.export import export_onnx

    path = tmp_path_factory.mktemp("onnx") / "small.onnx"
    export_onnx(small_net, path)
    return path


@pytest.fixture(scope="session")
def wide_onnx(tmp_path_factory) -> Path:
    """Path of a small net with wide heads and a pooled value head, exported as float32 ONNX."""
    from connectx_az.training.export import export_onnx

    path = tmp_path_factory.mktemp("onnx_wide") / "wide.onnx"
    export_onnx(make_small_net(3, **WIDE_HEADS), path)
    return path


@pytest.fixture(scope="session")
def small_onnx16(small_net, tmp_path_factory) -> Path:
    """Path of the small net exported with float16 weights."""
    from connectx_az.training.export import export_onnx

    path = tmp_path_factory.mktemp("onnx16") / "small16.onnx"
    export_onnx(small_net, path, float16=True)
    return path


def toy_onnx(*, planes: int = 2, moves: int = 7, value: bool = True, value_weight: float = 0.1) -> bytes:
    """A tiny ONNX model of linear heads, shaped as the network (``obs[B, 2, 6, 7]`` -> ``logits[B, 7]``, ``value
    [B, 1]``) unless told otherwise: ``planes`` input planes, ``moves`` logits, no value output (``value=False``);
    ``value_weight`` fills the value head's weights (``nan``: a value that is not finite on every board)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    n = planes * 6 * 7
    weights = [numpy_helper.from_array(np.random.default_rng(0).normal(0, 0.1, (n, moves)).astype(np.float32), "wp"),
               numpy_helper.from_array(np.full((n, 1), value_weight, np.float32), "wv")]
    nodes = [helper.make_node("Flatten", ["obs"], ["flat"], axis=1),
             helper.make_node("Gemm", ["flat", "wp"], ["logits"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["B", moves])]
    if value:
        nodes += [helper.make_node("Gemm", ["flat", "wv"], ["v"]), helper.make_node("Tanh", ["v"], ["value"])]
        outputs.append(helper.make_tensor_value_info("value", TensorProto.FLOAT, ["B", 1]))
    graph = helper.make_graph(nodes, "toy", [helper.make_tensor_value_info("obs", TensorProto.FLOAT,
                                                                           ["B", planes, 6, 7])], outputs, weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def cli_in_one_process(runs: list[list[str]], cwd: Path) -> list[list]:
    """``[exit status, stderr]`` of each command line of ``runs``, run in turn by ``main`` in one fresh process
    (validate pins its process to one core and blocks packages, as Kaggle's sandbox would: not the test's)."""
    script = ("import contextlib, io, json, sys\nfrom connectx_az.cli.main import main\nout = []\n"
              "for argv in json.loads(sys.argv[1]):\n    err = io.StringIO()\n"
              "    with contextlib.redirect_stderr(err):\n        code = main(argv)\n"
              "    out.append([code, err.getvalue()])\nprint(json.dumps(out))\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", script, json.dumps(runs)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])
