"""ONNX export of the policy-value net, the parity check that guards it, and the model card.

The graph: input ``obs float32[B, 2, 6, 7]`` (``game.encode``, side to move first, dynamic batch), outputs
``logits float32[B, 7]`` and ``value float32[B]`` (side to move).  The legacy TorchScript exporter is used
because in eval mode it folds every BatchNorm into its Conv, leaving only operators ``agent.onnx_numpy``
implements.  ``float16=True`` stores each float initializer as float16 read through a ``Cast``: half the
file, and both runtimes read it.  Before a file is written, torch, onnxruntime and the numpy runtime must
agree on random positions (``FP32_TOLERANCE``, ``FP16_TOLERANCE``); a file that fails is never written."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import importlib.util
import io
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from connectx_az import cards, files, paths
from connectx_az.agent import backends, onnx_numpy
from connectx_az.engine import game
from connectx_az.errors import UserError
from connectx_az.training.network import NetConfig, PolicyValueNet

INPUT_NAME = "obs"
OUTPUT_NAMES = ("logits", "value")
OPSET = 17
#: max |difference| of logits and value allowed between torch, onnxruntime and numpy (float32 file)
FP32_TOLERANCE = 1e-4
#: for a float16 file (weights rounded to 11 bits): max |difference| from torch, relative to the
#: largest |output| (at least 1)
FP16_TOLERANCE = 5e-3
#: metadata key holding the network config as JSON
NET_CONFIG_KEY = "connectx_az.net_config"


class ExportError(UserError, RuntimeError):
    """Nothing was written: the exported graph does not reproduce the torch network, or the path is a folder or
    cannot be written."""


@dataclass(frozen=True)
class ExportReport:
    """What ``export_onnx`` wrote.

    ``max_abs_diff``: torch against onnxruntime; ``numpy_max_abs_diff``: onnxruntime (or torch, where
    onnxruntime is missing and ``max_abs_diff`` is None) against ``agent.onnx_numpy``.  None: not checked."""

    path: Path
    num_bytes: int
    sha256: str
    max_abs_diff: float | None
    numpy_max_abs_diff: float | None
    num_positions: int
    float16: bool
    net_label: str


def random_positions(num_positions: int, rng: np.random.Generator) -> np.ndarray:
    """``uint8[num_positions, 2, 6, 7]``: unfinished positions after 0 to 40 random legal moves."""
    out = np.zeros((num_positions, 2, game.ROWS, game.COLS), np.uint8)
    filled = 0
    while filled < num_positions:
        target = int(rng.integers(0, game.NUM_CELLS - 1))
        position, mask = game.initial()
        for _ in range(target):
            cols = game.legal_cols(mask)
            nxt = game.play(position, mask, int(rng.choice(cols)))
            if game.outcome(*nxt) is not None:
                break
            position, mask = nxt
        out[filled] = game.encode(position, mask)
        filled += 1
    return out


def _torch_outputs(net: PolicyValueNet, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with torch.inference_mode():
        logits, value = net(torch.from_numpy(obs.astype(np.float32)))
    return logits.numpy(), value.numpy()


def _max_diff(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    return float(max(np.abs(a[0] - b[0]).max(), np.abs(np.reshape(a[1], -1) - np.reshape(b[1], -1)).max()))


def _to_float16(model: onnx.ModelProto) -> onnx.ModelProto:
    """Store float initializers as float16, each read through a ``Cast`` to float32."""
    graph = model.graph
    casts = []
    kept = []
    for init in graph.initializer:
        if init.data_type != onnx.TensorProto.FLOAT:
            kept.append(init)
            continue
        array = numpy_helper.to_array(init)
        if np.abs(array).max(initial=0.0) > 65504:
            raise ExportError(f"initializer {init.name!r} holds values beyond float16's range")
        half = numpy_helper.from_array(array.astype(np.float16), name=f"{init.name}__fp16")
        kept.append(half)
        casts.append(onnx.helper.make_node("Cast", [half.name], [init.name], name=f"{init.name}__cast",
                                           to=onnx.TensorProto.FLOAT))
    del graph.initializer[:]
    graph.initializer.extend(kept)
    nodes = casts + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.checker.check_model(model)
    return model


def _export_bytes(net: PolicyValueNet, float16: bool) -> bytes:
    buffer = io.BytesIO()
    dummy = torch.zeros(1, 2, game.ROWS, game.COLS)
    with warnings.catch_warnings():
        # the legacy exporter warns that it is deprecated; it is the one that folds BatchNorm
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(net, (dummy,), buffer, dynamo=False, opset_version=OPSET, input_names=[INPUT_NAME],
                          output_names=list(OUTPUT_NAMES),
                          dynamic_axes={name: {0: "batch"} for name in (INPUT_NAME, *OUTPUT_NAMES)},
                          training=torch.onnx.TrainingMode.EVAL, do_constant_folding=True)
    model = onnx.load_from_string(buffer.getvalue())
    model.producer_name = "connectx_az"
    onnx.helper.set_model_props(model, {NET_CONFIG_KEY: json.dumps(dataclasses.asdict(net.config))})
    if float16:
        model = _to_float16(model)
    return model.SerializeToString()


def export_onnx(net: PolicyValueNet, path: str | Path, *, float16: bool = False, check: bool = True,
                num_positions: int = 64, seed: int = 0) -> ExportReport:
    """Export ``net`` (a CPU copy in eval mode; ``net`` itself is untouched) to ``path``.  Raises ``ExportError``
    (and writes nothing) when the parity check fails, and when ``path`` is a folder or cannot be written."""
    path = Path(path)
    if path.is_dir():
        raise ExportError(f"{path} is a folder: give the model's file name (e.g. {path / 'model.onnx'})")
    net = copy.deepcopy(net).cpu().eval()
    data = _export_bytes(net, float16)
    diff = numpy_diff = None
    if check:
        obs = random_positions(num_positions, np.random.default_rng(seed))
        reference = _torch_outputs(net, obs)
        scale = max(1.0, float(np.abs(reference[0]).max()), float(np.abs(reference[1]).max()))
        tolerance = FP16_TOLERANCE * scale if float16 else FP32_TOLERANCE
        numpy_outputs = onnx_numpy.NumpyOnnxModel(data).evaluate(obs)
        if importlib.util.find_spec("onnxruntime") is None:
            # Kaggle's image has no onnxruntime: check the numpy runtime, which plays there, against torch.
            numpy_diff = _max_diff(reference, numpy_outputs)
            if not numpy_diff <= tolerance:
                raise ExportError(f"the numpy runtime differs from torch by {numpy_diff:.3g} (> {tolerance:g}) "
                                  f"on {num_positions} positions; {path} was not written")
        else:
            onnxrt = backends.OnnxRuntimeEvaluator(data).evaluate(obs)
            diff = _max_diff(reference, onnxrt)
            if not diff <= tolerance:
                raise ExportError(f"onnxruntime differs from torch by {diff:.3g} (> {tolerance:g}) on "
                                  f"{num_positions} positions; {path} was not written")
            numpy_diff = _max_diff(onnxrt, numpy_outputs)
            if not numpy_diff <= FP32_TOLERANCE:
                raise ExportError(f"the numpy runtime differs from onnxruntime by {numpy_diff:.3g} "
                                  f"(> {FP32_TOLERANCE:g}); {path} was not written")
    try:
        files.atomic_write_bytes(path, data)
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc.strerror or exc}; choose another --out") from None
    return ExportReport(path=path, num_bytes=len(data), sha256=hashlib.sha256(data).hexdigest(), max_abs_diff=diff,
                        numpy_max_abs_diff=numpy_diff, num_positions=num_positions if check else 0, float16=float16,
                        net_label=net.config.label)


def check_out(out: str | Path, checkpoint: str | Path, *, force: bool = False) -> None:
    """Refuse (``ExportError``, one line) an export of ``checkpoint`` to ``out`` that would replace what was not
    asked to be replaced: the shipped model (``paths.DEFAULT_MODEL``, whose card the export would rewrite too) or
    anything in its folder, or a model or card that another run exported (its card names another run folder, or
    there is no card to say); ``force`` allows both.  An ``out`` or card path that exists and is not a regular
    file (a folder, a device such as ``/dev/full``) is refused, ``force`` or not.  Re-exporting the same run to
    its own file needs no ``force``."""
    out = Path(out)
    card_path = out.with_suffix(".json")
    if out.is_dir():
        raise ExportError(f"{out} is a folder: give the model's file name (e.g. {out / 'model.onnx'})")
    for path in (out, card_path):
        if path.exists() and not path.is_file():
            raise ExportError(f"{path} is not a regular file (a folder, a device or a pipe): give --out the path of a "
                              "model file to write, e.g. build/model.onnx")
    if force:
        return
    own = f"build/{_export_name(Path(checkpoint))}.onnx"
    if out.resolve() == paths.DEFAULT_MODEL.resolve():
        raise ExportError(f"{out} is the shipped model, and {card_path.name} beside it its card: export to a file of "
                          f"your own (--out {own}), or add --force to replace them")
    if out.resolve().parent == paths.DEFAULT_MODEL.resolve().parent:  # its card or checkpoint, say
        raise ExportError(f"{out} is in the shipped model's folder: export to a file of your own (--out {own}), or add "
                          "--force to write there")
    if not (out.exists() or card_path.exists()):
        return
    try:
        card = cards.load(card_path)
    except cards.CardError:
        card = {}
    theirs = _run_of(card["checkpoint"]) if isinstance(card.get("checkpoint"), str) else None
    if theirs != _run_of(Path(checkpoint)):
        held = f"an export of {theirs}" if theirs is not None else "a model this run did not export"
        raise ExportError(f"{out} holds {held}: export to a file of its own (--out {own}), or add --force to "
                          "replace it")


def _run_of(checkpoint: str | Path) -> Path:
    """The run folder a checkpoint belongs to: its folder (``RUN/checkpoint.pt``), or the run above its
    ``snapshots/``; a folder given is the run itself."""
    path = Path(checkpoint).resolve()
    if path.is_dir():
        return path
    return path.parent.parent if path.parent.name == "snapshots" else path.parent


def _export_name(checkpoint: Path) -> str:
    """A file name of the checkpoint's own: its run folder's name, else the checkpoint's stem."""
    run = _run_of(checkpoint)
    return run.name if (run / "config.json").is_file() else checkpoint.stem


def checkpoint_card(path: str | Path, net: PolicyValueNet, checkpoint: str | Path,
                    data: dict[str, Any]) -> dict[str, Any]:
    """``model_card`` of ``path`` exported from ``checkpoint`` (``net``, ``data`` as ``load_checkpoint`` read it),
    with how it was trained where the checkpoint's folder is a run."""
    from connectx_az.training import runs, train

    checkpoint = Path(checkpoint)
    card = model_card(path, parameters=net.num_parameters(), checkpoint=str(checkpoint),
                      generation=data.get("generation"))
    if (checkpoint.parent / runs.METRICS).is_file():
        card["training"] = train.summarize(runs.read_metrics(checkpoint.parent), data.get("config"))
        card["trained_by"] = card["training"].pop("command")
    return card


def model_card(path: str | Path, **facts: Any) -> dict[str, Any]:
    """The model card saved beside an exported model: facts read from the file, then ``facts`` (JSON-able).  Raises
    ``FileNotFoundError`` or ``ValueError`` (not a usable model)."""
    data, _ = backends.read_model(path)
    model = onnx_numpy.NumpyOnnxModel(data)
    net = model.net_shape()
    stored = model.metadata.get(NET_CONFIG_KEY)
    if stored:
        try:
            parsed = NetConfig(**json.loads(stored))  # today's defaults for keys added since
            net = {**dataclasses.asdict(parsed), "label": parsed.label}
        except (ValueError, KeyError, TypeError):
            pass
    return {"path": str(path), "num_bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "float16": model.has_float16_weights, "net": net, "opset": model.opset, "ops": sorted(model.ops), **facts}


