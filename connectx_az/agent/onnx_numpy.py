"""Run the exported policy-value ONNX graph with numpy alone (Kaggle's image very likely lacks onnxruntime).

It reads the file with ``onnx_proto`` and runs only the operators ``training.export`` produces
(``SUPPORTED_OPS``); any other, or bytes that are not a valid model, raise ``ValueError`` at load
time, never half-way through a game.

Tuned for a 6x7 board and tiny batches: feature maps between convolutions are channels-last
(``[B, H, W, C]``), a convolution is one gather (im2col, an index array per board size, out-of-board
taps pointing at an appended zero row) and one matmul per two boards; values go back to ``NCHW`` only
where an operator needs it.  Constant nodes are folded at load time; FLOAT16 tensors are widened:
the graph computes in float32."""

from __future__ import annotations

import math

import numpy as np

from connectx_az.agent import onnx_proto

_IM2COL_ROWS = 96  # output cells per convolution matmul: two 6x7 boards


def _axes(node: onnx_proto.Node, args: list, opset: int) -> list[int] | None:
    """``axes`` of Squeeze/Unsqueeze: an attribute before opset 13, an input after."""
    if len(args) > 1 and args[1] is not None:
        return [int(a) for a in np.asarray(args[1]).reshape(-1)]
    value = node.attrs.get("axes")
    return None if value is None else [int(a) for a in value]


def _dense_op(node: onnx_proto.Node, args: list, opset: int) -> np.ndarray:
    """Evaluate one non-Conv operator on ONNX-layout (dense) arrays; also folds constants."""
    op = node.op_type
    x = args[0] if args else None
    if op == "Identity":
        return x
    if op == "Relu":
        return np.maximum(x, 0)
    if op == "Tanh":
        return np.tanh(x)
    if op == "Add":
        return x + args[1]
    if op == "Cast":
        dtype = onnx_proto.DTYPES.get(int(node.attrs.get("to", 0)))
        if dtype is None:
            raise ValueError(f"Cast to unsupported type {node.attrs.get('to')}")
        return np.asarray(x).astype(np.float32 if dtype == np.float16 else dtype)
    if op == "Flatten":
        axis = int(node.attrs.get("axis", 1))
        axis = axis + x.ndim if axis < 0 else axis
        return x.reshape(math.prod(x.shape[:axis]), -1)
    if op == "Squeeze":
        axes = _axes(node, args, opset)
        if axes is None:
            return np.squeeze(x)
        return np.squeeze(x, axis=tuple(a + x.ndim if a < 0 else a for a in axes))
    if op == "Unsqueeze":
        axes = _axes(node, args, opset)
        out_rank = x.ndim + len(axes)
        for a in sorted(a + out_rank if a < 0 else a for a in axes):
            x = np.expand_dims(x, a)
        return x
    if op == "Reshape":
        shape = [int(s) for s in np.asarray(args[1]).reshape(-1)]
        if not node.attrs.get("allowzero", 0):
            shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
        return x.reshape(shape)
    if op == "Gemm":
        a = x.T if node.attrs.get("transA", 0) else x
        b = args[1].T if node.attrs.get("transB", 0) else args[1]
        y = float(node.attrs.get("alpha", 1.0)) * (a @ b)
        if len(args) > 2 and args[2] is not None:
            y = y + float(node.attrs.get("beta", 1.0)) * args[2]
        return y
    if op == "GlobalAveragePool":
        if x.ndim < 3:
            raise ValueError(f"GlobalAveragePool {node.name!r}: expected [N, C, spatial...], got shape {x.shape}")
        return x.mean(axis=tuple(range(2, x.ndim)), keepdims=True, dtype=np.float32)
    if op == "Concat":
        if "axis" not in node.attrs:
            raise ValueError(f"Concat {node.name!r}: no axis attribute")
        return np.concatenate([np.asarray(a) for a in args], axis=int(node.attrs["axis"]))
    if op == "Constant":
        for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
            if key in node.attrs:
                value = node.attrs[key]
                if key in ("value_int", "value_ints"):
                    return np.array(value, np.int64)
                return np.array(value, np.float32) if key != "value" else np.asarray(value)
        raise ValueError("Constant node without a supported value attribute")
    raise ValueError(f"unsupported op {op!r}")


SUPPORTED_OPS = frozenset(("Conv", "Relu", "Add", "Flatten", "Gemm", "Tanh", "Squeeze", "Unsqueeze", "Reshape",
                           "Constant", "Identity", "Cast", "GlobalAveragePool", "Concat"))

def read_graph(data: bytes) -> onnx_proto.Graph:
    """Parse ONNX bytes into an ``onnx_proto.Graph`` with ``opset``, ``input_name``, ``input_shape``
    and ``output_names`` set.

    Raises ``ValueError`` for bytes that are not a readable ONNX model, an operator outside
    ``SUPPORTED_OPS``, or other than one graph input besides the initializers."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ValueError(f"model must be bytes, got {type(data).__name__}")
    buf = bytes(data)
    try:
        graph = onnx_proto.parse_model(buf)
    except ValueError as exc:
        raise ValueError(f"not a readable ONNX model ({len(buf)} bytes): {exc}") from None
    except (IndexError, UnicodeDecodeError, OverflowError, TypeError) as exc:
        raise ValueError(f"not a readable ONNX model ({len(buf)} bytes): {type(exc).__name__}: {exc}") from None
    graph.opset = graph.opsets.get("", graph.opsets.get("ai.onnx", 0))
    unsupported = sorted({n.op_type for n in graph.nodes if n.op_type not in SUPPORTED_OPS
                          or n.domain not in ("", "ai.onnx")})
    if unsupported:
        raise ValueError(f"unsupported ONNX op(s) {', '.join(unsupported)}; the agent runs only "
                         f"{', '.join(sorted(SUPPORTED_OPS))}")
    inputs = [vi for vi in graph.inputs if vi[0] not in graph.initializers]
    if len(inputs) != 1:
        raise ValueError(f"expected one graph input, found {[vi[0] for vi in inputs]}")
    graph.input_name = inputs[0][0]
    graph.input_shape = tuple(inputs[0][2])
    graph.output_names = [vi[0] for vi in graph.outputs]
    return graph


def fold_constants(graph: onnx_proto.Graph) -> tuple[dict[str, np.ndarray], list[onnx_proto.Node]]:
    """``(consts, nodes)``: the values known at load time, and the nodes left to run, in graph order.

    ``consts`` holds the initializers and the outputs of every non-``Conv`` node whose inputs are all
    constant.  Raises ``ValueError`` for a node without outputs or reading a value not defined before
    it, a graph output never computed, or a constant node that fails to compute."""
    consts: dict[str, np.ndarray] = dict(graph.initializers)
    known = {graph.input_name}
    nodes: list[onnx_proto.Node] = []
    try:
        for node in graph.nodes:
            if not node.outputs:
                raise ValueError(f"node {node.name!r} ({node.op_type}) has no output")
            missing = [n for n in node.inputs if n and n not in consts and n not in known]
            if missing:
                raise ValueError(f"node {node.name!r} ({node.op_type}) reads undefined value(s) {missing}")
            if node.op_type != "Conv" and all(n in consts or n == "" for n in node.inputs):
                consts[node.outputs[0]] = _dense_op(node, [consts.get(n) for n in node.inputs], graph.opset)
                continue
            nodes.append(node)
            known.add(node.outputs[0])
    except (IndexError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"malformed ONNX graph: {type(exc).__name__}: {exc}") from None
    for name in graph.output_names:
        if name not in known and name not in consts:
            raise ValueError(f"graph output {name!r} is never computed")
    return consts, nodes


def conv_pads(node: onnx_proto.Node, weight: np.ndarray) -> tuple[int, int, int, int]:
    """``(top, left, bottom, right)`` of a Conv with ``weight [Cout, Cin, kh, kw]``; ``ValueError`` unless it is 2-d
    with explicit pads, group 1, stride 1 and dilation 1."""
    attrs = node.attrs
    if weight.ndim != 4:
        raise ValueError(f"Conv {node.name!r}: only 2-d convolutions are supported")
    pads = list(attrs.get("pads", [0, 0, 0, 0]))
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise ValueError(f"Conv {node.name!r}: auto_pad is not supported")
    if int(attrs.get("group", 1)) != 1 or any(int(s) != 1 for s in attrs.get("strides", [1, 1])) \
            or any(int(d) != 1 for d in attrs.get("dilations", [1, 1])) or len(pads) != 4:
        raise ValueError(f"Conv {node.name!r}: only group 1, stride 1, dilation 1 are supported")
    return int(pads[0]), int(pads[1]), int(pads[2]), int(pads[3])


def gemm_weights(node: onnx_proto.Node, consts: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray | None]:
    """``(weight float32[K, N], bias float32[N] or None)`` of a Gemm with constant B, ``alpha``/``beta`` applied.

    The node computes ``x @ weight + bias``.  Raises ``ValueError`` for a weight or bias that is not
    constant, weights that are not 2-d, or ``transA``."""
    if len(node.inputs) < 2 or node.inputs[1] not in consts:
        raise ValueError(f"Gemm {node.name!r}: weights must be constant")
    weight = consts[node.inputs[1]]
    if weight.ndim != 2 or node.attrs.get("transA", 0):
        raise ValueError(f"Gemm {node.name!r}: expected 2-d weights and transA = 0")
    weight = weight.T if node.attrs.get("transB", 0) else weight
    weight = np.ascontiguousarray(weight * np.float32(node.attrs.get("alpha", 1.0)), np.float32)
    bias = None
    if len(node.inputs) > 2 and node.inputs[2]:
        if node.inputs[2] not in consts:
            raise ValueError(f"Gemm {node.name!r}: bias must be constant")
        bias = (consts[node.inputs[2]] * np.float32(node.attrs.get("beta", 1.0))).astype(np.float32)
    return weight, bias


def _to_dense(x: np.ndarray, is_nhwc: bool) -> np.ndarray:
    return x.transpose(0, 3, 1, 2) if is_nhwc else x


class _Conv:
    """Conv as im2col + one matmul on channels-last maps; weights prepared once."""

    def __init__(self, node: onnx_proto.Node, weight: np.ndarray, bias: np.ndarray | None) -> None:
        self.pads = conv_pads(node, weight)  # top, left, bottom, right
        cout, cin, kh, kw = weight.shape
        self.name = node.name
        self.kernel = (kh, kw)
        self.cin, self.cout = cin, cout
        # [Cout, Cin, kh, kw] -> [(kh, kw, Cin), Cout] to match the gather order below
        self.weight = np.ascontiguousarray(weight.transpose(2, 3, 1, 0).reshape(kh * kw * cin, cout),
                                           dtype=np.float32)
        self.bias = None if bias is None else np.ascontiguousarray(bias, np.float32).reshape(cout)
        self.is_pointwise = (kh, kw) == (1, 1) and not any(self.pads)
        self._index: dict[tuple[int, int], tuple[np.ndarray, int, int]] = {}
        self._scratch: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray]] = {}

    def _gather_index(self, h: int, w: int) -> tuple[np.ndarray, int, int]:
        """Flat source cell for each (output cell, tap); ``h * w`` names the zero row."""
        kh, kw = self.kernel
        top, left, bottom, right = self.pads
        oh, ow = h + top + bottom - kh + 1, w + left + right - kw + 1
        if oh < 1 or ow < 1:
            raise ValueError(f"Conv {self.name!r}: a {h}x{w} input is smaller than its kernel")
        i = np.arange(oh)[:, None, None, None] + np.arange(kh)[None, None, :, None] - top
        j = np.arange(ow)[None, :, None, None] + np.arange(kw)[None, None, None, :] - left
        inside = (i >= 0) & (i < h) & (j >= 0) & (j < w)
        index = np.where(inside, i * w + j, h * w).reshape(-1).astype(np.intp)
        return index, oh, ow

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``x float32[B, H, W, Cin]`` -> ``float32[B, OH, OW, Cout]``."""
        b, h, w, c = x.shape
        if c != self.cin:
            raise ValueError(f"Conv {self.name!r}: expected {self.cin} channels, got {c}")
        if self.is_pointwise:
            y = x.reshape(b * h * w, c) @ self.weight
            oh, ow = h, w
        else:
            found = self._index.get((h, w))
            if found is None:
                found = self._index[(h, w)] = self._gather_index(h, w)
            index, oh, ow = found
            rows = oh * ow
            # Two boards per matmul keep the im2col block and the weights in L2; scratch buffers are kept
            # between calls (a fresh block each call costs page faults).
            step = max(1, _IM2COL_ROWS // rows)
            key = (b, h, w)
            scratch = self._scratch.get(key)
            if scratch is None:
                if len(self._scratch) > 8:
                    self._scratch.clear()
                scratch = self._scratch[key] = (np.zeros((b, h * w + 1, c), np.float32),
                                                np.empty((min(step, b), index.size, c), np.float32))
            padded, cols = scratch
            padded[:, : h * w] = x.reshape(b, h * w, c)  # the last row stays zero
            y = np.empty((b * rows, self.cout), np.float32)
            for first in range(0, b, step):
                last = min(b, first + step)
                block = cols[: last - first]
                np.take(padded[first:last], index, axis=1, out=block, mode="clip")  # "raise" would buffer
                np.matmul(block.reshape((last - first) * rows, -1), self.weight, out=y[first * rows:last * rows])
        if self.bias is not None:
            y += self.bias
        return y.reshape(b, oh, ow, self.cout)


class NumpyOnnxModel:
    """An ONNX policy-value graph executed with numpy; also a ``search_tree.Evaluator``.

    ``NumpyOnnxModel(data)`` parses the bytes and prepares every weight (``ValueError`` as ``read_graph``).
    Not thread-safe: convolutions reuse scratch buffers between calls."""

    def __init__(self, data: bytes) -> None:
        graph = read_graph(data)
        self.metadata = dict(graph.metadata)
        self.has_float16_weights = graph.num_float16 > 0
        self.opset = graph.opset
        self.input_name = graph.input_name
        self.input_shape = graph.input_shape
        self.output_names = list(graph.output_names)
        self.ops = frozenset(n.op_type for n in graph.nodes)
        self.conv_shapes: list[tuple[int, ...]] = []
        self.gemm_shapes: list[tuple[int, ...]] = []
        consts, nodes = fold_constants(graph)
        try:
            self._compile(consts, nodes)
        except (IndexError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed ONNX graph: {type(exc).__name__}: {exc}") from None

    def _compile(self, consts: dict[str, np.ndarray], nodes: list[onnx_proto.Node]) -> None:
        """Turn the nodes left after ``fold_constants`` into a list of steps."""
        nhwc: dict[str, bool] = {self.input_name: False}
        uses = value_uses(nodes, self.output_names)
        steps = []
        fresh: set[str] = set()  # outputs that are newly allocated arrays, never views
        for node in nodes:
            out = node.outputs[0]
            if node.op_type == "Conv":
                if len(node.inputs) < 2 or node.inputs[1] not in consts:
                    raise ValueError(f"Conv {node.name!r}: weights must be constant")
                bias = consts[node.inputs[2]] if len(node.inputs) > 2 and node.inputs[2] else None
                conv = _Conv(node, consts[node.inputs[1]], bias)
                self.conv_shapes.append(tuple(consts[node.inputs[1]].shape))
                steps.append((self._conv_step, (conv, node.inputs[0], nhwc.get(node.inputs[0], False)), out))
                nhwc[out] = True
                fresh.add(out)
                continue
            if node.op_type == "Gemm" and len(node.inputs) > 1 and node.inputs[1] in consts:
                weight, bias = gemm_weights(node, consts)
                self.gemm_shapes.append(tuple(weight.shape))
                steps.append((self._gemm_step, (weight, bias, node.inputs[0], nhwc[node.inputs[0]]), out))
                nhwc[out] = False
                fresh.add(out)
                continue
            inputs = node.inputs
            layouts = [nhwc.get(n, False) for n in inputs]
            if node.op_type in ("Relu", "Tanh", "Identity") or (
                    node.op_type == "Add" and len(inputs) == 2 and layouts[0] == layouts[1]
                    and inputs[1] not in consts):
                # In place only on a fresh array (not a view, not the caller's input) that nobody else reads.
                in_place = inputs[0] in fresh and uses.get(inputs[0], 0) == 1
                steps.append((self._elementwise_step, (node.op_type, inputs, in_place), out))
                nhwc[out] = layouts[0]
                if node.op_type != "Identity":
                    fresh.add(out)
                continue
            args = (node, inputs, layouts)
            steps.append((self._generic_step, args, out))
            nhwc[out] = False
        self._consts = consts
        self._steps = steps
        self._output_nhwc = [nhwc.get(n, False) for n in self.output_names]

    # steps: each takes (env, args) and returns the output value
    @staticmethod
    def _conv_step(env: dict, args: tuple) -> np.ndarray:
        conv, name, is_nhwc = args
        x = env[name]
        if not is_nhwc:
            if x.ndim != 4:
                raise ValueError(f"Conv {conv.name!r}: expected a 4-d input, got shape {x.shape}")
            x = x.transpose(0, 2, 3, 1)
        return conv(x)

    @staticmethod
    def _gemm_step(env: dict, args: tuple) -> np.ndarray:
        weight, bias, name, is_nhwc = args
        y = _to_dense(env[name], is_nhwc) @ weight
        if bias is not None:
            y += bias
        return y

    @staticmethod
    def _elementwise_step(env: dict, args: tuple) -> np.ndarray:
        op, inputs, in_place = args
        x = env[inputs[0]]
        if op == "Identity":
            return x
        out = x if in_place else None
        if op == "Relu":
            return np.maximum(x, np.float32(0), out=out)
        if op == "Tanh":
            return np.tanh(x, out=out)
        y = env[inputs[1]]
        return np.add(x, y, out=out if out is not None and x.shape == y.shape else None)

    def _generic_step(self, env: dict, args: tuple) -> np.ndarray:
        node, inputs, layouts = args
        values = [None if n == "" else _to_dense(env[n], is_nhwc) for n, is_nhwc in zip(inputs, layouts, strict=True)]
        return _dense_op(node, values, self.opset)

    def run(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Feed ``x`` (cast to float32) to the graph input; returns every graph output by name."""
        env = dict(self._consts)
        env[self.input_name] = np.asarray(x, np.float32)
        for fn, args, out in self._steps:
            env[out] = fn(env, args)
        return {name: np.asarray(_to_dense(env[name], is_nhwc))
                for name, is_nhwc in zip(self.output_names, self._output_nhwc, strict=True)}

    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``obs uint8[M,2,6,7]`` -> ``(logits float32[M,7], value float32[M])``, side to move."""
        return policy_and_value(self.run(obs), self.output_names)

    def net_shape(self) -> dict[str, object]:
        """The net config recovered from the graph, with its ``label`` (``network.NetConfig.label``'s), or {}.

        Reads a stem conv, two 3x3 convs per residual block, 1x1 policy then value convs, a Gemm to one
        value, and a GlobalAveragePool only with ``value_pool``."""
        square = [s for s in self.conv_shapes if s[2:] == (3, 3)]
        pointwise = [s for s in self.conv_shapes if s[2:] == (1, 1)]
        value_out = [s for s in self.gemm_shapes if s[1] == 1]
        if not square or len(square) % 2 != 1 or not value_out or len(pointwise) != 2:
            return {}
        blocks, filters, hidden = (len(square) - 1) // 2, int(square[0][0]), int(value_out[0][0])
        policy_filters, value_filters = int(pointwise[0][0]), int(pointwise[1][0])
        value_pool = "GlobalAveragePool" in self.ops
        label = f"{blocks}x{filters}"
        if (policy_filters, value_filters, value_pool) != (2, 1, False):
            label += f" p{policy_filters} v{value_filters}" + ("+pool" if value_pool else "")
        return {"num_blocks": blocks, "num_filters": filters, "value_hidden": hidden,
                "policy_filters": policy_filters, "value_filters": value_filters, "value_pool": value_pool,
                "label": label}


def policy_and_value(outputs: dict[str, np.ndarray], output_names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(logits float32[M,7], value float32[M])`` from a run's outputs: ``logits`` and ``value`` by name,
    else the graph's first and last outputs."""
    logits = outputs.get("logits", outputs[output_names[0]])
    value = outputs.get("value", outputs[output_names[-1]])
    return np.ascontiguousarray(logits, np.float32), np.ascontiguousarray(value, np.float32).reshape(-1)


def value_uses(nodes: list[onnx_proto.Node], output_names: list[str]) -> dict[str, int]:
    """How many nodes read each value, graph outputs counted twice more: a value read once may be
    overwritten in place by its reader, never a graph output."""
    uses: dict[str, int] = {}
    for node in nodes:
        for name in node.inputs:
            uses[name] = uses.get(name, 0) + 1
    for name in output_names:
        uses[name] = uses.get(name, 0) + 2
    return uses
