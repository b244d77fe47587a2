"""The policy-value network: a small ResNet over the two-plane board, its torch evaluator and checkpoints.

Input ``float32[B, 2, 6, 7]`` (``game.encode``: side to move, opponent).  Outputs ``logits float32[B, 7]``
(unmasked) and ``value float32[B]`` in ``[-1, 1]`` from the side to move.  The default size (4x64) is
chosen for the Kaggle clock (README, *Speed*).  Inference precision follows the device
(``autocast_dtype``); training's is ``train_autocast_dtype``.  Checkpoints are ``torch.save`` dicts of
tensors and JSON-able values, loaded with ``weights_only=True``; every bad file is a ``CheckpointError``."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from connectx_az import files
from connectx_az.engine import game
from connectx_az.errors import UserError

# the network's shape lives with the run's settings (config.py loads without torch); callers import it from here too
from connectx_az.training.config import PRECISIONS, TRAIN_PRECISIONS, NetConfig  # noqa: F401


def cpu_has_fast_bfloat16() -> bool:
    """Whether this CPU has bfloat16 instructions (AVX-512 BF16 or AMX), without which torch emulates bfloat16."""
    if not torch.backends.mkldnn.is_available():
        return False
    for probe in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        try:
            if getattr(torch.cpu, probe)():
                return True
        except (AttributeError, RuntimeError):  # an older or newer torch without the probe
            continue
    return False


def autocast_dtype(device: str | torch.device, precision: str = "auto") -> torch.dtype | None:
    """The autocast dtype for inference on ``device``, or None for plain float32.

    ``"auto"``: bfloat16 on CUDA compute capability >= 8.0, float16 on 7.x (bfloat16 is emulated there),
    float32 below; on a CPU bfloat16 where ``cpu_has_fast_bfloat16``.  An explicit name of ``PRECISIONS`` is
    obeyed on any device.  Raises ``ValueError`` for an unknown name."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if precision == "float32":
        return None
    if precision != "auto":
        return getattr(torch, precision)
    device = torch.device(device)
    if device.type == "cpu":
        return torch.bfloat16 if cpu_has_fast_bfloat16() else None
    if device.type != "cuda":
        return None
    major, _ = torch.cuda.get_device_capability(device)
    if major >= 8:
        return torch.bfloat16
    if major == 7:
        return torch.float16
    return None


def train_autocast_dtype(device: str | torch.device, precision: str) -> torch.dtype | None:
    """The autocast dtype for training on ``device`` (``TrainConfig.precision``), or None for float32.

    ``"auto"``: bfloat16 where inference's auto is, else float32 (float16 would need loss scaling).
    Raises ``ValueError`` for a name not in ``TRAIN_PRECISIONS``."""
    if precision not in TRAIN_PRECISIONS:
        raise ValueError(f"train.precision must be one of {', '.join(TRAIN_PRECISIONS)}, not {precision!r}")
    if precision == "bfloat16":
        return torch.bfloat16
    if precision == "auto" and autocast_dtype(device, "auto") == torch.bfloat16:
        return torch.bfloat16
    return None


class CheckpointError(UserError, ValueError):
    """A checkpoint that cannot be used, with a message saying what to do."""


def _conv_bn(cin: int, cout: int, kernel: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, padding=kernel // 2, bias=False), nn.BatchNorm2d(cout))


class _Block(nn.Module):
    def __init__(self, filters: int) -> None:
        super().__init__()
        self.conv1 = _conv_bn(filters, filters, 3)
        self.conv2 = _conv_bn(filters, filters, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.conv2(torch.relu(self.conv1(x))))


class PolicyValueNet(nn.Module):
    """AlphaZero-style ResNet: stem, residual tower, policy head and value head."""

    def __init__(self, config: NetConfig) -> None:
        super().__init__()
        self.config = config
        f = config.num_filters
        self.stem = _conv_bn(2, f, 3)
        self.blocks = nn.Sequential(*[_Block(f) for _ in range(config.num_blocks)])
        self.policy_conv = _conv_bn(f, config.policy_filters, 1)
        self.policy_fc = nn.Linear(config.policy_filters * game.NUM_CELLS, game.NUM_ACTIONS)
        self.value_conv = _conv_bn(f, config.value_filters, 1)
        value_features = config.value_filters * game.NUM_CELLS + (f if config.value_pool else 0)
        self.value_fc1 = nn.Linear(value_features, config.value_hidden)
        self.value_fc2 = nn.Linear(config.value_hidden, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs float32[B,2,6,7]`` -> ``(logits float32[B,7], value float32[B])``, side to move."""
        x = self.blocks(torch.relu(self.stem(obs)))
        logits = self.policy_fc(torch.flatten(torch.relu(self.policy_conv(x)), 1))
        v = torch.flatten(torch.relu(self.value_conv(x)), 1)
        if self.config.value_pool:
            # Exported as GlobalAveragePool, Flatten and Concat (all in agent.onnx_numpy).
            v = torch.cat([v, torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)], dim=1)
        value = torch.tanh(self.value_fc2(torch.relu(self.value_fc1(v)))).squeeze(-1)
        return logits, value

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def place(net: PolicyValueNet, device: str | torch.device) -> PolicyValueNet:
    """``net`` itself, moved to ``device``; on a CPU also channels-last, the faster layout there
    (docs/history.md, 2026-11-27).  Checkpoints load into either layout."""
    device = torch.device(device)
    net = net.to(device)
    return net.to(memory_format=torch.channels_last) if device.type == "cpu" else net


def fold_batchnorm(net: PolicyValueNet) -> PolicyValueNet:
    """An inference copy of ``net`` (eval mode, no gradients) with each BatchNorm folded into its convolution:
    what ``net.eval()`` computes, up to rounding."""
    folded = copy.deepcopy(net).eval().requires_grad_(False)
    for module in folded.modules():
        if isinstance(module, nn.Sequential) and len(module) == 2 \
                and isinstance(module[0], nn.Conv2d) and isinstance(module[1], nn.BatchNorm2d):
            module[0] = fuse_conv_bn_eval(module[0], module[1])
            module[1] = nn.Identity()
    return folded


class TorchEvaluator:
    """``search_tree.Evaluator`` over a torch network (``place``d on ``device`` and set to eval mode, in place).

    Autocast at ``autocast_dtype(device, precision)``, float32 outputs.  It runs ``fold_batchnorm(net)``,
    folded again whenever ``net``'s weights change, so it answers for the weights ``net`` holds now."""

    def __init__(self, net: PolicyValueNet, device: str | torch.device = "cpu", precision: str = "auto") -> None:
        self.device = torch.device(device)
        self.net = place(net, self.device).eval()
        self.dtype = autocast_dtype(self.device, precision)
        self._folded: PolicyValueNet | None = None
        self._folded_for: tuple[tuple[int, int], ...] = ()
        # listed once: walking the modules on every call is slow
        self._tensors = list(itertools.chain(self.net.parameters(), self.net.buffers()))

    def _inference_net(self) -> PolicyValueNet:
        """``fold_batchnorm(self.net)``, kept while no weight or buffer changes (version counter and address); a
        parameter object swapped for another (``load_state_dict(..., assign=True)``) needs a new evaluator."""
        state = tuple((t.data_ptr(), t._version) for t in self._tensors)
        if self._folded is None or state != self._folded_for:
            self._folded, self._folded_for = fold_batchnorm(self.net), state
        return self._folded

    @torch.inference_mode()
    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        net = self._inference_net()
        x = torch.from_numpy(np.ascontiguousarray(obs)).to(self.device, non_blocking=True).float()
        with torch.autocast(self.device.type, dtype=self.dtype or torch.float32, enabled=self.dtype is not None):
            logits, value = net(x)
        return logits.float().cpu().numpy(), value.float().cpu().numpy()


def fastest_precision(net: PolicyValueNet, device: str | torch.device, batch_size: int, *,
                      seconds: float = 0.3) -> str:
    """The faster precision at batches of ``batch_size`` on ``device``: float32 or ``autocast_dtype(device,
    "auto")``'s, each timed for about ``seconds`` (on a GPU the casts can cost more than they save:
    docs/results.md, "Self-play sized to the machine")."""
    low = autocast_dtype(device, "auto")
    candidates = ["float32"] + ([str(low).removeprefix("torch.")] if low is not None else [])
    if len(candidates) == 1:
        return "float32"
    obs = np.zeros((batch_size, 2, 6, 7), np.uint8)

    def rate(precision: str) -> float:
        evaluator = TorchEvaluator(net, device, precision)
        for _ in range(2):  # warm-up: kernels chosen, the folded network built
            evaluator.evaluate(obs)
        calls, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds or calls < 3:
            evaluator.evaluate(obs)
            calls += 1
        return calls / elapsed

    return max(candidates, key=rate)


def save_checkpoint(path: str | Path, net: PolicyValueNet, **extra: Any) -> None:
    """Atomically save the net's weights and config, plus any ``extra`` entries."""
    data = {"net_config": dataclasses.asdict(net.config), "model": net.state_dict(), **extra}
    files.atomic_write(path, lambda f: torch.save(data, f))


def load_checkpoint(path: str | Path) -> tuple[PolicyValueNet, dict[str, Any]]:
    """``(net, whole_dict)`` of a checkpoint written by ``save_checkpoint``.  Raises ``CheckpointError`` for a
    missing file, a file that is not a checkpoint, or weights that do not fit the stored architecture."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist; pass the path of a .pt file written by training")
    if path.suffix == ".onnx":
        raise CheckpointError(f"{path} is an ONNX model, an export that training cannot read: use the .pt checkpoint "
                              "it came from (a run's checkpoint.pt; the shipped network's is "
                              "connectx_az/models/default.pt)")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a damaged file
        raise CheckpointError(f"{path} is not a readable checkpoint ({type(exc).__name__}); "
                              "it may be truncated or not a connectx_az file") from exc
    if not isinstance(data, dict) or "model" not in data or "net_config" not in data:
        raise CheckpointError(f"{path} is not a connectx_az checkpoint (no 'model'/'net_config' entries)")
    try:
        config = NetConfig(**data["net_config"])
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{path} has an invalid net_config: {exc}") from exc
    net = PolicyValueNet(config)
    try:
        net.load_state_dict(data["model"])
    except RuntimeError as exc:
        raise CheckpointError(f"{path}: weights do not match a {config.label} network; "
                              "was it written by another version?") from exc
    return net.eval(), data


def load_into(net: PolicyValueNet, path: str | Path, *, warm_start: bool = False) -> list[str]:
    """Load the weights of checkpoint ``path`` into ``net``; returns the layers left as they were.

    The architectures must match, or for a ``warm_start`` ``net`` must grow from the checkpoint's
    (``NetConfig.grows_from``): then every tensor of matching name and shape is loaded, and the layers that
    keep ``net``'s own weights come back (e.g. ``["value_conv", "value_fc1"]``; ``grow``).  Raises
    ``CheckpointError`` otherwise."""
    loaded, _ = load_checkpoint(path)
    if loaded.config == net.config:
        net.load_state_dict(loaded.state_dict())
        return []
    if not (warm_start and net.config.grows_from(loaded.config)):
        raise CheckpointError(f"{path} holds a {loaded.config.label} network but a "
                              f"{net.config.label} one was asked for; set the net config to match "
                              "(a warm start may change the heads and add blocks, nothing else)")
    return grow(loaded, net)


def grow(small: PolicyValueNet, net: PolicyValueNet) -> list[str]:
    """Load ``small``'s weights into ``net``, which ``NetConfig.grows_from`` it; returns the layers left as they
    were.  Extra blocks start as identities: their last batch-norm scale is zero (Goyal et al., 2017)."""
    own = net.state_dict()
    kept = {name: tensor for name, tensor in small.state_dict().items()
            if name in own and own[name].shape == tensor.shape}
    net.load_state_dict(kept, strict=False)
    with torch.no_grad():
        for block in net.blocks[small.config.num_blocks:]:
            block.conv2[1].weight.zero_()
    return sorted({_layer(name) for name in own if name not in kept})


def _layer(name: str) -> str:
    """The layer a state-dict entry belongs to: ``"value_fc1"``, or ``"blocks.4"`` for a block's."""
    parts = name.split(".")
    return ".".join(parts[:2] if parts[0] == "blocks" else parts[:1])
