"""A checkpoint made back from an exported ONNX file computes what the file computes, and warm-starts training."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from connectx_az.training import export, unfold
from connectx_az.training.network import load_checkpoint, load_into
from tests.conftest import make_small_net


def _outputs(net, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with torch.no_grad():
        logits, value = net.eval()(torch.from_numpy(obs).float())
    return logits.numpy(), value.numpy()


@pytest.mark.parametrize("net_config", [{}, {"num_blocks": 2, "value_pool": True}])
def test_the_unfolded_network_is_the_exported_one(tmp_path, net_config) -> None:
    net = make_small_net(3, **net_config)
    path = tmp_path / "m.onnx"
    export.export_onnx(net, path)
    out = tmp_path / "m.pt"
    unfold.unfold_file(path, out, config={"seed": 7}, generation=12)
    back, data = load_checkpoint(out)
    assert back.config == net.config and data["generation"] == 12 and data["config"] == {"seed": 7}
    assert data["unfolded_from"]["onnx"] == "m.onnx" and len(data["unfolded_from"]["sha256"]) == 64
    obs = export.random_positions(200, np.random.default_rng(1))
    for got, want in zip(_outputs(back, obs), _outputs(net, obs), strict=True):
        assert np.abs(got - want).max() <= 1e-4


def test_its_batchnorms_hold_the_statistics_of_the_positions_they_were_measured_on(tmp_path) -> None:
    net = make_small_net(4)
    path = tmp_path / "m.onnx"
    export.export_onnx(net, path)
    positions = export.random_positions(512, np.random.default_rng(2))
    back = unfold.unfold(path.read_bytes(), positions)
    obs = torch.from_numpy(positions).float()
    with torch.no_grad():
        stem = back.stem[0](obs)  # the stem's conv: what its BatchNorm normalises
        bn = back.stem[1]
        assert torch.allclose(bn.running_mean, stem.mean(dim=(0, 2, 3)), atol=1e-5)
        assert torch.allclose(bn.running_var, stem.var(dim=(0, 2, 3), unbiased=False), atol=1e-5)
        # in training mode a batch of those very positions computes what eval mode does
        train = back.train()(obs)
        evaluated = back.eval()(obs)
    assert all(torch.allclose(a, b, atol=1e-3) for a, b in zip(train, evaluated, strict=True))
    # and the checkpoint warm-starts a network of its shape, every layer taken
    assert load_into(make_small_net(9), _save(back, tmp_path / "w.pt"), warm_start=True) == []


def _save(net, path):
    from connectx_az.training.network import save_checkpoint

    save_checkpoint(path, net)
    return path


def test_files_that_are_not_float32_exports_are_refused_in_one_line(tmp_path, capsys) -> None:
    net = make_small_net(5)
    export.export_onnx(net, tmp_path / "half.onnx", float16=True)
    with pytest.raises(unfold.UnfoldError, match="not float32"):
        unfold.unfold((tmp_path / "half.onnx").read_bytes())
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    assert unfold.main([str(tmp_path / "junk.onnx"), str(tmp_path / "out.pt")]) == 1
    assert capsys.readouterr().err.count("\n") == 1 and not (tmp_path / "out.pt").exists()
    assert unfold.main([str(tmp_path / "none.onnx"), str(tmp_path / "out.pt")]) == 1
    export.export_onnx(net, tmp_path / "ok.onnx")
    assert unfold.main([str(tmp_path / "ok.onnx"), str(tmp_path / "out.pt")]) == 0 and (tmp_path / "out.pt").is_file()
