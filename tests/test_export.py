"""ONNX export: torch/onnxruntime parity, dynamic batch, float16, refusal of bad files."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import onnx
import pytest
import torch

from connectx_az.agent import backends, onnx_numpy
from connectx_az.engine import game
from connectx_az.training import export


def _torch(net, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with torch.inference_mode():
        logits, value = net(torch.from_numpy(obs.astype(np.float32)))
    return logits.numpy(), value.numpy()


def test_export_report_and_parity(small_net, tmp_path):
    path = tmp_path / "net.onnx"
    report = export.export_onnx(small_net, path)
    data = path.read_bytes()
    assert report.path == path and report.num_bytes == len(data)
    assert report.sha256 == hashlib.sha256(data).hexdigest()
    assert report.max_abs_diff is not None and report.max_abs_diff <= 1e-4
    assert report.numpy_max_abs_diff is not None and report.numpy_max_abs_diff <= 1e-4
    assert report.num_positions == 64 and not report.float16 and report.net_label == "1x16"
    assert not list(tmp_path.glob(".*.tmp"))  # the temp file was renamed away

    # independent check on other positions
    obs = export.random_positions(64, np.random.default_rng(7))
    ref = _torch(small_net, obs)
    got = backends.OnnxRuntimeEvaluator(path).evaluate(obs)
    assert np.abs(ref[0] - got[0]).max() <= 1e-4 and np.abs(ref[1] - got[1]).max() <= 1e-4


def test_graph_uses_only_ops_the_numpy_runtime_has(small_onnx):
    model = onnx.load(str(small_onnx))
    ops = {node.op_type for node in model.graph.node}
    assert ops <= onnx_numpy.SUPPORTED_OPS
    assert "BatchNormalization" not in ops  # folded into the convolutions
    assert [i.name for i in model.graph.input] == ["obs"]
    assert [o.name for o in model.graph.output] == ["logits", "value"]


@pytest.mark.parametrize("batch", [1, 5, 64])
def test_dynamic_batch(small_net, small_onnx, batch):
    obs = export.random_positions(batch, np.random.default_rng(batch))
    logits, value = backends.OnnxRuntimeEvaluator(small_onnx.read_bytes()).evaluate(obs)
    assert logits.shape == (batch, game.NUM_ACTIONS) and value.shape == (batch,)
    assert logits.dtype == np.float32 and value.dtype == np.float32
    ref = _torch(small_net, obs)
    assert np.abs(ref[0] - logits).max() <= 1e-4 and np.abs(ref[1] - value).max() <= 1e-4


def test_random_positions_are_legal_and_unfinished():
    obs = export.random_positions(64, np.random.default_rng(0))
    assert obs.shape == (64, 2, 6, 7) and obs.dtype == np.uint8
    plies = obs.reshape(64, -1).sum(axis=1)
    assert plies.min() == 0 or plies.max() > 20  # spread over the game
    for planes in obs:
        position, mask = game.decode(planes)
        assert game.outcome(position, mask) is None
        own, opp = int(planes[0].sum()), int(planes[1].sum())
        assert opp - own in (0, 1)  # the side to move never has more stones
        assert game.encode(position, mask).tolist() == planes.tolist()


def test_float16_export_halves_the_file(small_net, small_onnx, small_onnx16):
    info16 = export.model_card(small_onnx16)
    info32 = export.model_card(small_onnx)
    assert info16["float16"] and not info32["float16"]
    assert info16["num_bytes"] < 0.65 * info32["num_bytes"]  # names and Cast nodes cost a little
    obs = export.random_positions(32, np.random.default_rng(3))
    ref = _torch(small_net, obs)
    got = backends.OnnxRuntimeEvaluator(small_onnx16).evaluate(obs)
    scale = max(1.0, float(np.abs(ref[0]).max()))
    assert np.abs(ref[0] - got[0]).max() <= export.FP16_TOLERANCE * scale
    assert np.abs(ref[1] - got[1]).max() <= export.FP16_TOLERANCE * scale


def test_model_card(small_onnx):
    info = export.model_card(small_onnx)
    data = small_onnx.read_bytes()
    assert info["sha256"] == hashlib.sha256(data).hexdigest() and info["num_bytes"] == len(data)
    assert info["net"] == {"num_blocks": 1, "num_filters": 16, "value_hidden": 16, "policy_filters": 2,
                           "value_filters": 1, "value_pool": False, "label": "1x16"}
    assert info["opset"] == export.OPSET and "Conv" in info["ops"]


def test_failed_parity_check_writes_nothing(small_net, tmp_path, monkeypatch):
    path = tmp_path / "net.onnx"
    path.write_bytes(b"previous model")
    monkeypatch.setattr(export, "FP32_TOLERANCE", -1.0)
    with pytest.raises(export.ExportError, match="differs from torch"):
        export.export_onnx(small_net, path)
    assert path.read_bytes() == b"previous model"
    assert not list(tmp_path.glob(".*.tmp"))


def test_export_leaves_the_net_alone(make_net, tmp_path):
    net = make_net(seed=1).train()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    export.export_onnx(net, tmp_path / "a.onnx", num_positions=8)
    assert net.training
    after = net.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_corrupt_and_missing_files_are_refused(small_onnx, tmp_path):
    data = small_onnx.read_bytes()
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(data[: len(data) // 3])
    with pytest.raises(ValueError, match="onnxruntime cannot load"):
        backends.OnnxRuntimeEvaluator(bad)
    with pytest.raises(ValueError, match="not a readable ONNX model"):
        export.model_card(bad)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        export.model_card(tmp_path / "missing.onnx")
    with pytest.raises(FileNotFoundError):
        backends.OnnxRuntimeEvaluator(tmp_path / "missing.onnx")


def test_the_shipped_checkpoint_is_the_shipped_model() -> None:
    """``models/default.pt`` (what ``--init-model`` warm-starts from) computes what ``models/default.onnx`` does:
    a release that copies one and forgets the other fails here."""
    from connectx_az import paths
    from connectx_az.training.network import load_checkpoint

    net, data = load_checkpoint(paths.DEFAULT_CHECKPOINT)
    net.eval()
    obs = export.random_positions(256, np.random.default_rng(0))
    model = onnx_numpy.NumpyOnnxModel(paths.DEFAULT_MODEL.read_bytes())
    logits, value = model.evaluate(obs)
    want_logits, want_value = _torch(net, obs)
    assert np.abs(logits - want_logits).max() < 1e-4 and np.abs(value - want_value.reshape(-1)).max() < 1e-4
    assert "optimizer" not in data and data["generation"] == json.loads(paths.DEFAULT_CARD.read_text())["generation"]


def test_a_folder_or_an_unwritable_path_is_one_line_and_nothing_is_written(small_net, tmp_path, capsys):
    from connectx_az.cli import main as cli_main
    from connectx_az.training.network import save_checkpoint

    save_checkpoint(tmp_path / "checkpoint.pt", small_net)
    (tmp_path / "build").mkdir()
    (tmp_path / "a_file").write_text("")
    for out, said in ((tmp_path / "build", f"{tmp_path / 'build'} is a folder: give the model's file name"),
                      (tmp_path / "a_file" / "model.onnx", f"cannot write {tmp_path / 'a_file' / 'model.onnx'}")):
        assert cli_main.main(["export", str(tmp_path / "checkpoint.pt"), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {said}") and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a_file", "build", "checkpoint.pt"]
