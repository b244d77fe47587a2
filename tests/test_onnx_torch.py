"""The torch ONNX runtime: the numpy runtime's numbers, its refusals, and a silent fallback without torch."""

from __future__ import annotations

import base64
import hashlib
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper

import connectx_az
from connectx_az.agent import backends, onnx_numpy, onnx_torch
from connectx_az.training import export

SHIPPED = Path(connectx_az.__file__).resolve().parent / "models" / "default.onnx"


@pytest.fixture(autouse=True)
def _keep_torch_threads():
    """Building a model sets torch's threads for the process; give the other tests theirs back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def _assert_same(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], tol: float = 1e-4) -> None:
    assert a[0].shape == b[0].shape and a[1].shape == b[1].shape
    assert a[0].dtype == np.float32 and a[1].dtype == np.float32
    assert np.abs(a[0] - b[0]).max() <= tol and np.abs(a[1] - b[1]).max() <= tol


@pytest.mark.parametrize("fixture", ["small_onnx", "small_onnx16", "wide_onnx"])
def test_matches_the_numpy_runtime(fixture, request):
    data = request.getfixturevalue(fixture).read_bytes()
    model = onnx_torch.TorchOnnxModel(data)
    reference = onnx_numpy.NumpyOnnxModel(data)
    obs = export.random_positions(64, np.random.default_rng(31))
    logits, value = model.evaluate(obs)
    _assert_same((logits, value), reference.evaluate(obs))
    # the agent's batches (one root, then eight leaves) give the batch's numbers
    for first, size in ((0, 1), (5, 8), (63, 1)):
        part = model.evaluate(obs[first:first + size])
        _assert_same(part, (logits[first:first + size], value[first:first + size]), 1e-5)
    # the caller's array is never written to (in-place ops stay on the model's own tensors)
    x = obs.astype(np.float32)
    before = x.copy()
    model.run(x)
    assert np.array_equal(x, before)


def test_matches_the_numpy_runtime_on_the_shipped_model():
    data = SHIPPED.read_bytes()
    obs = export.random_positions(32, np.random.default_rng(32))
    _assert_same(onnx_torch.TorchOnnxModel(data).evaluate(obs), onnx_numpy.NumpyOnnxModel(data).evaluate(obs))


def test_runs_one_thread_and_keeps_the_metadata(small_onnx):
    torch.set_num_threads(2)
    model = onnx_torch.TorchOnnxModel(small_onnx.read_bytes())
    assert torch.get_num_threads() == 1
    assert model.input_name == "obs" and model.output_names == ["logits", "value"]
    assert export.NET_CONFIG_KEY in model.metadata


def _graph_model(nodes, inputs, outputs, inits) -> bytes:
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_small_ops_and_tensor_encodings_match_the_numpy_runtime():
    from test_onnx_numpy import _handmade_model  # Gemm alpha/beta, Cast, Reshape, (Un)Squeeze, Flatten, ...

    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    for raw in (True, False):
        data = _handmade_model(raw=raw)
        got, ref = onnx_torch.TorchOnnxModel(data).run(x), onnx_numpy.NumpyOnnxModel(data).run(x)
        for name in ("y", "z"):
            assert got[name].shape == ref[name].shape and np.abs(got[name] - ref[name]).max() <= 1e-5


def test_pooling_and_concat_match_the_numpy_runtime():
    from test_onnx_numpy import _pool_concat_model  # the wide value head's GlobalAveragePool and Concat

    data = _pool_concat_model()
    x = np.random.default_rng(3).standard_normal((5, 3, 6, 7)).astype(np.float32)
    got, ref = onnx_torch.TorchOnnxModel(data).run(x), onnx_numpy.NumpyOnnxModel(data).run(x)
    for name in ("y", "z"):
        assert got[name].shape == ref[name].shape and np.abs(got[name] - ref[name]).max() <= 1e-5


def test_asymmetric_pads_match_the_numpy_runtime():
    rng = np.random.default_rng(2)
    weight = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    data = _graph_model(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[0, 1, 2, 1]),  # top, left, bottom, right
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("Add", ["r", "c"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 2, 6, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 3, 6, 7])],
        [helper.make_tensor("w", TensorProto.FLOAT, weight.shape, weight.reshape(-1).tolist()),
         helper.make_tensor("b", TensorProto.FLOAT, bias.shape, bias.tolist())],
    )
    x = rng.standard_normal((3, 2, 6, 7)).astype(np.float32)
    got, ref = onnx_torch.TorchOnnxModel(data).run(x)["y"], onnx_numpy.NumpyOnnxModel(data).run(x)["y"]
    assert got.shape == ref.shape == (3, 3, 6, 7) and np.abs(got - ref).max() <= 1e-4


def test_refuses_what_it_cannot_run():
    # the numpy runtime's refusals, word for word (the same reader)
    sigmoid = _graph_model([helper.make_node("Sigmoid", ["x"], ["y"])],
                           [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 7])],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 7])], [])
    with pytest.raises(ValueError, match="unsupported ONNX op.*Sigmoid"):
        onnx_torch.TorchOnnxModel(sigmoid)
    with pytest.raises(ValueError, match="not a readable ONNX model"):
        onnx_torch.TorchOnnxModel(b"not an onnx model at all, just text")
    # a Gemm of two run-time values: the numpy runtime runs it, this one refuses it at load
    gemm = _graph_model([helper.make_node("Gemm", ["x", "x"], ["y"])],
                        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
                        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])], [])
    onnx_numpy.NumpyOnnxModel(gemm)
    with pytest.raises(ValueError, match="weights must be constant"):
        onnx_torch.TorchOnnxModel(gemm)


def test_the_torch_backend_loads_and_scores(small_onnx):
    evaluator, backend, errors = backends.load_model(*_embedded(small_onnx.read_bytes()), ("torch", "numpy"))
    assert backend == "torch" and errors == "" and isinstance(evaluator, onnx_torch.TorchOnnxModel)


def test_without_torch_the_agent_falls_back_to_numpy(small_onnx, monkeypatch):
    data = small_onnx.read_bytes()
    monkeypatch.setitem(sys.modules, "torch", None)  # ``import torch`` now raises ImportError
    evaluator, backend, errors = backends.load_model(*_embedded(data), ("torch", "numpy"))
    assert backend == "numpy" and errors.startswith("torch: ModuleNotFoundError")
    # the same when the module itself is missing (not pasted, or failed to load in the submission)
    monkeypatch.setattr(backends, "onnx_torch", None)
    evaluator, backend, errors = backends.load_model(*_embedded(data), ("torch", "numpy"))
    assert backend == "numpy" and "not available" in errors


def test_a_torch_failure_at_load_falls_back_to_numpy(small_onnx, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("oneDNN says no")

    monkeypatch.setattr(torch.nn.functional, "conv2d", broken)
    _, backend, errors = backends.load_model(*_embedded(small_onnx.read_bytes()), ("torch", "numpy"))
    assert backend == "numpy" and "RuntimeError: oneDNN says no" in errors


def _embedded(data: bytes) -> tuple[str, str]:
    return base64.b64encode(data).decode("ascii"), hashlib.sha256(data).hexdigest()
