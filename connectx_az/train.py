"""The generation loop: self-play, store, train, checkpoint, evaluate. Resumable.

A run lives in one directory::

    RUN_DIR/config.json        the frozen RunConfig, written before any work
    RUN_DIR/replay/gen_*.npz   one shard of self-play positions per generation
    RUN_DIR/checkpoint.pt      weights, optimizer, and the next generation to run
    RUN_DIR/metrics.jsonl      one JSON line per finished generation

Generation ``g`` writes its shard, then the metrics line, then the checkpoint
saying "next is ``g + 1``"; each write is atomic.  A run killed at any moment
resumes at the checkpoint's generation: a shard or metrics line of an
unfinished generation is simply redone (the metrics file is trimmed to the
checkpoint on resume), so no generation is lost or counted twice.  Every
generation's randomness is seeded from ``(seed, generation)``, so a resumed
run on CPU makes the same games as an uninterrupted one.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from connectx_az import files, replay, workers
from connectx_az.config import ConfigError, RunConfig, load_config, preset_of, save_config
from connectx_az.network import PolicyValueNet, TorchEvaluator, load_checkpoint, load_into, save_checkpoint

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint.pt"
METRICS = "metrics.jsonl"


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def train_steps(net: PolicyValueNet, optimizer: torch.optim.Optimizer, data: replay.ReplayData,
                num_steps: int, batch_size: int, rng: np.random.Generator, device: torch.device,
                *, progress: bool = True) -> dict[str, float]:
    """``num_steps`` of AdamW on policy cross-entropy + value MSE; returns mean losses."""
    net.train()
    sums = {"policy_loss": 0.0, "value_loss": 0.0, "policy_entropy": 0.0}
    for _ in tqdm(range(num_steps), desc="train", leave=False, disable=not progress):
        batch = data.sample(batch_size, rng)
        obs = torch.from_numpy(batch.obs).to(device)
        target_policy = torch.from_numpy(batch.policy).to(device)
        target_value = torch.from_numpy(batch.value).to(device)
        logits, value = net(obs)
        log_probs = F.log_softmax(logits, dim=1)
        policy_loss = -(target_policy * log_probs).sum(dim=1).mean()
        value_loss = F.mse_loss(value, target_value)
        optimizer.zero_grad(set_to_none=True)
        (policy_loss + value_loss).backward()
        optimizer.step()
        sums["policy_loss"] += policy_loss.item()
        sums["value_loss"] += value_loss.item()
        sums["policy_entropy"] += -(log_probs.exp() * log_probs).sum(dim=1).mean().item()
    net.eval()
    return {k: v / max(num_steps, 1) for k, v in sums.items()}


def _trim_metrics(run_dir: Path, next_generation: int) -> None:
    """Drop metrics lines of generations the checkpoint does not include."""
    path = run_dir / METRICS
    if not path.exists():
        return
    kept = [line for line in path.read_text().splitlines()
            if line.strip() and json.loads(line).get("generation", -1) < next_generation]
    files.atomic_write_bytes(path, "".join(line + "\n" for line in kept).encode())


def _append_metrics(run_dir: Path, row: dict[str, Any]) -> None:
    with open(run_dir / METRICS, "a") as f:
        f.write(json.dumps(row) + "\n")
        f.flush()


def run(run_dir: str | Path, config: RunConfig | None = None, *, resume: bool = False,
        init_model: str | Path | None = None, num_generations: int | None = None,
        progress: bool = True, on_generation: Callable[[dict[str, Any]], None] | None = None,
        threads: int | None = None, device: str | None = None) -> Path:
    """Train in ``run_dir``; returns the checkpoint path.

    New run: ``config`` is required and is written to ``config.json`` first; the
    folder must not already hold a run.  ``resume=True``: training continues from
    the checkpoint with the saved config, or with ``config`` if one is given (to
    extend a run or change its schedule: same network only; it replaces
    ``config.json`` before any work).  ``init_model`` warm-starts
    a new run from a checkpoint's weights (same architecture).
    ``num_generations`` stops this call early (the run itself stays resumable).
    ``on_generation`` receives each generation's metrics row once it is saved
    (live plots in the notebook).  ``threads`` and ``device`` override the
    config's for this call only (resuming on another machine); they change
    where the work runs, not what is computed, and are not saved.
    """
    run_dir = Path(run_dir)
    if resume:
        saved = load_config(run_dir)
        if config is None:
            config = saved
        elif config != saved:
            if config.net != saved.net:
                raise ConfigError(f"{run_dir} was trained with net {asdict(saved.net)}; a resumed run "
                                  "keeps its network (start a new run with --init-model instead)")
            save_config(config, run_dir)
            log.info("resuming %s with a changed config", run_dir)
    else:
        if config is None:
            raise ConfigError("a new run needs a config (choose a --preset)")
        if (run_dir / "config.json").exists():
            raise ConfigError(f"{run_dir} already holds a run; use --resume {run_dir} or another folder")
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            save_config(config, run_dir)
        except OSError as exc:
            raise ConfigError(f"cannot write to {run_dir}: {exc.strerror}; choose a writable folder") from exc
    assert config is not None
    torch.set_num_threads(threads or config.threads)
    device = resolve_device(device or config.device)
    torch.manual_seed(config.seed)  # the initial weights are part of the run's seed
    net = PolicyValueNet(config.net).to(device)
    optimizer = torch.optim.AdamW(net.parameters(), lr=config.train.lr, weight_decay=config.train.weight_decay)
    generation = 0
    ckpt_path = run_dir / CHECKPOINT
    if resume and ckpt_path.exists():
        loaded, data = load_checkpoint(ckpt_path)
        net.load_state_dict(loaded.state_dict())
        optimizer.load_state_dict(data["optimizer"])
        generation = int(data["generation"])
        log.info("resuming %s at generation %d", run_dir, generation)
    elif init_model is not None:
        load_into(net, init_model)
        log.info("warm start from %s", init_model)
    _trim_metrics(run_dir, generation)
    tb = _tensorboard(run_dir)
    stop = config.num_generations if num_generations is None else min(config.num_generations,
                                                                        generation + num_generations)
    evaluator = TorchEvaluator(net, device)
    while generation < stop:
        t0 = time.perf_counter()
        rng = np.random.default_rng([config.seed, generation])
        torch.manual_seed(config.seed * 1_000_003 + generation)
        with tqdm(total=config.selfplay.num_games, desc=f"gen {generation} self-play", leave=False,
                  disable=not progress) as bar:
            records, stats = workers.play_games(evaluator, config.selfplay.num_games, config.selfplay,
                                                config.mcts, rng, on_game_done=lambda _: bar.update(1))
        t_selfplay = time.perf_counter() - t0
        replay.write_shard(run_dir / "replay", generation, records)
        data = replay.load_window(run_dir / "replay", up_to_generation=generation,
                                  num_generations=config.train.window_at(generation),
                                  max_positions=config.train.replay_max_positions, dedupe=config.train.dedupe,
                                  value_mix=config.train.value_mix)
        lr = config.train.lr_at(generation, config.num_generations)
        for group in optimizer.param_groups:
            group["lr"] = lr
        t1 = time.perf_counter()
        losses = train_steps(net, optimizer, data, config.train.steps_per_generation, config.train.batch_size,
                             rng, device, progress=progress)
        t_train = time.perf_counter() - t1
        row: dict[str, Any] = {
            "generation": generation,
            **asdict(stats),
            **losses,
            "replay_positions": len(data),
            "lr": lr,
            "selfplay_seconds": round(t_selfplay, 2),
            "train_seconds": round(t_train, 2),
            "evals_per_second": round(stats.num_evaluations / max(t_selfplay, 1e-9), 1),
            "device": str(device),
            "threads": torch.get_num_threads(),
        }
        row.update(_evaluate(evaluator, config))
        row["seconds"] = round(time.perf_counter() - t0, 2)
        _append_metrics(run_dir, row)
        generation += 1
        save_checkpoint(ckpt_path, net, optimizer=optimizer.state_dict(), generation=generation,
                        config=json.loads(json.dumps(asdict(config))))
        if tb is not None:
            for key, value in row.items():
                if isinstance(value, (int, float)):
                    tb.add_scalar(key, value, generation)
        log.info("generation %d: %s", generation - 1, {k: row[k] for k in ("policy_loss", "value_loss", "seconds")})
        if on_generation is not None:
            on_generation(row)
    if tb is not None:
        tb.close()
    return ckpt_path


def _evaluate(evaluator: TorchEvaluator, config: RunConfig) -> dict[str, float]:
    """Raw-policy mistake rates on a few Pons positions per set (cheap, every generation)."""
    if config.eval_positions <= 0:
        return {}
    from connectx_az import pons

    return pons.policy_mistake_rates(evaluator, limit=config.eval_positions)


def _tensorboard(run_dir: Path) -> Any:
    """A TensorBoard writer when tensorboard is installed, else None."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter(str(run_dir / "tensorboard"))


def summarize(rows: list[dict[str, Any]], config: dict[str, Any] | None) -> dict[str, Any]:
    """What a run cost and reached, for a model card: from its metrics rows and saved config."""
    last = rows[-1] if rows else {}
    summary: dict[str, Any] = {
        "generations": len(rows),
        "games": sum(r["num_games"] for r in rows),
        "positions": sum(r["num_positions"] for r in rows),
        "network_evaluations": sum(r["num_evaluations"] for r in rows),
        "hours": round(sum(r["seconds"] for r in rows) / 3600, 2),
        "pons_policy_last": {k.removeprefix("pons_policy/"): v for k, v in last.items()
                             if k.startswith("pons_policy/")},
    }
    if config:
        preset = preset_of(config)
        summary["simulations"] = config["mcts"]["num_simulations"]
        summary["command"] = (f"connectx-az train --preset {preset}" if preset
                              else "connectx-az train (custom settings: see config.json)")
    return summary


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / METRICS
    if not path.exists():
        raise ConfigError(f"{path} not found: is {run_dir} a training run directory?")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
