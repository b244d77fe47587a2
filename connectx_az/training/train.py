"""The generation loop: self-play, store, train, checkpoint, evaluate.  Resumable.

Generation ``g`` writes its shard, then its metrics line, then the checkpoint saying "next is ``g + 1``",
each atomically; a killed run resumes at the checkpoint and redoes the unfinished generation (metrics
trimmed), so none is lost or counted twice; a generation whose shard is on disk with its note (``replay.write_note``)
trains on those games instead of playing them again.  Randomness is seeded from ``(seed, generation)``: a resumed run
on CPU makes the same games.  A timed run (``RunConfig.total_time``) follows the share of its time spent
(``run_seconds``, across resumes) and ends before a generation that would not fit, judged by the last one."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from connectx_az import files
from connectx_az.training import devices, replay, runs, sizing, workers
from connectx_az.training.config import ConfigError, RunConfig
from connectx_az.training.network import (
    PolicyValueNet,
    TorchEvaluator,
    fastest_precision,
    load_checkpoint,
    place,
    save_checkpoint,
    train_autocast_dtype,
)
from connectx_az.training.selfplay import SelfPlayStats
from connectx_az.training.sizing import format_hours, train_command

log = logging.getLogger(__name__)


def _loss_terms(net: PolicyValueNet, obs: torch.Tensor, target_policy: torch.Tensor,
                target_value: torch.Tensor, dtype: torch.dtype | None = None
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per position: policy cross-entropy, squared value error and the log-probabilities; the forward pass
    under autocast at ``dtype`` (None: float32), the losses in float32."""
    with torch.autocast(obs.device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
        logits, value = net(obs)
    log_probs = F.log_softmax(logits.float(), dim=1)
    return -(target_policy * log_probs).sum(dim=1), (value.float() - target_value) ** 2, log_probs


def train_steps(net: PolicyValueNet, optimizer: torch.optim.Optimizer, data: replay.ReplayData,
                num_steps: int, batch_size: int, rng: np.random.Generator, device: torch.device,
                *, progress: bool = True, solved: replay.ReplayData | None = None,
                solved_per_batch: int = 0,
                dtype: torch.dtype | None = None) -> dict[str, float]:
    """``num_steps`` of AdamW on policy cross-entropy + value MSE; returns mean losses.

    ``dtype``: the forward pass's autocast (``network.train_autocast_dtype``).  With ``solved``, each batch
    gains ``solved_per_batch`` proven rows: in the value loss, and in the policy loss where they carry a
    target (``proven_policy_terms``); ``solved_value_loss`` and ``solved_policy_loss`` are their own means."""
    net.train()
    extra = solved_per_batch if solved is not None and len(solved) else 0
    sums = {"policy_loss": 0.0, "value_loss": 0.0, "policy_entropy": 0.0}
    policy_rows = bool(extra) and bool(solved is not None and solved.policy.any())
    if extra:
        sums["solved_value_loss"] = 0.0
    if policy_rows:
        sums["solved_policy_loss"] = 0.0
    for _ in tqdm(range(num_steps), desc="train", leave=False, disable=not progress):
        batch = data.sample(batch_size, rng)
        if extra:
            assert solved is not None
            more = solved.sample(extra, rng)
            batch = replay.Batch(*(np.concatenate([a, b]) for a, b in
                                   ((batch.obs, more.obs), (batch.policy, more.policy), (batch.value, more.value))))
        obs = torch.from_numpy(batch.obs).to(device)
        target_policy = torch.from_numpy(batch.policy).to(device)
        target_value = torch.from_numpy(batch.value).to(device)
        policy_terms, value_terms, log_probs = _loss_terms(net, obs, target_policy, target_value, dtype)
        if extra:
            policy_terms = torch.cat([policy_terms[:batch_size],
                                      proven_policy_terms(log_probs[batch_size:], target_policy[batch_size:])])
        targets = int((batch.policy[batch_size:].sum(axis=1) > 0).sum()) if extra else 0
        policy_loss = policy_terms.sum() / (batch_size + targets)  # a row without a target adds 0
        value_loss = value_terms.mean()
        optimizer.zero_grad(set_to_none=True)
        (policy_loss + value_loss).backward()
        optimizer.step()
        sums["policy_loss"] += policy_terms[:batch_size].mean().item()
        sums["value_loss"] += value_terms[:batch_size].mean().item()
        sums["policy_entropy"] += -(log_probs[:batch_size].exp() * log_probs[:batch_size]).sum(dim=1).mean().item()
        if extra:
            sums["solved_value_loss"] += value_terms[batch_size:].mean().item()
            if policy_rows and targets:
                sums["solved_policy_loss"] += policy_terms[batch_size:].sum().item() / targets
    net.eval()
    return {k: v / max(num_steps, 1) for k, v in sums.items()}


def proven_policy_terms(log_probs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per proven row, ``-log`` of the probability on its best moves together (``target > 0``); 0 for a row
    without best moves (docs/ablations.md, ablation 13)."""
    best = target > 0
    # a finite fill, not -inf: a row without best moves must give a finite 0 and a zero gradient
    on_best = torch.logsumexp(log_probs.masked_fill(~best, -1e4), dim=1)
    return torch.where(best.any(dim=1), -on_best, torch.zeros_like(on_best))


def solved_data(path: str | Path, *, policy: bool = False, max_plies: int = 0) -> replay.ReplayData:
    """A labels file as training rows: the proven result as value target, with ``policy`` the best moves as
    policy target (else all zero); ``max_plies`` > 0 keeps the positions of at most that many plies."""
    from connectx_az.training import labels as solved

    labels = solved.load(path)
    if max_plies > 0:
        labels = labels.take(labels.plies <= max_plies)
    if not len(labels):
        within = f" of at most {max_plies} plies" if max_plies > 0 else ""
        raise solved.LabelsError(f"{path} holds no positions{within}; label some with `connectx-az label {path}`")
    if policy and not labels.has_moves().any():
        raise solved.LabelsError(f"{path} holds no best moves; prove them with `connectx-az label {path} --moves`")
    targets = labels.policy() if policy else np.zeros((len(labels), 7), np.float32)
    return replay.ReplayData(obs=labels.obs(), policy=targets, value=labels.result.astype(np.float32))


#: positions per shard that ``held_out_losses`` scores (a forward pass each, no training)
HELD_OUT_POSITIONS = 8192


@torch.no_grad()
def held_out_losses(net: PolicyValueNet, data: replay.ReplayData, device: torch.device, *,
                    max_positions: int = HELD_OUT_POSITIONS, batch_size: int = 1024,
                    dtype: torch.dtype | None = None) -> dict[str, float]:
    """Policy cross-entropy and value MSE of ``net`` (eval mode) on ``data``'s first positions, the forward pass
    under autocast at ``dtype`` (None: float32).  Scored on the new generation (``fresh_*``) and the previous one
    (``seen_*``) before training: their gap is what the network memorises of its games."""
    net.eval()
    n = min(len(data), max_positions)
    policy_sum = value_sum = 0.0
    for start in range(0, n, batch_size):
        end = min(start + batch_size, n)
        policy_terms, value_terms, _ = _loss_terms(
            net, torch.from_numpy(data.obs[start:end].astype(np.float32)).to(device),
            torch.from_numpy(data.policy[start:end]).to(device), torch.from_numpy(data.value[start:end]).to(device),
            dtype)
        policy_sum += policy_terms.sum().item()
        value_sum += value_terms.sum().item()
    return {"policy_loss": policy_sum / max(n, 1), "value_loss": value_sum / max(n, 1)}


def _held_out_row(net: PolicyValueNet, run_dir: Path, generation: int, config: RunConfig,
                  device: torch.device, dtype: torch.dtype | None = None) -> dict[str, float]:
    """``fresh_*`` and ``seen_*`` losses (``held_out_losses``, at ``dtype``) of this generation, before its
    steps."""
    row: dict[str, float] = {}
    shards = replay.list_shards(run_dir / "replay")
    for prefix, g in (("fresh", generation), ("seen", generation - 1)):
        if g not in shards:  # the first generation of a run has no previous one
            continue
        data = replay.load_window(run_dir / "replay", up_to_generation=g, num_generations=1,
                                  max_positions=HELD_OUT_POSITIONS, dedupe=False, value_mix=config.train.value_mix)
        if len(data):
            row.update({f"{prefix}_{k}": round(v, 5)
                        for k, v in held_out_losses(net, data, device, dtype=dtype).items()})
    return row


def run(run_dir: str | Path, config: RunConfig | None = None, *, resume: bool = False,
        init_model: str | Path | None = None, num_generations: int | None = None,
        progress: bool = True, on_generation: Callable[[dict[str, Any]], None] | None = None,
        threads: int | None = None, device: str | None = None, time_budget: float | None = None,
        keep_every: int | None = None, workers: int | None = None,
        clock: Callable[[], float] = time.monotonic) -> Path:
    """Train in ``run_dir``; returns the checkpoint path.

    A new run needs ``config`` and an empty folder (``runs.run_config``); ``resume=True`` goes on with the saved
    config, or with ``config`` for the same network.  ``init_model`` warm-starts a new run
    (``network.load_into``).  ``num_generations`` stops this call early; ``on_generation`` gets each saved
    metrics row.  ``threads``, ``device`` and ``workers`` (self-play worker processes) apply to this call only
    (not saved).  ``time_budget`` (seconds,
    by ``clock``) stops before a generation that would end after it.  ``keep_every`` N > 0 also keeps
    ``runs.snapshot_path`` after every N-th generation and the last; None keeps the run's own setting, 0 stops."""
    if time_budget is not None and not time_budget > 0:
        raise ConfigError(f"time budget {time_budget!r} must be a positive number of seconds")
    if keep_every is not None and keep_every < 0:
        raise ConfigError(f"keep every {keep_every} generations: give a positive number (0 keeps none)")
    run_dir = Path(run_dir)
    config, changed = runs.run_config(run_dir, config, resume=resume)
    # before anything is written, so a device torch cannot use leaves the run folder untouched
    device = devices.resolve_device(device or config.device)
    solved = None
    if config.train.solved_per_batch > 0:
        try:
            solved = solved_data(config.train.solved_labels, policy=config.train.solved_policy,
                                 max_plies=config.train.solved_max_plies)
        except ValueError as exc:  # solved.LabelsError: a missing or malformed file, one line
            raise ConfigError(f"train.solved_labels: {exc}") from exc
        log.info("%d proven positions from %s, %d a batch", len(solved), config.train.solved_labels,
                 config.train.solved_per_batch)
    if resume and changed and not config.total_time and config.num_generations < runs.check_run(run_dir):
        raise ConfigError(f"{run_dir} has done {runs.check_run(run_dir)} generations already; num_generations="
                          f"{config.num_generations} would end it before them (--generations N stops one call early)")
    runs.write_config(run_dir, config, resume=resume, changed=changed)
    played = config if workers is None else replace(config, selfplay=replace(config.selfplay, num_workers=workers))
    torch.set_num_threads(threads or config.threads)
    torch.manual_seed(config.seed)  # the initial weights are part of the run's seed
    ckpt_path = run_dir / runs.CHECKPOINT
    net = place(PolicyValueNet(config.net), device)  # before the optimizer: its state takes the weights' layout
    optimizer = torch.optim.AdamW(net.parameters(), lr=config.train.lr, weight_decay=config.train.weight_decay)
    generation, saved_keep_every = runs.restore(run_dir, net, optimizer, resume=resume, init_model=init_model)
    keep_every = saved_keep_every if keep_every is None else keep_every
    tb = _tensorboard(run_dir)
    timed = config.total_time > 0
    last = None if timed else config.num_generations  # a timed run ends when its time is spent
    limits = [n for n in (last, None if num_generations is None else generation + num_generations) if n is not None]
    stop = min(limits) if limits else None
    precision = config.precision
    if precision == "auto" and device.type == "cuda":  # a GPU's: the faster on this network at self-play's batch
        precision = fastest_precision(net, device, inference_batch(played))
        log.info("inference precision on %s: %s, the faster at a batch of %d", device, precision,
                 inference_batch(played))
    evaluator = TorchEvaluator(net, device, precision)
    done = runs.rows_before(run_dir, generation)  # the generations so far: each one's share and time
    if time_budget is not None and not done and (stop is None or generation < stop):
        log.warning("time budget %s: the first generation runs whatever the budget, since how long one takes is not "
                    "known before it ends", runs.format_duration(time_budget))
    started = clock()  # the budget is for the generations: the set-up above (imports, a first CUDA call) is free
    while stop is None or generation < stop:
        spent, scale, expected = runs.forecast(done, config.total_time)  # as ``runs.is_complete`` judges
        if timed and spent + expected > config.total_time:
            log.info("the run's total time is spent: %d generations in %s of %s (the next would take about %s)",
                     generation, runs.format_duration(spent), runs.format_duration(config.total_time),
                     runs.format_duration(expected))
            if keep_every and not runs.snapshot_path(run_dir, generation).exists():
                files.atomic_write_bytes(runs.snapshot_path(run_dir, generation), ckpt_path.read_bytes())
            break
        if time_budget is not None and (used := clock() - started) + expected > time_budget:
            of = "" if timed else f" of {config.num_generations}"
            log.warning("time budget: stopped before generation %d%s (%s of %s used, a generation takes about "
                        "%s); the run is saved, %s",
                        generation, of, runs.format_duration(used),
                        runs.format_duration(time_budget), runs.format_duration(expected), runs.resume_hint(run_dir))
            break
        fraction = (spent + expected) / config.total_time if timed else None
        if fraction is not None and scale < 1.0 and spent + 2 * expected > config.total_time:
            fraction = 1.0  # a shrunk run's last generation (no other fits after it) trains at the final rate
        begun = clock()
        row = _generation(run_dir, generation, sizing.scaled(played, scale), net, optimizer, evaluator, device,
                          solved, progress, fraction=fraction)
        # a generation whose self-play an earlier session played took that time too
        seconds = clock() - begun + (row["selfplay_seconds"] if row.get("selfplay_kept") else 0.0)
        row["run_seconds"] = round(spent + seconds, 2)  # the run's clock: its generations' time, over its sessions
        if scale < 1.0:
            row["scale"] = round(scale, 6)  # the share of its games and steps it played (``sizing.next_scale``)
        done.append(row)
        if timed and generation == 0:
            spent = row["run_seconds"]
            row["expected_generations"] = timed_generations(config.total_time, spent)
            log.info("about %d generations in the total time of %s, at %s a generation", row["expected_generations"],
                     runs.format_duration(config.total_time), runs.format_duration(spent))
            if row["expected_generations"] > expected_generations(config.total_time, spent):
                log.warning("the first generation took %s of the run's %s: the later ones play %.0f%% of its games "
                            "and steps, so that about %d fit and the learning rate anneals",
                            runs.format_duration(spent), runs.format_duration(config.total_time),
                            100 * sizing.deadline_scale(config.total_time, spent), row["expected_generations"])
        runs.append_metrics(run_dir, row)
        generation += 1
        save_checkpoint(ckpt_path, net, optimizer=optimizer.state_dict(), generation=generation,
                        config=json.loads(json.dumps(asdict(config))), keep_every=keep_every)
        if keep_every and (generation % keep_every == 0 or generation == last):
            files.atomic_write_bytes(runs.snapshot_path(run_dir, generation), ckpt_path.read_bytes())
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


def _generation(run_dir: Path, generation: int, config: RunConfig, net: PolicyValueNet,
                optimizer: torch.optim.Optimizer, evaluator: TorchEvaluator, device: torch.device,
                solved: replay.ReplayData | None, progress: bool, *, fraction: float | None = None) -> dict[str, Any]:
    """One generation: self-play, its shard, training and the Pons grade; returns its metrics row.  ``fraction``:
    the share of a timed run spent when it ends, which sets the learning rate (None: untimed)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng([config.seed, generation])
    torch.manual_seed(config.seed * 1_000_003 + generation)
    kept = kept_selfplay(run_dir, generation, config)
    if kept is None:
        with tqdm(total=config.selfplay.num_games, desc=f"gen {generation} self-play", leave=False,
                  disable=not progress) as bar:
            threads = torch.get_num_threads()  # the run's, which training uses
            torch.set_num_threads(workers.inference_threads(threads, workers.resolve_num_workers(
                config.selfplay.num_workers)))
            try:
                records, stats = workers.play_games(
                    evaluator, config.selfplay.num_games, config.selfplay, config.mcts, rng,
                    on_game_done=lambda _: bar.update(1), sources=replay.shard_positions(
                        run_dir / "replay", generation - 1) if config.selfplay.fork_previous else ())
            finally:
                torch.set_num_threads(threads)
        t_selfplay = time.perf_counter() - t0
        replay.write_shard(run_dir / "replay", generation, records)
        # the games are kept: a run stopped from here on trains on them when resumed, from the same random state
        replay.write_note(run_dir / "replay", generation, {"stats": asdict(stats), "rng": rng.bit_generator.state,
                                                           "selfplay_seconds": t_selfplay})
        before = 0.0
    else:
        log.info("generation %d: its self-play, kept on disk, is not played again", generation)
        stats, rng.bit_generator.state, t_selfplay = kept
        before = t_selfplay  # spent in the session that played them
    data = replay.load_window(run_dir / "replay", up_to_generation=generation,
                              num_generations=config.train.window_at(generation),
                              max_positions=config.train.replay_max_positions, dedupe=config.train.dedupe,
                              value_mix=config.train.value_mix)
    # at self-play's precision: on a CPU with bfloat16, the same losses to 4 decimals in a third of the time
    held_out = _held_out_row(net, run_dir, generation, config, device, evaluator.dtype)
    lr = config.train.lr_at(generation, config.num_generations) if fraction is None \
        else config.train.lr_at_fraction(fraction)
    for group in optimizer.param_groups:
        group["lr"] = lr
    t1 = time.perf_counter()
    losses = train_steps(net, optimizer, data, config.train.steps_per_generation, config.train.batch_size,
                         rng, device, progress=progress, solved=solved,
                         solved_per_batch=config.train.solved_per_batch,
                         dtype=train_autocast_dtype(device, config.train.precision))
    t_train = time.perf_counter() - t1
    row: dict[str, Any] = {"generation": generation, **asdict(stats), **losses, **held_out,
                           "replay_positions": len(data), "lr": lr, "selfplay_seconds": round(t_selfplay, 2),
                           "train_seconds": round(t_train, 2),
                           "evals_per_second": round(stats.num_evaluations / max(t_selfplay, 1e-9), 1),
                           "device": str(device), "precision": str(evaluator.dtype or "float32").removeprefix("torch."),
                           "threads": torch.get_num_threads()}
    row.update(_evaluate(evaluator, config))
    row["seconds"] = round(time.perf_counter() - t0 + before, 2)
    if kept is not None:
        row["selfplay_kept"] = True
    return row


def kept_selfplay(run_dir: Path, generation: int, config: RunConfig) -> tuple[SelfPlayStats, dict, float] | None:
    """``(stats, rng state, seconds)`` of ``generation``'s self-play where a stopped session left its games on disk
    (``replay.write_note``) for this config's number of games, else None."""
    note = replay.read_note(run_dir / "replay", generation)
    if note is None:
        return None
    try:
        stats = SelfPlayStats(**note["stats"])
        if stats.num_games != config.selfplay.num_games:
            return None
        return stats, dict(note["rng"]), float(note["selfplay_seconds"])
    except (KeyError, TypeError, ValueError):  # a note of another version: play again
        return None


def inference_batch(config: RunConfig) -> int:
    """The batch self-play sends the network: one worker group's games in flight (``workers``), or this process's."""
    num_workers = workers.resolve_num_workers(config.selfplay.num_workers)
    return config.selfplay.num_parallel_games * max(1, (num_workers + 1) // 2)


def expected_generations(total_time: float, generation_seconds: float) -> int:
    """How many generations of ``generation_seconds`` a run of ``total_time`` seconds makes (at least one)."""
    return max(1, int(total_time // max(generation_seconds, 1e-9)))


def timed_generations(total_time: float, first_seconds: float) -> int:
    """How many generations a timed run whose first took ``first_seconds`` expects: ``expected_generations``, or
    with later ones smaller (``sizing.deadline_scale``) the first and those that fit in the time left."""
    scale = sizing.deadline_scale(total_time, first_seconds)
    if scale >= 1.0:
        return expected_generations(total_time, first_seconds)
    return 1 + (int((total_time - first_seconds) / (first_seconds * scale) + 1e-9) if scale > 0 else 0)


def _evaluate(evaluator: TorchEvaluator, config: RunConfig) -> dict[str, float]:
    """Raw-policy mistake rates on a few Pons positions per set (cheap, every generation)."""
    if config.eval_positions <= 0:
        return {}
    from connectx_az.testsets import pons

    return pons.policy_mistake_rates(evaluator, limit=config.eval_positions)


def _tensorboard(run_dir: Path) -> Any:
    """A TensorBoard writer when tensorboard is installed, else None."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter(str(run_dir / "tensorboard"))


def warm_start_config(config: RunConfig, init_model: str | Path) -> RunConfig:
    """``config`` with the network of checkpoint ``init_model``, for a warm start whose network nobody chose."""
    net = load_checkpoint(init_model)[0].config
    return config if net == config.net else replace(config, net=net)


def summarize(rows: list[dict[str, Any]], config: dict[str, Any] | None) -> dict[str, Any]:
    """What a run cost and reached, for a model card: from its metrics rows and saved config."""
    last = rows[-1] if rows else {}
    summary: dict[str, Any] = {
        "generations": len(rows),
        "games": sum(r["num_games"] for r in rows),
        "positions": sum(r["num_positions"] for r in rows),
        # the network's own work: the positions the searches asked for less those the cache answered
        "network_evaluations": sum(r.get("num_network_evaluations", r["num_evaluations"]) for r in rows),
        "hours": round(sum(r["seconds"] for r in rows) / 3600, 2),
        "pons_policy_last": {k.removeprefix("pons_policy/"): v for k, v in last.items()
                             if k.startswith("pons_policy/")},
    }
    if config:
        summary["simulations"] = config["mcts"]["num_simulations"]
        summary["command"] = train_command(config)
        if config.get("total_time"):
            summary["total_time"] = format_hours(config["total_time"])
    return summary
