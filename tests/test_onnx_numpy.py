"""The numpy ONNX runtime: agreement with onnxruntime, the wire-format reader, clean refusals."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from connectx_az.agent import backends, onnx_numpy
from connectx_az.training import export


def _ort(data: bytes, x: np.ndarray) -> list[np.ndarray]:
    """Every output of any graph run by onnxruntime (``OrtEvaluator``'s session: ``OnnxRuntimeEvaluator`` also
    refuses a graph that is not the network)."""
    evaluator = backends.OrtEvaluator(data)
    return evaluator.session.run(None, {evaluator.input_name: x.astype(np.float32)})


def test_matches_onnxruntime_fp32(small_onnx):
    data = small_onnx.read_bytes()
    model = onnx_numpy.NumpyOnnxModel(data)
    obs = export.random_positions(64, np.random.default_rng(11))
    ref_logits, ref_value = backends.OnnxRuntimeEvaluator(data).evaluate(obs)
    logits, value = model.evaluate(obs)
    assert logits.shape == (64, 7) and value.shape == (64,)
    assert logits.dtype == np.float32 and value.dtype == np.float32
    assert np.abs(logits - ref_logits).max() <= 1e-4
    assert np.abs(value - ref_value).max() <= 1e-4
    # one position at a time gives the same numbers as the batch
    for i in (0, 17, 63):
        one_logits, one_value = model.evaluate(obs[i:i + 1])
        assert np.abs(one_logits[0] - logits[i]).max() <= 1e-5 and abs(one_value[0] - value[i]) <= 1e-5
    # evaluating does not modify the caller's array (in-place ops stay on temporaries)
    x = obs.astype(np.float32)
    before = x.copy()
    model.run(x)
    assert np.array_equal(x, before)


def test_matches_onnxruntime_fp16(small_onnx, small_onnx16):
    obs = export.random_positions(64, np.random.default_rng(12))
    model16 = onnx_numpy.NumpyOnnxModel(small_onnx16.read_bytes())
    assert model16.has_float16_weights and "Cast" in model16.ops
    logits, value = model16.evaluate(obs)
    ref_logits, ref_value = backends.OnnxRuntimeEvaluator(small_onnx16).evaluate(obs)
    assert np.abs(logits - ref_logits).max() <= 1e-4 and np.abs(value - ref_value).max() <= 1e-4
    full_logits, full_value = onnx_numpy.NumpyOnnxModel(small_onnx.read_bytes()).evaluate(obs)
    scale = max(1.0, float(np.abs(full_logits).max()))
    assert np.abs(logits - full_logits).max() <= 5e-3 * scale
    assert np.abs(value - full_value).max() <= 5e-3 * scale


def test_net_shape_and_metadata(small_onnx):
    model = onnx_numpy.NumpyOnnxModel(small_onnx.read_bytes())
    assert model.net_shape() == {"num_blocks": 1, "num_filters": 16, "value_hidden": 16, "policy_filters": 2,
                                 "value_filters": 1, "value_pool": False, "label": "1x16"}
    assert model.input_name == "obs" and model.output_names == ["logits", "value"]
    assert model.input_shape[1:] == (2, 6, 7)
    assert export.NET_CONFIG_KEY in model.metadata


def test_wide_heads_with_pooling_match_onnxruntime(wide_onnx, tmp_path):
    data = wide_onnx.read_bytes()
    model = onnx_numpy.NumpyOnnxModel(data)
    assert {"GlobalAveragePool", "Concat"} <= model.ops
    assert model.net_shape() == {"num_blocks": 1, "num_filters": 16, "value_hidden": 16, "policy_filters": 8,
                                 "value_filters": 4, "value_pool": True, "label": "1x16 p8 v4+pool"}
    obs = export.random_positions(64, np.random.default_rng(13))
    for batch in (obs, obs[:1]):
        ref_logits, ref_value = backends.OnnxRuntimeEvaluator(data).evaluate(batch)
        logits, value = model.evaluate(batch)
        assert np.abs(logits - ref_logits).max() <= 1e-4 and np.abs(value - ref_value).max() <= 1e-4
    # and with float16 weights
    from conftest import WIDE_HEADS, make_small_net

    path16 = tmp_path / "wide16.onnx"
    export.export_onnx(make_small_net(3, **WIDE_HEADS), path16, float16=True)
    ref_logits, ref_value = backends.OnnxRuntimeEvaluator(path16).evaluate(obs)
    logits, value = onnx_numpy.NumpyOnnxModel(path16.read_bytes()).evaluate(obs)
    assert np.abs(logits - ref_logits).max() <= 1e-4 and np.abs(value - ref_value).max() <= 1e-4


def _pool_concat_model() -> bytes:
    """x[B,3,6,7] -> GlobalAveragePool -> Flatten, concatenated after Flatten(x), on either axis spelling."""
    nodes = [
        helper.make_node("GlobalAveragePool", ["x"], ["p"]),
        helper.make_node("Flatten", ["p"], ["pf"], axis=1),
        helper.make_node("Flatten", ["x"], ["xf"], axis=1),
        helper.make_node("Concat", ["xf", "pf"], ["y"], axis=1),
        helper.make_node("Concat", ["pf", "xf", "pf"], ["z"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 3, 6, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 129]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["B", 132])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def test_pooling_and_concat_ops_match_onnxruntime():
    data = _pool_concat_model()
    x = np.random.default_rng(2).standard_normal((5, 3, 6, 7)).astype(np.float32)
    got = onnx_numpy.NumpyOnnxModel(data).run(x)
    ref = _ort(data, x)
    assert got["y"].shape == ref[0].shape == (5, 129) and got["z"].shape == ref[1].shape
    assert np.abs(got["y"] - ref[0]).max() <= 1e-6 and np.abs(got["z"] - ref[1]).max() <= 1e-6


def _handmade_model(*, raw: bool) -> bytes:
    """x[B,4] -> Gemm (float_data or raw weights) -> Reshape -> Unsqueeze/Squeeze -> Tanh, Add, Identity."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 6)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    half = rng.standard_normal(6).astype(np.float16)

    def tensor(name, array, dtype):
        if raw:
            return helper.make_tensor(name, dtype, array.shape, array.tobytes(), raw=True)
        bits = array.view(np.uint16) if dtype == TensorProto.FLOAT16 else array  # float16 travels as bits
        values = bits.reshape(-1).tolist()
        return helper.make_tensor(name, dtype, array.shape, values)

    inits = [
        tensor("w", w, TensorProto.FLOAT),
        tensor("b", b, TensorProto.FLOAT),
        tensor("half", half, TensorProto.FLOAT16),
        tensor("shape", np.array([-1, 3, 2], np.int64), TensorProto.INT64),
        tensor("axes", np.array([1], np.int64), TensorProto.INT64),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "w", "b"], ["g"], alpha=0.5, beta=2.0),
        helper.make_node("Cast", ["half"], ["half32"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["g", "half32"], ["gh"]),
        helper.make_node("Reshape", ["gh", "shape"], ["r"]),
        helper.make_node("Unsqueeze", ["r", "axes"], ["u"]),
        helper.make_node("Squeeze", ["u", "axes"], ["s"]),
        helper.make_node("Tanh", ["s"], ["t"]),
        helper.make_node("Constant", [], ["c"], value=helper.make_tensor("cv", TensorProto.FLOAT, [1], [0.25])),
        helper.make_node("Add", ["t", "c"], ["tc"]),
        helper.make_node("Relu", ["tc"], ["y"]),
        helper.make_node("Flatten", ["r"], ["f"], axis=1),
        helper.make_node("Identity", ["f"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes, "handmade", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 3, 2]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["B", 6])], inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


@pytest.mark.parametrize("raw", [True, False], ids=["raw_data", "typed_fields"])
def test_tensor_encodings_and_small_ops(raw):
    data = _handmade_model(raw=raw)
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    got = onnx_numpy.NumpyOnnxModel(data).run(x)
    ref = _ort(data, x)
    assert got["y"].shape == ref[0].shape and got["z"].shape == ref[1].shape
    assert np.abs(got["y"] - ref[0]).max() <= 1e-5 and np.abs(got["z"] - ref[1]).max() <= 1e-5


def test_unsupported_op_is_named_at_load():
    graph = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 7])],
    )
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    with pytest.raises(ValueError, match="unsupported ONNX op.*Sigmoid"):
        onnx_numpy.NumpyOnnxModel(data)


def test_strided_conv_is_refused():
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], strides=[2, 2])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 6, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 3, 4])],
        [helper.make_tensor("w", TensorProto.FLOAT, [1, 1, 1, 1], [1.0])],
    )
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    with pytest.raises(ValueError, match="stride"):
        onnx_numpy.NumpyOnnxModel(data)


@pytest.mark.parametrize(
    "make_bad",
    [
        lambda d: b"",
        lambda d: d[: len(d) // 2],
        lambda d: d[:-1],
        lambda d: b"\xff" * 64,
        lambda d: b"not an onnx model at all, just text",
        lambda d: bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8)),
        lambda d: b"\x0a\xff\xff\xff\xff\x0f" + d,  # a length far beyond the end
    ],
    ids=["empty", "half", "minus_one_byte", "ff", "text", "random", "huge_length"],
)
def test_corrupt_bytes_raise_value_error(small_onnx, make_bad):
    with pytest.raises(ValueError, match="not a readable ONNX model|unsupported|graph"):
        onnx_numpy.NumpyOnnxModel(make_bad(small_onnx.read_bytes()))


def test_mutated_bytes_load_or_raise_value_error(small_onnx):
    """Random byte flips either still load or raise ValueError; nothing else, never a hang."""
    data = bytearray(small_onnx.read_bytes())
    rng = np.random.default_rng(5)
    outcomes = {"loaded": 0, "refused": 0}
    for _ in range(150):
        bad = bytearray(data)
        for pos in rng.integers(0, len(bad), size=int(rng.integers(1, 4))):
            bad[pos] = int(rng.integers(0, 256))
        try:
            onnx_numpy.NumpyOnnxModel(bytes(bad))
            outcomes["loaded"] += 1
        except ValueError:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0


def test_non_bytes_input_is_refused():
    with pytest.raises(ValueError, match="model must be bytes"):
        onnx_numpy.NumpyOnnxModel(12345)
