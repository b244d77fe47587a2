"""Where training runs: the torch device for a config's ``device`` (only GPUs this torch build has kernels for),
and the machine a new run is sized for (``Machine``; ``sizing.sized`` holds the rule)."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass

import torch

from connectx_az.training.config import ConfigError, RunConfig

log = logging.getLogger(__name__)


def resolve_device(name: str) -> torch.device:
    """The torch device for a config's ``device``: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...

    ``"auto"`` is CUDA only where ``cuda_problem`` finds none, else the CPU with one logged line.  An explicit
    CUDA device that cannot work, or an unknown name, is a ``ConfigError``."""
    if name == "auto":
        if not torch.cuda.is_available():
            return torch.device("cpu")
        problem = cuda_problem(torch.device("cuda"))
        if problem is None:
            return torch.device("cuda")
        log.warning("%s; training on the CPU instead", problem)
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise ConfigError(f"unknown device {name!r}; use auto, cpu or cuda") from exc
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"device {name!r} asked for, but torch sees no CUDA GPU; use device auto or cpu")
        problem = cuda_problem(device)
        if problem is not None:
            raise ConfigError(f"{problem}; use device auto or cpu")
    return device


def cuda_problem(device: torch.device) -> str | None:
    """Why torch cannot run kernels on CUDA ``device``, or None when it can.

    Recent wheels lack kernels for old GPUs (CUDA 12.8 builds dropped Kaggle's P100) while
    ``torch.cuda.is_available()`` stays True, so the capability is checked against the build's arch list."""
    index = device.index or 0
    if index >= torch.cuda.device_count():
        return f"there is no CUDA device {index} (torch sees {torch.cuda.device_count()})"
    capability = torch.cuda.get_device_capability(index)
    arch_list = torch.cuda.get_arch_list()
    if arch_covers(arch_list, capability):
        return None
    major, minor = capability
    return (f"the GPU {torch.cuda.get_device_name(index)} (compute capability {major}.{minor}) is not supported "
            f"by this torch build (it has kernels for {' '.join(arch_list) or 'no GPU'}): on Kaggle choose the "
            f"accelerator \"GPU T4 x2\", elsewhere a GPU of capability 7.0 or newer or a torch build for "
            f"sm_{major}{minor}")


def arch_covers(arch_list: list[str], capability: tuple[int, int]) -> bool:
    """Whether a torch build compiled for ``arch_list`` runs on a GPU of ``capability``: ``sm_XY`` runs on X.Y' with
    Y' >= Y (same major), ``sm_XYa`` on X.Y only, ``compute_XY`` (PTX) on any >= X.Y."""
    for arch in arch_list:
        match = re.fullmatch(r"(sm|compute)_(\d+)(\d)([a-z]?)", arch)
        if match is None:
            continue
        kind, major, minor, suffix = match[1], int(match[2]), int(match[3]), match[4]
        if kind == "compute" and capability >= (major, minor):
            return True
        if kind == "sm" and (capability == (major, minor) or
                             (not suffix and capability[0] == major and capability[1] >= minor)):
            return True
    return False


@dataclass(frozen=True)
class Machine:
    """What a new run is sized for: the CPU cores this process may use, and the GPU's name ("" for none)."""

    cores: int
    gpu: str = ""

    @property
    def label(self) -> str:
        return f"{self.cores} core{'s' * (self.cores != 1)}, " + (f"GPU {self.gpu}" if self.gpu else "no GPU")


def available_cores() -> int:
    """The cores this process may run on (a ``taskset`` or a container's CPU set counts), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def detect(device: torch.device) -> Machine:
    """This machine, for a run on ``device`` (``resolve_device``)."""
    gpu = torch.cuda.get_device_name(device.index or 0) if device.type == "cuda" else ""
    return Machine(cores=available_cores(), gpu=gpu)


def describe(config: RunConfig, machine: Machine) -> str:
    """One line: the machine and the sizes ``config`` trains with there (``sizing.sized``)."""
    sp = config.selfplay
    where = f"{sp.num_workers} self-play worker{'s' * (sp.num_workers != 1)} x {sp.num_parallel_games}" \
        if sp.num_workers > 0 else f"self-play in the training process, {sp.num_parallel_games}"
    return (f"machine: {machine.label}; {where} games in flight, {sp.num_games:,} games "
            f"and {config.train.steps_per_generation} training steps a generation, {config.threads} torch "
            f"thread{'s' * (config.threads != 1)}")
