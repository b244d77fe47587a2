"""The ONNX file's protobuf wire format, read with the standard library and numpy: ``parse_model`` -> ``Graph``.

Reads only what an exported policy-value net holds: nodes, attributes, initializers (FLOAT16 widened
to float32), inputs, outputs, the opset and metadata.  Bytes that are not a valid model raise
``ValueError``; every read is bounds-checked and every loop advances, so bad input cannot hang it."""

from __future__ import annotations

import math

import numpy as np

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
_FLOAT, _INT64, _FLOAT16 = 1, 7, 10


# TensorProto.DataType -> numpy dtype (little-endian, as ONNX stores raw_data)
DTYPES = {
    1: np.dtype("<f4"),  # FLOAT
    2: np.dtype("u1"),  # UINT8
    3: np.dtype("i1"),  # INT8
    4: np.dtype("<u2"),  # UINT16
    5: np.dtype("<i2"),  # INT16
    6: np.dtype("<i4"),  # INT32
    7: np.dtype("<i8"),  # INT64
    9: np.dtype("?"),  # BOOL
    10: np.dtype("<f2"),  # FLOAT16
    11: np.dtype("<f8"),  # DOUBLE
}


_MAX_ELEMENTS = 1 << 28  # no real policy-value net comes close; guards absurd dims


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Decode one base-128 varint at ``pos``; returns ``(value, next_pos)``."""
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint longer than 10 bytes")


def _signed64(value: int) -> int:
    """Two's-complement reading of a varint-encoded int64/int32."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def _fields(buf: bytes, pos: int, end: int):
    """Yield ``(field_number, wire_type, value)`` for the message in ``buf[pos:end]``; ``value`` is an int, or for
    length-delimited fields a ``(start, stop)`` pair of offsets into ``buf``."""
    while pos < end:
        key, pos = _varint(buf, pos, end)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise ValueError("field number 0")
        if wire == _VARINT:
            value, pos = _varint(buf, pos, end)
        elif wire == _LEN:
            size, pos = _varint(buf, pos, end)
            if size > end - pos:
                raise ValueError(f"field {field} claims {size} bytes but only {end - pos} remain")
            value = (pos, pos + size)
            pos += size
        elif wire == _FIXED64:
            if pos + 8 > end:
                raise ValueError("truncated fixed64")
            value = int.from_bytes(buf[pos:pos + 8], "little")
            pos += 8
        elif wire == _FIXED32:
            if pos + 4 > end:
                raise ValueError("truncated fixed32")
            value = int.from_bytes(buf[pos:pos + 4], "little")
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire} (field {field})")
        yield field, wire, value


def _text(buf: bytes, span: tuple[int, int]) -> str:
    return buf[span[0]:span[1]].decode("utf-8")


def _ints(buf: bytes, wire: int, value, out: list[int]) -> None:
    """Append a repeated int64 field, packed (``_LEN``) or not."""
    if wire == _VARINT:
        out.append(_signed64(value))
    elif wire == _LEN:
        pos, end = value
        while pos < end:
            item, pos = _varint(buf, pos, end)
            out.append(_signed64(item))
    else:
        raise ValueError(f"integer field with wire type {wire}")


def _floats(buf: bytes, wire: int, value, out: list[float]) -> None:
    """Append a repeated float field, packed (``_LEN``) or not."""
    if wire == _FIXED32:
        out.append(float(np.array([value], np.uint32).view(np.float32)[0]))
    elif wire == _LEN:
        start, stop = value
        if (stop - start) % 4:
            raise ValueError("packed float field is not a multiple of 4 bytes")
        out.extend(np.frombuffer(buf, "<f4", (stop - start) // 4, start).tolist())
    else:
        raise ValueError(f"float field with wire type {wire}")


def _tensor(buf: bytes, start: int, end: int, *, widen: bool = True) -> tuple[str, np.ndarray]:
    """Decode a TensorProto into ``(name, array)``; FLOAT16 comes back as float32 if ``widen``."""
    name = ""
    dims: list[int] = []
    data_type = 0
    raw = None
    float_data: list[float] = []
    int32_data: list[int] = []
    int64_data: list[int] = []
    for field, wire, value in _fields(buf, start, end):
        if field == 1:
            _ints(buf, wire, value, dims)
        elif field == 2 and wire == _VARINT:
            data_type = value
        elif field == 4:
            _floats(buf, wire, value, float_data)
        elif field == 5:
            _ints(buf, wire, value, int32_data)
        elif field == 7:
            _ints(buf, wire, value, int64_data)
        elif field == 8 and wire == _LEN:
            name = _text(buf, value)
        elif field == 9 and wire == _LEN:
            raw = value
        elif field in (13, 14) and (wire != _VARINT or value != 0):
            raise ValueError(f"tensor {name!r} keeps its data in an external file, which is not supported")
    dtype = DTYPES.get(data_type)
    if dtype is None:
        raise ValueError(f"tensor {name!r} has unsupported data type {data_type}")
    if any(d < 0 for d in dims):
        raise ValueError(f"tensor {name!r} has negative dimensions {dims}")
    count = math.prod(dims)
    if count > _MAX_ELEMENTS:
        raise ValueError(f"tensor {name!r} is implausibly large ({count} elements)")
    if raw is not None:
        nbytes = raw[1] - raw[0]
        if nbytes != count * dtype.itemsize:
            raise ValueError(f"tensor {name!r}: raw_data holds {nbytes} bytes, dims {dims} need "
                             f"{count * dtype.itemsize}")
        array = np.frombuffer(buf, dtype, count, raw[0])
    elif float_data and data_type == _FLOAT:
        array = np.array(float_data, np.float32)
    elif int32_data and data_type in (2, 3, 4, 5, 6, 9, _FLOAT16):
        if data_type == _FLOAT16:  # float16 bit patterns travel in int32_data
            array = np.array(int32_data, np.int64).astype(np.uint16).view(np.float16)
        else:
            array = np.array(int32_data, np.int64).astype(dtype)
    elif int64_data and data_type == _INT64:
        array = np.array(int64_data, np.int64)
    elif count == 0:
        array = np.zeros(0, dtype)
    else:
        raise ValueError(f"tensor {name!r} has no data in a supported field")
    if array.size != count:
        raise ValueError(f"tensor {name!r}: {array.size} values for dims {dims}")
    array = array.reshape(dims)
    if widen and array.dtype == np.float16:
        array = array.astype(np.float32)
    return name, array


class Node:
    """One NodeProto: ``op_type``, ``inputs``/``outputs`` (names, ``""`` = absent), ``attrs``."""

    __slots__ = ("op_type", "domain", "name", "inputs", "outputs", "attrs")

    def __init__(self) -> None:
        self.op_type = ""
        self.domain = ""
        self.name = ""
        self.inputs: list[str] = []
        self.outputs: list[str] = []
        self.attrs: dict[str, object] = {}


def _attribute(buf: bytes, start: int, end: int) -> tuple[str, object]:
    """Decode an AttributeProto into ``(name, value)``.

    Values: FLOAT -> float, INT -> int, STRING -> bytes, TENSOR -> ndarray, FLOATS/INTS/STRINGS -> list;
    graph-valued attributes come back as ``None``."""
    name = ""
    kind = 0
    scalar_f = scalar_i = text = tensor = None
    floats: list[float] = []
    ints: list[int] = []
    strings: list[bytes] = []
    for field, wire, value in _fields(buf, start, end):
        if field == 1 and wire == _LEN:
            name = _text(buf, value)
        elif field == 20 and wire == _VARINT:
            kind = value
        elif field == 2 and wire == _FIXED32:
            scalar_f = float(np.array([value], np.uint32).view(np.float32)[0])
        elif field == 3 and wire == _VARINT:
            scalar_i = _signed64(value)
        elif field == 4 and wire == _LEN:
            text = bytes(buf[value[0]:value[1]])
        elif field == 5 and wire == _LEN:
            tensor = _tensor(buf, *value)[1]
        elif field == 7:
            _floats(buf, wire, value, floats)
        elif field == 8:
            _ints(buf, wire, value, ints)
        elif field == 9 and wire == _LEN:
            strings.append(bytes(buf[value[0]:value[1]]))
    by_kind = {1: scalar_f, 2: scalar_i, 3: text, 4: tensor, 6: floats, 7: ints, 8: strings}
    if kind in by_kind:
        return name, by_kind[kind]
    for guess in (tensor, scalar_f, scalar_i, text):  # producers that omit ``type``
        if guess is not None:
            return name, guess
    return name, floats or ints or strings or None


def _node(buf: bytes, start: int, end: int) -> Node:
    node = Node()
    for field, wire, value in _fields(buf, start, end):
        if wire != _LEN:
            continue
        if field == 1:
            node.inputs.append(_text(buf, value))
        elif field == 2:
            node.outputs.append(_text(buf, value))
        elif field == 3:
            node.name = _text(buf, value)
        elif field == 4:
            node.op_type = _text(buf, value)
        elif field == 7:
            node.domain = _text(buf, value)
        elif field == 5:
            attr_name, attr_value = _attribute(buf, *value)
            node.attrs[attr_name] = attr_value
    return node


def _value_info(buf: bytes, start: int, end: int) -> tuple[str, int, list[int | str | None]]:
    """ValueInfoProto -> ``(name, elem_type, shape)``; unknown dimensions are a name or None."""
    name = ""
    elem_type = 0
    shape: list[int | str | None] = []
    for field, wire, value in _fields(buf, start, end):
        if field == 1 and wire == _LEN:
            name = _text(buf, value)
        elif field == 2 and wire == _LEN:  # TypeProto
            for f2, w2, v2 in _fields(buf, *value):
                if f2 != 1 or w2 != _LEN:  # tensor_type only
                    continue
                for f3, w3, v3 in _fields(buf, *v2):
                    if f3 == 1 and w3 == _VARINT:
                        elem_type = v3
                    elif f3 == 2 and w3 == _LEN:  # TensorShapeProto
                        for f4, w4, v4 in _fields(buf, *v3):
                            if f4 != 1 or w4 != _LEN:
                                continue
                            dim: int | str | None = None
                            for f5, w5, v5 in _fields(buf, *v4):
                                if f5 == 1 and w5 == _VARINT:
                                    dim = _signed64(v5)
                                elif f5 == 2 and w5 == _LEN:
                                    dim = _text(buf, v5)
                            shape.append(dim)
    return name, elem_type, shape


class Graph:
    """The parts of ModelProto/GraphProto that execution needs (``read_graph`` fills the last four)."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.initializers: dict[str, np.ndarray] = {}
        self.inputs: list[tuple[str, int, list]] = []
        self.outputs: list[tuple[str, int, list]] = []
        self.opsets: dict[str, int] = {}
        self.ir_version = 0
        self.metadata: dict[str, str] = {}
        self.num_float16 = 0  # initializers stored as float16
        self.opset = 0  # of the default domain
        self.input_name = ""  # the one graph input that is not an initializer
        self.input_shape: tuple = ()
        self.output_names: list[str] = []


def parse_model(buf: bytes) -> Graph:
    graph = Graph()
    graph_span = None
    for field, wire, value in _fields(buf, 0, len(buf)):
        if field == 1 and wire == _VARINT:
            graph.ir_version = value
        elif field == 7 and wire == _LEN:
            graph_span = value
        elif field == 8 and wire == _LEN:  # OperatorSetIdProto
            domain, version = "", 0
            for f2, w2, v2 in _fields(buf, *value):
                if f2 == 1 and w2 == _LEN:
                    domain = _text(buf, v2)
                elif f2 == 2 and w2 == _VARINT:
                    version = v2
            graph.opsets[domain] = version
        elif field == 14 and wire == _LEN:  # StringStringEntryProto
            key = text = ""
            for f2, w2, v2 in _fields(buf, *value):
                if f2 == 1 and w2 == _LEN:
                    key = _text(buf, v2)
                elif f2 == 2 and w2 == _LEN:
                    text = _text(buf, v2)
            graph.metadata[key] = text
    if graph_span is None:
        raise ValueError("no graph found")
    for field, wire, value in _fields(buf, *graph_span):
        if wire != _LEN:
            continue
        if field == 1:
            graph.nodes.append(_node(buf, *value))
        elif field == 5:
            name, array = _tensor(buf, *value, widen=False)
            if array.dtype == np.float16:
                graph.num_float16 += 1
                array = array.astype(np.float32)
            graph.initializers[name] = array
        elif field == 11:
            graph.inputs.append(_value_info(buf, *value))
        elif field == 12:
            graph.outputs.append(_value_info(buf, *value))
        elif field == 15:
            raise ValueError("sparse initializers are not supported")
    if not graph.nodes or not graph.outputs:
        raise ValueError("the graph has no nodes or no outputs")
    return graph
