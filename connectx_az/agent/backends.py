"""The agent's inference backends: onnxruntime where it imports, else the numpy ONNX runtime, else uniform.

Every evaluator is a ``search_tree.Evaluator``.  ``OnnxRuntimeEvaluator`` (a model from a file or
bytes, its errors named: ``ModelError``) is what grading, the arena and the export's parity check run."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import numpy as np

from connectx_az.agent import onnx_numpy
from connectx_az.engine import game

#: the order the agent tries them in
BACKENDS = ("onnxruntime", "numpy")
#: every backend ``make_evaluator`` knows
KNOWN_BACKENDS = ("onnxruntime", "numpy")


class UniformEvaluator:
    """Equal priors and a neutral value: the search's last resort without a usable model."""

    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = obs.shape[0]
        return np.zeros((m, game.NUM_ACTIONS), np.float32), np.zeros(m, np.float32)


class OrtEvaluator:
    """``search_tree.Evaluator`` over an onnxruntime CPU session with one thread (where onnxruntime imports)."""

    def __init__(self, data: bytes) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        self.input_name = self.session.get_inputs()[0].name
        names = [o.name for o in self.session.get_outputs()]
        # as ``onnx_numpy.policy_and_value``: by name, else the first and the last output
        self.output_names = ["logits" if "logits" in names else names[0], "value" if "value" in names else names[-1]]

    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        logits, value = self.session.run(self.output_names, {self.input_name: np.asarray(obs, np.float32)})
        return np.asarray(logits, np.float32), np.asarray(value, np.float32).reshape(-1)


def limit_blas_threads() -> None:
    """Best effort: ask every loaded OpenBLAS to use one thread (as threadpoolctl would)."""
    import ctypes

    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "blas" in line.lower() and ".so" in line}
    for path in paths:
        lib = ctypes.CDLL(path)
        for name in ("openblas_set_num_threads", "openblas_set_num_threads64_",
                     "scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads"):
            setter = getattr(lib, name, None)
            if setter is not None:
                setter(1)


def make_evaluator(backend: str, data: bytes):
    """The evaluator of ``backend`` (one of ``KNOWN_BACKENDS``) over ONNX bytes; raises whatever loading raises."""
    if backend == "onnxruntime":
        return OrtEvaluator(data)
    if backend == "numpy":
        return onnx_numpy.NumpyOnnxModel(data)
    raise ValueError(f"unknown backend {backend!r}")


def check_outputs(evaluator) -> None:
    """Raise ``ValueError`` (one line) unless ``evaluator`` scores the empty board as this package's network does.

    The network reads ``obs float32[B, 2, 6, 7]`` (``game.encode``) and gives ``logits float32[B, 7]`` and ``value
    float32[B]`` (or ``[B, 1]``), all finite: a model of other planes, another number of moves or no value output
    fails here.  The one check of a loaded model: the agent's (``load_model``), ``build``'s, ``compare``'s and
    ``eval pons --model``'s."""
    probe = game.encode(np.zeros(1, np.uint64), np.zeros(1, np.uint64))
    try:
        logits, value = evaluator.evaluate(probe)
    except Exception as exc:  # onnxruntime and the numpy runtime raise their own types for a wrong input
        first = (str(exc).splitlines() or [""])[0][:160]
        raise ValueError(f"it cannot score a position encoded as 2 planes of 6x7 ({type(exc).__name__}: {first})") \
            from None
    if np.shape(logits) != (1, game.NUM_ACTIONS):
        raise ValueError(f"its move output has shape {np.shape(logits)} for one position, not (1, {game.NUM_ACTIONS})"
                         " (one logit a column)")
    if np.shape(value) != (1,):
        raise ValueError(f"its value output has shape {np.shape(value)} for one position, not (1,) (a model with no "
                         "value output gives its move output twice)")
    if not (np.all(np.isfinite(logits)) and np.all(np.isfinite(value))):
        raise ValueError("it gives outputs that are not finite on the empty board")


def load_model(model_b64: str, model_sha256: str, backends: tuple[str, ...], *,
               limit_blas: bool = True) -> tuple[object, str, str]:
    """``(evaluator, backend, errors)`` for the embedded model: the first backend that works, else uniform.

    Checks the sha256 first; a backend counts only if it scores the empty board with finite numbers of
    the right shapes.  ``errors`` joins what went wrong on the way; ``backend`` is ``"uniform"`` for the
    fallback.  Never raises."""
    errors = []
    if limit_blas:
        try:
            limit_blas_threads()
        except Exception:
            pass
    data = b""
    try:
        data = base64.b64decode(model_b64)
        if not data:
            raise ValueError("no model is embedded")
        if hashlib.sha256(data).hexdigest() != model_sha256:
            raise ValueError("the embedded model fails its sha256 check")
    except Exception as exc:
        errors.append(f"model: {exc}")
        data = b""
    for backend in backends if data else ():
        try:
            evaluator = make_evaluator(backend, data)
            check_outputs(evaluator)
        except Exception as exc:
            errors.append(f"{backend}: {type(exc).__name__}: {exc}")
            continue
        return evaluator, backend, "; ".join(errors)
    return UniformEvaluator(), "uniform", "; ".join(errors)


def read_model(source: str | Path | bytes) -> tuple[bytes, str]:
    """Model bytes and a name for messages; a missing file raises ``FileNotFoundError``."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), f"<{len(source)} bytes>"
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"ONNX model {path} does not exist")
    return path.read_bytes(), str(path)


class ModelError(ValueError):
    """A file that onnxruntime cannot load as a model (corrupt, empty, not ONNX)."""


class OnnxRuntimeEvaluator(OrtEvaluator):
    """The agent's onnxruntime evaluator, loaded from a file path or the model bytes.  Raises ``FileNotFoundError``
    (no file), ``ImportError`` (no onnxruntime), ``ModelError`` (it cannot load, or ``check_outputs`` refuses it)."""

    def __init__(self, source: str | Path | bytes) -> None:
        data, name = read_model(source)
        try:
            super().__init__(data)
        except ImportError:
            raise
        except Exception as exc:  # onnxruntime raises its own exception types for bad models
            raise ModelError(f"onnxruntime cannot load {name}: {str(exc).splitlines()[0][:200]}") from exc
        try:
            check_outputs(self)
        except ValueError as exc:
            raise ModelError(f"{name} is not a network of this package: {exc}") from None
