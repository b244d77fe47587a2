"""Run configuration: frozen dataclasses, presets, ``--set`` overrides, ``config.json`` beside the run.

Overrides use dotted paths (``mcts.num_simulations=400``); an unknown key is an error listing the valid
ones.  A saved config may hold settings that have left the package (``RETIRED``): they load where they
hold the value that does what the code does now."""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from connectx_az import files
from connectx_az.engine.search_tree import SearchConfig
from connectx_az.errors import UserError

#: longest random prefix: past it, prefixes that keep the rules of ``random_prefix`` get rare
MAX_PREFIX_PLIES = 30


@dataclass(frozen=True, kw_only=True)
class SelfPlayConfig:
    """How each generation's games are played (``selfplay.play_games``); the defaults are the recipe
    (docs/ablations.md)."""

    num_games: int = 256
    num_parallel_games: int = 128
    # below temperature_plies a move is drawn from N(a)^(1/T), T = temperature_early (0: the most visited);
    # a proven root plays its proof at any ply
    temperature_plies: int = 8
    temperature_early: float = 1.0
    # shares of games started from a random prefix of 0..prefix_max_plies plies, and from a fork;
    # shares of 0 draw nothing from the generator
    prefix_share: float = 0.5
    prefix_max_plies: int = 14
    fork_share: float = 0.25
    # forks branch from the previous generation's positions (its shard) too, not only from this call's, so the
    # first wave of games forks as well and a generation's games can all be in flight at once, the network's
    # batches at their largest (docs/ablations.md, ablation 30)
    fork_previous: bool = True
    # 0: in this process; W >= 1: W worker processes (``workers``), each with ``num_parallel_games`` in
    # flight (the games depend on W); -1: one a CPU core
    num_workers: int = 0
    # positions whose answers ``CachedEvaluator`` keeps for one call of ``play_games``; 0: no cache
    cache_positions: int = 1 << 20

    def __post_init__(self) -> None:
        if self.num_games < 1 or self.num_parallel_games < 1:
            raise ValueError("selfplay.num_games and selfplay.num_parallel_games must be >= 1")
        if self.temperature_plies < 0 or self.temperature_early < 0:
            raise ValueError("selfplay.temperature_plies and selfplay.temperature_early must be >= 0")
        if not (0 <= self.prefix_share <= 1 and 0 <= self.fork_share <= 1 and self.prefix_share + self.fork_share <= 1):
            raise ValueError("selfplay.prefix_share and selfplay.fork_share must be in [0, 1], their sum at most 1")
        if not 0 <= self.prefix_max_plies <= MAX_PREFIX_PLIES:
            raise ValueError(f"selfplay.prefix_max_plies must be in [0, {MAX_PREFIX_PLIES}]")
        if self.num_workers < -1:
            raise ValueError("selfplay.num_workers must be >= -1 (0 plays in this process, -1 one worker a core)")
        if self.cache_positions < 0:
            raise ValueError("selfplay.cache_positions must be >= 0 (0 turns the cache off)")


@dataclass(frozen=True, kw_only=True)
class NetConfig:
    """Network shape: ``num_blocks`` residual blocks of ``num_filters`` channels, then two heads.

    Policy head: a 1x1 convolution to ``policy_filters`` planes, one linear layer to the 7 logits.  Value
    head: a 1x1 convolution to ``value_filters`` planes; with ``value_pool`` the board average of each tower
    channel is appended (the tower's, which the narrow 1x1 convolution would otherwise squeeze); then
    ``value_hidden`` units and a tanh.  The defaults are the recipe (docs/ablations.md, ablation 6)."""

    num_blocks: int = 4
    num_filters: int = 64
    value_hidden: int = 64
    policy_filters: int = 32
    value_filters: int = 32
    value_pool: bool = True

    def __post_init__(self) -> None:
        if self.num_blocks < 0 or self.num_filters < 1 or self.value_hidden < 1:
            raise ValueError("num_blocks must be >= 0 and num_filters, value_hidden >= 1")
        if self.policy_filters < 1 or self.value_filters < 1:
            raise ValueError("net.policy_filters and net.value_filters must be >= 1")

    @property
    def label(self) -> str:
        """``"4x64"`` (blocks x filters), plus the heads where they are not the first networks' (``PLAIN_HEADS``):
        ``"4x64 p32 v32+pool"``, as ``onnx_numpy.NumpyOnnxModel.net_shape`` reads it from a graph."""
        label = f"{self.num_blocks}x{self.num_filters}"
        if (self.policy_filters, self.value_filters, self.value_pool) != PLAIN_HEADS:
            label += f" p{self.policy_filters} v{self.value_filters}" + ("+pool" if self.value_pool else "")
        return label

    def grows_from(self, other: NetConfig) -> bool:
        """True when a warm start can take ``other``'s weights into this shape: the same filters, at
        least as many blocks (the extra ones are appended as identities) and any heads."""
        return self.num_filters == other.num_filters and self.num_blocks >= other.num_blocks


#: ``(policy_filters, value_filters, value_pool)`` of the first networks, which a label leaves unsaid
PLAIN_HEADS = (2, 1, False)
#: inference precisions of self-play (``network.autocast_dtype``)
PRECISIONS = ("auto", "float32", "float16", "bfloat16")
#: training precisions: float16 would need loss scaling, so training offers bfloat16 alone beside float32
TRAIN_PRECISIONS = ("auto", "float32", "bfloat16")

LR_SCHEDULES = ("constant", "cosine")
#: Settings that left the package (docs/ablations.md names the commit that still runs each) -> the value that does
#: what the code does now (``None``: any value).  A saved config holding another value is an error.
RETIRED: dict[str, Any] = {
    "selfplay.gumbel.enabled": False, "selfplay.gumbel.considered": None, "selfplay.gumbel.c_visit": None,
    "selfplay.gumbel.c_scale": None,
    "selfplay.full_search_prob": 1.0, "selfplay.fast_simulations": None,
    "selfplay.adjudicate_empty": 0, "selfplay.adjudicate_nodes": None,
    "selfplay.temperature_late": 0.0,
    "mcts.fpu_absolute": False, "mcts.dirichlet_alpha_total": 0.0,
    "train.solved_policy_target": "any",
}
#: Settings added after runs were saved without them -> the value those runs ran with, where today's default
#: differs: a saved config without the key loads as it ran (a resumed run goes on playing the same games).
ADDED: dict[str, Any] = {
    "selfplay.fork_previous": False,
}


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Optimisation of each generation; the defaults are the recipe (docs/ablations.md)."""

    batch_size: int = 256
    lr: float = 2e-3
    weight_decay: float = 1e-4
    steps_per_generation: int = 200
    replay_generations: int = 10
    replay_max_positions: int = 300_000
    dedupe: bool = True
    # "constant": ``lr`` throughout; "cosine": ``lr`` until ``lr_schedule_start``, then down to ``lr_min`` at the end
    lr_schedule: str = "cosine"
    lr_min: float = 3e-5
    lr_schedule_start: int = 0
    # Value target: (1 - value_mix) * game result + value_mix * root search value.
    value_mix: float = 0.5
    # 0: a window of ``replay_generations``; g > 0: the window grows by g a generation, from 1 up to it
    replay_growth: float = 0.0
    # Proven positions (a ``connectx-az label`` file): ``solved_per_batch`` join each batch with their result as
    # value target; with ``solved_policy`` their best moves join the policy loss (``train.proven_policy_terms``);
    # only those of at most ``solved_max_plies`` plies (0: all).
    solved_labels: str = "builtin"
    solved_per_batch: int = 128
    solved_policy: bool = True
    solved_max_plies: int = 12
    # autocast of the forward pass (``network.train_autocast_dtype``; "auto": bfloat16 where inference's is);
    # weights and AdamW stay float32
    precision: str = "auto"

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.steps_per_generation < 0:
            raise ValueError("train.batch_size must be >= 1 and train.steps_per_generation >= 0")
        if self.lr <= 0 or self.lr_min <= 0:
            raise ValueError("train.lr and train.lr_min must be > 0")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"train.lr_schedule must be one of {', '.join(LR_SCHEDULES)}, not {self.lr_schedule!r}")
        if self.replay_generations < 1 or self.replay_max_positions < 1:
            raise ValueError("train.replay_generations and train.replay_max_positions must be >= 1")
        if not 0 <= self.value_mix <= 1:
            raise ValueError("train.value_mix must be in [0, 1]")
        if self.replay_growth < 0:
            raise ValueError("train.replay_growth must be >= 0")
        if self.solved_per_batch < 0 or (self.solved_per_batch > 0 and not self.solved_labels):
            raise ValueError("train.solved_per_batch must be >= 0, and > 0 only with train.solved_labels "
                             "(a file written by `connectx-az label`)")
        if self.solved_policy and not self.solved_per_batch:
            raise ValueError("train.solved_policy needs train.solved_per_batch > 0 (and train.solved_labels)")
        if self.solved_max_plies < 0 or (self.solved_max_plies and not self.solved_per_batch):
            raise ValueError("train.solved_max_plies must be >= 0, and > 0 only with train.solved_per_batch > 0")
        if self.precision not in TRAIN_PRECISIONS:
            raise ValueError(f"train.precision must be one of {', '.join(TRAIN_PRECISIONS)}, not {self.precision!r}")

    def lr_at(self, generation: int, num_generations: int) -> float:
        """The learning rate of ``generation`` in a run of ``num_generations``."""
        if self.lr_schedule == "constant" or generation < self.lr_schedule_start:
            return self.lr
        span = max(num_generations - 1 - self.lr_schedule_start, 1)
        return self.lr_at_fraction((generation - self.lr_schedule_start) / span)

    def lr_at_fraction(self, fraction: float) -> float:
        """The learning rate once ``fraction`` (0 to 1) of the run's schedule is spent: ``lr`` at 0, and under
        ``cosine`` falling to ``lr_min`` at 1 (a run timed by ``RunConfig.total_time`` counts it in seconds)."""
        if self.lr_schedule == "constant":
            return self.lr
        t = min(max(fraction, 0.0), 1.0)
        return self.lr_min + 0.5 * (self.lr - self.lr_min) * (1 + math.cos(math.pi * t))

    def window_at(self, generation: int) -> int:
        """How many generations of shards generation ``generation`` trains on."""
        if self.replay_growth <= 0:
            return self.replay_generations
        return max(1, min(self.replay_generations, 1 + int(generation * self.replay_growth)))


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """Everything a training run needs."""

    net: NetConfig = field(default_factory=NetConfig)
    mcts: SearchConfig = field(default_factory=SearchConfig)
    selfplay: SelfPlayConfig = field(default_factory=SelfPlayConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    num_generations: int = 20
    seed: int = 0
    device: str = "auto"
    # self-play's inference precision (``network.autocast_dtype``); training's is ``train.precision``
    precision: str = "auto"
    threads: int = 1
    eval_positions: int = 100
    # seconds of generations across resumes (``train --total-time``; the learning rate follows the share spent);
    # 0: the run is ``num_generations`` long
    total_time: float = 0.0

    def __post_init__(self) -> None:
        if self.num_generations < 1:
            raise ValueError("num_generations must be >= 1")
        if not self.total_time >= 0:
            raise ValueError("total_time must be >= 0 seconds (0: the run is num_generations long)")
        if self.total_time and self.train.lr_schedule_start:
            raise ValueError("train.lr_schedule_start counts generations: a run timed by total_time starts its "
                             "schedule at once (set train.lr_schedule_start=0)")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {self.precision!r}")


def _merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


#: The dataclass defaults are the recipe; a preset sets only sizes and how the work is spread over the machine.
PRESETS: dict[str, dict[str, Any]] = {
    # a one-minute check that learns nothing but runs every switch of the recipe
    "smoke": {
        "net": {"num_blocks": 1, "num_filters": 16, "value_hidden": 16},
        "mcts": {"num_simulations": 8},
        "selfplay": {"num_games": 8, "num_parallel_games": 4},
        "train": {"batch_size": 32, "steps_per_generation": 4, "solved_per_batch": 16},
        "num_generations": 2,
        "eval_positions": 10,
    },
    # one CPU core's lane (docs/results.md, "Speed")
    "cpu": {
        "net": {"num_blocks": 4, "num_filters": 64},
        "mcts": {"num_simulations": 96},
        "selfplay": {"num_games": 160, "num_parallel_games": 160},
        "train": {"batch_size": 256, "steps_per_generation": 100, "replay_generations": 8},
        "num_generations": 450,
    },
    # the recipe scaled to a GPU, without the answer cache (a GPU's call costs the same whatever its size)
    "gpu": {
        "net": {"num_blocks": 4, "num_filters": 64},
        "mcts": {"num_simulations": 200},
        "selfplay": {"num_games": 2048, "num_parallel_games": 64, "num_workers": -1, "cache_positions": 0},
        "train": {"batch_size": 1024, "steps_per_generation": 400, "replay_generations": 10,
                  "replay_max_positions": 1_000_000},
        "num_generations": 100,
    },
}


class ConfigError(UserError, ValueError):
    """A configuration problem, worded for the person running the command."""


def _build(cls: type, values: dict[str, Any], prefix: str = "") -> Any:
    """Instantiate nested dataclass ``cls`` from a (possibly partial) dict."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in values.items():
        if key not in fields:
            raise unknown_key(prefix + key)
        sub = _nested_type(cls, key)
        kwargs[key] = _build(sub, value, f"{prefix}{key}.") if sub is not None else value
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from exc


def _nested_type(cls: type, name: str) -> type | None:
    default = {f.name: f for f in dataclasses.fields(cls)}[name]
    if default.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        value = default.default_factory()  # type: ignore[misc]
        if dataclasses.is_dataclass(value):
            return type(value)
    return None


def valid_keys(cls: type = RunConfig, prefix: str = "") -> list[str]:
    """All dotted keys that ``--set`` accepts."""
    keys = []
    for f in dataclasses.fields(cls):
        sub = _nested_type(cls, f.name)
        keys.extend(valid_keys(sub, f"{prefix}{f.name}.") if sub is not None else [prefix + f.name])
    return keys


def unknown_key(key: str) -> ConfigError:
    """The one-line error for ``key``: the keys of the deepest section it names, then the closest of them."""
    keys = valid_keys()
    parts = key.split(".")
    section = next((".".join(parts[:n]) + "." for n in range(len(parts) - 1, 0, -1)
                    if any(k.startswith(".".join(parts[:n]) + ".") for k in keys)), "")
    names = list(dict.fromkeys(k[len(section):].split(".")[0] + (".*" if "." in k[len(section):] else "")
                               for k in keys if k.startswith(section)))
    listed = f"{section}{{{', '.join(names)}}}" if section else ", ".join(names)
    close = difflib.get_close_matches(key[len(section):], [n for n in names if not n.endswith("*")], n=2, cutoff=0.6)
    hint = f"; did you mean {' or '.join(section + c for c in close)}?" if close else ""
    return ConfigError(f"unknown config key {key!r}; valid keys: {listed}{hint}")


def _parse_value(text: str, current: Any) -> Any:
    """Convert an override string to the type of the value it replaces."""
    if isinstance(current, bool):
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"expected true or false, got {text!r}")
    try:
        if isinstance(current, int):
            return int(text)
        if isinstance(current, float):
            return float(text)
    except ValueError as exc:
        kind = "an integer" if isinstance(current, int) else "a number"
        raise ConfigError(f"expected {kind}, got {text!r}") from exc
    return text


def to_dict(config: RunConfig) -> dict[str, Any]:
    return dataclasses.asdict(config)


def _migrate(values: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``values`` without the ``RETIRED`` settings (``ConfigError`` where one holds another value), and
    with the ``ADDED`` ones it lacks, where it has their section."""
    values = copy.deepcopy(values)
    for key, before in ADDED.items():
        *parents, name = key.split(".")
        node: Any = values
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.setdefault(name, before)
    for key, kept in RETIRED.items():
        *parents, name = key.split(".")
        nodes: list[Any] = [values]
        for part in parents:
            nodes.append(nodes[-1].get(part) if isinstance(nodes[-1], dict) else None)
        if not isinstance(nodes[-1], dict) or name not in nodes[-1]:
            continue
        value = nodes[-1].pop(name)
        if kept is not None and value != kept:
            raise ConfigError(f"{key}={json.dumps(value)}: this setting has left the package "
                              "(docs/ablations.md names the commit that still runs it)")
        for parent, node, part in reversed(list(zip(nodes[:-1], nodes[1:], parents, strict=True))):
            if node == {}:
                del parent[part]
    return values


def from_dict(values: dict[str, Any]) -> RunConfig:
    return _build(RunConfig, _migrate(values))


def make_config(preset: str = "cpu", *, toml_path: str | Path | None = None,
                overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Preset, then an optional TOML file, then ``key=value`` overrides, validated."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; choose one of: {', '.join(PRESETS)}")
    values = _merge(to_dict(RunConfig()), PRESETS[preset])
    if toml_path is not None:
        try:
            values = _merge(values, tomllib.loads(Path(toml_path).read_text()))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config file {toml_path}: {exc}") from exc
    return from_dict(apply_overrides(values, overrides))


def override(config: RunConfig, overrides: list[str] | tuple[str, ...]) -> RunConfig:
    """``config`` with ``key=value`` overrides applied, validated."""
    return from_dict(apply_overrides(to_dict(config), overrides))


def apply_overrides(values: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """A copy of config dict ``values`` with ``key=value`` overrides applied (types kept)."""
    values = json.loads(json.dumps(values))
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep:
            raise ConfigError(f"override {item!r} must look like key=value, e.g. mcts.num_simulations=400")
        key = key.strip()
        parts = key.split(".")
        node = values
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                raise unknown_key(key)
            node = node[part]
        if parts[-1] not in node or isinstance(node[parts[-1]], dict):
            raise unknown_key(key)
        try:
            node[parts[-1]] = _parse_value(text.strip(), node[parts[-1]])
        except ConfigError as exc:
            raise ConfigError(f"setting {key}: {exc}") from None
    return values


def leaves(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Config dict ``values`` (a partial one too) flattened to dotted keys (``mcts.num_simulations``)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        out.update(leaves(value, f"{prefix}{key}.") if isinstance(value, dict) else {prefix + key: value})
    return out


def save_json(data: dict[str, Any], path: str | Path) -> None:
    """Write JSON atomically."""
    files.atomic_write_bytes(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode())


def save_config(config: RunConfig, run_dir: str | Path) -> Path:
    path = Path(run_dir) / "config.json"
    save_json(to_dict(config), path)
    return path


def load_config(run_dir: str | Path) -> RunConfig:
    path = Path(run_dir) / "config.json"
    try:
        return from_dict(json.loads(path.read_text()))
    except FileNotFoundError as exc:
        raise ConfigError(f"{path} not found: is {run_dir} a training run directory?") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc}") from exc
