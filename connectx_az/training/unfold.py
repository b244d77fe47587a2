"""A training checkpoint made back from an exported ONNX model, for warm starts where only the ONNX was kept.

``export`` folds every BatchNorm into the convolution before it: the graph holds ``W' = W * g / s`` and
``b' = beta - mean * g / s`` (``s = sqrt(var + eps)``), and the BatchNorm's four vectors are gone.  ``unfold``
puts each folded convolution back as the network's conv + BatchNorm pair: the conv takes ``W'``, and the
BatchNorm is set so that in eval mode it adds ``b'`` exactly, with running statistics measured on
``positions`` (per channel, the mean ``m`` and variance ``v`` of ``W' x``)::

    running_mean = m, running_var = v, weight = sqrt(v + eps), bias = m + b'

so ``(z - m) / sqrt(v + eps) * sqrt(v + eps) + m + b' = z + b'``.  In eval mode the checkpoint computes what
the ONNX file computes (checked: ``TOLERANCE``); in training mode a batch drawn like ``positions``
normalises with statistics near ``m`` and ``v``, so a warm start goes on from this network, not from a
rescaled one.  The checkpoint holds no optimizer state (a warm start never reads it).

    python -m connectx_az.training.unfold MODEL.onnx OUT.pt [--config RUN/config.json] [--generation N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from torch import nn

from connectx_az.agent import onnx_numpy
from connectx_az.training.export import NET_CONFIG_KEY, random_positions
from connectx_az.training.network import NetConfig, PolicyValueNet, save_checkpoint

#: max |difference| of logits and value between the unfolded network (eval mode) and the ONNX file
TOLERANCE = 1e-4
#: positions the BatchNorm statistics are measured on (random legal positions over the whole game)
NUM_POSITIONS = 4096


class UnfoldError(ValueError):
    """An ONNX file that is not a float32 export of this package's network."""


def _conv_layers(net: PolicyValueNet) -> list[nn.Sequential]:
    """The network's conv + BatchNorm pairs in the order its forward pass (and so the exported graph) runs them."""
    blocks = [pair for block in net.blocks for pair in (block.conv1, block.conv2)]
    return [net.stem, *blocks, net.policy_conv, net.value_conv]


def _read(model: onnx.ModelProto) -> tuple[NetConfig, list[tuple[np.ndarray, np.ndarray]], dict[str, np.ndarray]]:
    """The net config, the (weight, bias) of each Conv in graph order, and the Gemm initializers by name."""
    meta = {p.key: p.value for p in model.metadata_props}
    if NET_CONFIG_KEY not in meta:
        raise UnfoldError(f"no {NET_CONFIG_KEY} in its metadata: not exported by connectx_az")
    config = NetConfig(**json.loads(meta[NET_CONFIG_KEY]))
    inits = {i.name: numpy_helper.to_array(i).copy() for i in model.graph.initializer}
    if any(a.dtype != np.float32 for a in inits.values() if a.dtype.kind == "f"):
        raise UnfoldError("its weights are not float32 (a float16 export cannot be unfolded exactly)")
    convs = []
    for node in model.graph.node:
        if node.op_type == "Conv":
            if len(node.input) != 3 or not all(name in inits for name in node.input[1:]):
                raise UnfoldError(f"Conv {node.name or node.output[0]} has no folded bias")
            convs.append((inits[node.input[1]], inits[node.input[2]]))
    return config, convs, inits


def unfold(data: bytes, positions: np.ndarray | None = None) -> PolicyValueNet:
    """The network (eval mode) that ``data``, an ONNX file written by ``export.export_onnx``, was exported from,
    its BatchNorms set from statistics measured on ``positions`` (default: ``NUM_POSITIONS`` random ones).
    Raises ``UnfoldError`` when the file is not such an export or the result differs from it."""
    try:
        model = onnx.load_from_string(data)
    except Exception as exc:  # protobuf raises its own DecodeError for bytes that are not a model
        raise UnfoldError(f"not a readable ONNX file ({type(exc).__name__})") from exc
    try:
        config, convs, inits = _read(model)
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise UnfoldError(f"its network config is not this package's ({exc})") from exc
    net = PolicyValueNet(config).eval()
    layers = _conv_layers(net)
    if len(layers) != len(convs):
        raise UnfoldError(f"{len(convs)} convolutions in the graph, a {config.label} network has {len(layers)}")
    with torch.no_grad():
        for (weight, bias), (conv, bn) in zip(convs, layers, strict=True):
            if tuple(conv.weight.shape) != weight.shape:
                raise UnfoldError(f"a convolution of shape {weight.shape} where {tuple(conv.weight.shape)} belongs")
            conv.weight.copy_(torch.from_numpy(weight))
            bn.weight.fill_(1.0)
            bn.bias.copy_(torch.from_numpy(bias))
            bn.running_mean.zero_()
            bn.running_var.fill_(1.0 - bn.eps)  # sqrt(var + eps) = 1: the pair computes W'x + b'
        for name in ("policy_fc", "value_fc1", "value_fc2"):
            linear = getattr(net, name)
            linear.weight.copy_(torch.from_numpy(inits[f"{name}.weight"]))
            linear.bias.copy_(torch.from_numpy(inits[f"{name}.bias"]))
        obs = torch.from_numpy(random_positions(NUM_POSITIONS, np.random.default_rng(0)) if positions is None
                               else positions).float()
        stats: list[tuple[torch.Tensor, torch.Tensor]] = []
        hooks = [conv.register_forward_hook(
            lambda _m, _i, z: stats.append((z.mean(dim=(0, 2, 3)), z.var(dim=(0, 2, 3), unbiased=False))))
            for conv, _ in layers]
        net(obs)
        for hook in hooks:
            hook.remove()
        for (mean, var), (_, bn) in zip(stats, layers, strict=True):
            bn.running_mean.copy_(mean)
            bn.running_var.copy_(var)
            bn.weight.copy_(torch.sqrt(var + bn.eps))
            bn.bias.add_(mean)
        logits, value = net(obs[:256])
    want_logits, want_value = onnx_numpy.NumpyOnnxModel(data).evaluate(obs[:256].numpy())
    diff = max(float(np.abs(logits.numpy() - want_logits).max()), float(np.abs(value.numpy() - want_value).max()))
    if not diff <= TOLERANCE:
        raise UnfoldError(f"the unfolded network differs from the file by {diff:.3g} (> {TOLERANCE:g})")
    return net


def unfold_file(model: str | Path, out: str | Path, *, config: dict[str, Any] | None = None,
                generation: int | None = None) -> PolicyValueNet:
    """``unfold`` the ONNX file ``model`` and save it as checkpoint ``out`` (with the run's ``config`` and
    ``generation`` where given, and the file it came from); returns the network."""
    data = Path(model).read_bytes()
    net = unfold(data)
    extra: dict[str, Any] = {"unfolded_from": {"onnx": Path(model).name, "sha256": hashlib.sha256(data).hexdigest()}}
    if config is not None:
        extra["config"] = config
    if generation is not None:
        extra["generation"] = generation
    save_checkpoint(out, net, **extra)
    return net


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m connectx_az.training.unfold",
                                     description="Make a warm-start checkpoint back from an exported ONNX model.")
    parser.add_argument("model", help="ONNX file written by `connectx-az export` (float32)")
    parser.add_argument("out", help="checkpoint to write (.pt)")
    parser.add_argument("--config", help="the run's config.json, kept in the checkpoint")
    parser.add_argument("--generation", type=int, help="the generation the model is, kept in the checkpoint")
    args = parser.parse_args(argv)
    try:
        config = json.loads(Path(args.config).read_text()) if args.config else None
        unfold_file(args.model, args.out, config=config, generation=args.generation)
    except (OSError, UnfoldError, json.JSONDecodeError) as exc:
        print(f"error: {args.model}: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
