"""Run the exported policy-value ONNX graph with torch on one thread, where torch imports.

Kaggle's agent image very likely has torch and not onnxruntime; this module is
pasted into ``submission.py`` (``builder``, only with ``build --torch-backend``: the
default backends never use it) after ``onnx_numpy``, whose reader
parses the bytes, checks the graph and folds its constants
(``onnx_numpy.read_graph``, ``onnx_numpy.fold_constants``).  Here the nodes
left to run are only mapped onto torch operators, so both runtimes run the same
graph and refuse the same models (this one also refuses a ``Gemm`` with
non-constant weights and a run-time ``Cast`` to anything but floats, which
the exporter never writes).

torch is imported when a model is built, never at module level: the module
loads where torch is missing, and building a model raises ``ImportError``
there.  Importing torch costs about a second or more, paid by the first move
that loads the model.  Building sets torch's intra-op threads for the whole
process (one by default: the agent's batches are a few positions, and on a
shared core threads only lose).  Evaluation runs under
``torch.inference_mode`` in float32, convolutions on channels-last tensors.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from connectx_az.agent import onnx_numpy

_FLOAT_TYPES = (1, 10, 11)  # TensorProto FLOAT, FLOAT16, DOUBLE: all computed in float32 here

#: one compiled node: reads the values computed so far (by name), returns its output
Step = Callable[[dict], object]


class TorchOnnxModel:
    """An ONNX policy-value graph executed with torch; also an ``mcts.Evaluator``.

    ``TorchOnnxModel(data)`` imports torch (``ImportError`` without it), sets
    its intra-op threads to ``threads``, and prepares every weight as a
    tensor; it raises ``ValueError`` for models it cannot run (see the module
    docstring).  ``run(x)`` maps the graph's single input to a dict of named
    numpy outputs; ``evaluate(obs uint8[M,2,6,7])`` returns ``(logits
    float32[M,7], value float32[M])`` from the side to move.
    """

    def __init__(self, data: bytes, *, threads: int = 1) -> None:
        import torch

        graph = onnx_numpy.read_graph(data)
        consts, nodes = onnx_numpy.fold_constants(graph)
        torch.set_num_threads(threads)
        self.torch = torch
        self.metadata = dict(graph.metadata)
        self.input_name = graph.input_name
        self.output_names = list(graph.output_names)
        self.threads = threads
        uses = onnx_numpy.value_uses(nodes, self.output_names)
        fresh: set[str] = set()  # values that are new tensors of this run, never views or the caller's input
        self._steps: list[tuple[str, Step]] = []
        try:
            for node in nodes:
                in_place = bool(node.inputs) and node.inputs[0] in fresh and uses.get(node.inputs[0], 0) == 1
                step, is_fresh = _compile_node(torch, node, consts, in_place)
                self._steps.append((node.outputs[0], step))
                if is_fresh:
                    fresh.add(node.outputs[0])
        except (IndexError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed ONNX graph: {type(exc).__name__}: {exc}") from None
        # graph outputs that are constants (never in a real net, but legal ONNX)
        self._consts = {name: torch.from_numpy(np.array(consts[name])) for name in self.output_names
                        if name in consts}

    def run(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Feed ``x`` (cast to float32) to the graph input; returns every graph output by name."""
        torch = self.torch
        with torch.inference_mode():
            env: dict = dict(self._consts)
            env[self.input_name] = torch.from_numpy(np.array(x, np.float32))  # a copy: never the caller's array
            for out, step in self._steps:
                env[out] = step(env)
            return {name: env[name].numpy() for name in self.output_names}

    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``obs uint8[M,2,6,7]`` -> ``(logits float32[M,7], value float32[M])``, side to move."""
        return onnx_numpy.policy_and_value(self.run(obs), self.output_names)


def _tensor(torch, array: np.ndarray):
    return torch.from_numpy(np.array(array, np.float32))


def _axes(node: onnx_numpy.Node, consts: dict[str, np.ndarray]) -> list[int] | None:
    """``axes`` of Squeeze/Unsqueeze: a constant input from opset 13, an attribute before."""
    if len(node.inputs) > 1 and node.inputs[1]:
        if node.inputs[1] not in consts:
            raise ValueError(f"{node.op_type} {node.name!r}: axes must be constant")
        return [int(a) for a in np.asarray(consts[node.inputs[1]]).reshape(-1)]
    value = node.attrs.get("axes")
    return None if value is None else [int(a) for a in value]


def _compile_node(torch, node: onnx_numpy.Node, consts: dict[str, np.ndarray],
                  in_place: bool) -> tuple[Step, bool]:
    """``(step, fresh)`` for one node that ``fold_constants`` left to run; ``fresh``: its output is a new tensor.

    ``in_place``: the first input is a fresh tensor nobody else reads, so an
    elementwise op may overwrite it.
    """
    op, name, inputs = node.op_type, node.name, node.inputs
    functional = torch.nn.functional
    src = inputs[0] if inputs else ""
    if op == "Conv":
        if len(inputs) < 2 or inputs[1] not in consts:
            raise ValueError(f"Conv {name!r}: weights must be constant")
        weight_array = consts[inputs[1]]
        top, left, bottom, right = onnx_numpy.conv_pads(node, weight_array)
        # Channels-last weights and maps: on 6x7 maps oneDNN's convolution ran about
        # 1.4x faster so for one position, and 1.06x for eight, than on NCHW.
        channels_last = torch.channels_last
        weight = _tensor(torch, weight_array).contiguous(memory_format=channels_last)
        bias = _tensor(torch, consts[inputs[2]]).reshape(-1) if len(inputs) > 2 and inputs[2] else None
        symmetric = (top, left) == (bottom, right)
        padding, pad = ((top, left) if symmetric else (0, 0)), (left, right, top, bottom)

        def conv(env):
            x = env[src]
            if not symmetric:
                x = functional.pad(x, pad)
            return functional.conv2d(x.contiguous(memory_format=channels_last), weight, bias, padding=padding)

        return conv, True
    if op == "Gemm":
        weight_array, bias_array = onnx_numpy.gemm_weights(node, consts)
        weight = _tensor(torch, weight_array)
        if bias_array is None:
            return (lambda env: torch.mm(env[src], weight)), True
        bias = _tensor(torch, bias_array)
        return (lambda env: torch.addmm(bias, env[src], weight)), True
    if op in ("Relu", "Tanh"):
        fn = {"Relu": (torch.relu, torch.relu_), "Tanh": (torch.tanh, torch.tanh_)}[op][in_place]
        return (lambda env: fn(env[src])), True
    if op == "Add":
        other = inputs[1]
        if other in consts:
            constant = _tensor(torch, consts[other])
            return (lambda env: env[src] + constant), True
        if in_place:
            return (lambda env: env[src].add_(env[other]) if env[src].shape == env[other].shape
                    else env[src] + env[other]), True
        return (lambda env: env[src] + env[other]), True
    if op == "GlobalAveragePool":
        def pool(env):
            x = env[src]
            if x.ndim < 3:
                raise ValueError(f"GlobalAveragePool {name!r}: expected [N, C, spatial...], got shape {tuple(x.shape)}")
            return x.mean(dim=tuple(range(2, x.ndim)), keepdim=True)

        return pool, True
    if op == "Concat":
        if "axis" not in node.attrs:
            raise ValueError(f"Concat {name!r}: no axis attribute")
        axis = int(node.attrs["axis"])
        constant = {n: _tensor(torch, consts[n]) for n in inputs if n in consts}
        return (lambda env: torch.cat([constant[n] if n in constant else env[n] for n in inputs], dim=axis)), True
    if op == "Identity":
        return (lambda env: env[src]), False
    if op == "Cast":
        if int(node.attrs.get("to", 0)) not in _FLOAT_TYPES:
            raise ValueError(f"Cast {name!r}: only casts to float types run here, not to {node.attrs.get('to')}")
        return (lambda env: env[src].float()), False
    if op == "Flatten":
        axis = int(node.attrs.get("axis", 1))

        def flatten(env):
            x = env[src]
            a = axis + x.ndim if axis < 0 else axis
            return x.reshape(math.prod(x.shape[:a]), -1)

        return flatten, False
    if op == "Reshape":
        if len(inputs) < 2 or inputs[1] not in consts:
            raise ValueError(f"Reshape {name!r}: the shape must be constant")
        shape = [int(s) for s in np.asarray(consts[inputs[1]]).reshape(-1)]
        keep_zero = bool(node.attrs.get("allowzero", 0))

        def reshape(env):
            x = env[src]
            return x.reshape([s if keep_zero or s != 0 else x.shape[i] for i, s in enumerate(shape)])

        return reshape, False
    if op in ("Squeeze", "Unsqueeze"):
        axes = _axes(node, consts)
        if op == "Squeeze":
            if axes is None:
                return (lambda env: env[src].squeeze()), False

            def squeeze(env):
                x = env[src]
                for a in sorted((a + x.ndim if a < 0 else a for a in axes), reverse=True):
                    x = x.squeeze(a)
                return x

            return squeeze, False
        if axes is None:
            raise ValueError(f"Unsqueeze {name!r} has no axes")

        def unsqueeze(env):
            x = env[src]
            rank = x.ndim + len(axes)
            for a in sorted(a + rank if a < 0 else a for a in axes):
                x = x.unsqueeze(a)
            return x

        return unsqueeze, False
    raise ValueError(f"op {op!r} ({name!r}) cannot run on torch")
