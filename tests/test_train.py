"""Training runs: checkpoints, a run that survives kill -9, resuming and warm starts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from connectx_az.training import config, replay, runs
from connectx_az.training.network import CheckpointError, NetConfig, PolicyValueNet, load_checkpoint

ROOT = Path(__file__).resolve().parents[1]

#: overrides that turn the presets' proven positions off, for tests of those switches from nothing
NO_LABELS = ["train.solved_labels=", "train.solved_per_batch=0", "train.solved_policy=false",
             "train.solved_max_plies=0"]


def test_bad_checkpoints_give_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.pt")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(junk)


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "connectx_az.cli", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


SMOKE = ["--preset", "smoke", "--quiet", "--set", "num_generations=4", "--set", "selfplay.num_games=48",
         "--set", "eval_positions=5"]


def test_training_resumes_after_kill_9_without_losing_or_repeating_a_generation(tmp_path: Path) -> None:
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    proc = subprocess.Popen(_cli("train", str(killed), *SMOKE), env=_env(), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # Kill it in the middle of generation 1: after its self-play shard, before it is finished.
    deadline = time.time() + 120
    while not (killed / "replay" / "gen_000001.npz").exists():
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.time() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = load_checkpoint(killed / "checkpoint.pt")[1]["generation"] if (killed / "checkpoint.pt").exists() else 0
    assert before <= 2
    subprocess.run(_cli("train", "--resume", str(killed), "--quiet"), env=_env(), cwd=ROOT, check=True)
    subprocess.run(_cli("train", str(clean), *SMOKE), env=_env(), cwd=ROOT, check=True)

    rows = [json.loads(line) for line in (killed / "metrics.jsonl").read_text().splitlines()]
    assert [r["generation"] for r in rows] == [0, 1, 2, 3]
    assert load_checkpoint(killed / "checkpoint.pt")[1]["generation"] == 4
    # Seeded per generation: the interrupted run made exactly the games of the clean one.
    for g in range(4):
        with np.load(replay.shard_path(killed / "replay", g)) as a:
            with np.load(replay.shard_path(clean / "replay", g)) as b:
                np.testing.assert_array_equal(a["obs"], b["obs"])
                np.testing.assert_array_equal(a["policy"], b["policy"])
    # Every generation scores its own games before training on them, and from the second on the
    # previous generation's (through one generation's steps) too.
    clean_rows = [json.loads(line) for line in (clean / "metrics.jsonl").read_text().splitlines()]
    assert "seen_value_loss" not in clean_rows[0]
    for row in clean_rows:
        assert all(np.isfinite(row[f"fresh_{k}"]) and row[f"fresh_{k}"] >= 0 for k in ("policy_loss", "value_loss"))
    for row in clean_rows[1:]:
        assert all(np.isfinite(row[f"seen_{k}"]) and row[f"seen_{k}"] >= 0 for k in ("policy_loss", "value_loss"))


def test_held_out_losses_match_the_training_losses_definition() -> None:
    import torch
    import torch.nn.functional as F

    from connectx_az.training import train

    torch.manual_seed(0)
    net = PolicyValueNet(NetConfig(num_blocks=1, num_filters=8, value_hidden=8)).eval()
    rng = np.random.default_rng(0)
    n = 10
    policy = rng.random((n, 7)).astype(np.float32)
    data = replay.ReplayData(rng.integers(0, 2, (n, 2, 6, 7)).astype(np.uint8), policy / policy.sum(1, keepdims=True),
                             rng.uniform(-1, 1, n).astype(np.float32))
    with torch.no_grad():
        logits, value = net(torch.from_numpy(data.obs[:8].astype(np.float32)))
    expected_policy = -(torch.from_numpy(data.policy[:8]) * F.log_softmax(logits, dim=1)).sum(1).mean().item()
    expected_value = F.mse_loss(value, torch.from_numpy(data.value[:8])).item()
    # Scored in chunks of 3, only the first 8 positions.
    got = train.held_out_losses(net, data, torch.device("cpu"), max_positions=8, batch_size=3)
    assert got["policy_loss"] == pytest.approx(expected_policy, rel=1e-5)
    assert got["value_loss"] == pytest.approx(expected_value, rel=1e-5)
    # at self-play's bfloat16 (a run passes its evaluator's precision): the same losses, to bfloat16's precision
    low = train.held_out_losses(net, data, torch.device("cpu"), max_positions=8, batch_size=3, dtype=torch.bfloat16)
    assert low["policy_loss"] == pytest.approx(expected_policy, rel=2e-2)
    assert low["value_loss"] == pytest.approx(expected_value, rel=5e-2)


def test_new_run_refuses_an_existing_run_folder(tmp_path: Path) -> None:
    cfg = config.make_config("smoke", overrides=["num_generations=1", "eval_positions=0"])
    from connectx_az.training import train

    train.run(tmp_path / "run", cfg, progress=False)
    with pytest.raises(config.ConfigError, match="already holds a run"):
        train.run(tmp_path / "run", cfg, progress=False)


def test_new_run_refuses_a_folder_that_holds_anything_but_a_run(tmp_path: Path) -> None:
    from connectx_az.training import train

    cfg = config.make_config("smoke", overrides=["num_generations=1", "eval_positions=0"])
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "notes.txt").write_text("mine\n")
    (tmp_path / "file").write_text("a file, not a folder\n")
    for folder in (tmp_path / "notes", tmp_path / "file"):
        with pytest.raises(config.ConfigError, match=f"^{folder} is not empty and holds no run"):
            train.run(folder, cfg, progress=False)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["file", "notes", "notes.txt"]  # nothing written
    (tmp_path / "empty").mkdir()  # an empty folder is a new run's
    assert train.run(tmp_path / "empty", cfg, progress=False).is_file()


def test_warm_start_needs_the_same_architecture(tmp_path: Path) -> None:
    from connectx_az.training import train
    from connectx_az.training.network import save_checkpoint

    other = tmp_path / "other.pt"
    save_checkpoint(other, PolicyValueNet(NetConfig(num_blocks=2, num_filters=8)))
    cfg = config.make_config("smoke", overrides=["num_generations=1", "eval_positions=0"])
    with pytest.raises(CheckpointError, match="holds a 2x8 p32 v32\\+pool network"):
        train.run(tmp_path / "run", cfg, init_model=other, progress=False)


def test_warm_start_with_wider_heads_keeps_the_tower(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    import torch

    from connectx_az.training import train
    from connectx_az.training.network import save_checkpoint

    cfg = config.make_config("smoke", overrides=["num_generations=1", "eval_positions=0", "selfplay.num_games=2",
                                                 "train.steps_per_generation=0", "net.value_filters=4"])
    narrow = PolicyValueNet(config.make_config("smoke").net)
    save_checkpoint(tmp_path / "narrow.pt", narrow)
    with caplog.at_level(logging.INFO, logger="connectx_az.training"):
        ckpt = train.run(tmp_path / "run", cfg, init_model=tmp_path / "narrow.pt", progress=False)
    assert "new weights for value_conv, value_fc1" in caplog.text
    trained, _ = load_checkpoint(ckpt)
    assert trained.config.value_filters == 4
    assert torch.equal(trained.stem[0].weight, narrow.stem[0].weight)  # no training steps: the tower as loaded


def test_warm_start_into_a_deeper_tower(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    import torch

    from connectx_az.training import train
    from connectx_az.training.network import save_checkpoint

    shallow = PolicyValueNet(config.make_config("smoke").net)
    save_checkpoint(tmp_path / "shallow.pt", shallow)
    deeper = shallow.config.num_blocks + 2
    cfg = config.make_config("smoke", overrides=["num_generations=1", "eval_positions=0", "selfplay.num_games=2",
                                                 "train.steps_per_generation=0", f"net.num_blocks={deeper}"])
    with caplog.at_level(logging.INFO, logger="connectx_az.training"):
        ckpt = train.run(tmp_path / "run", cfg, init_model=tmp_path / "shallow.pt", progress=False)
    assert f"new weights for blocks.{deeper - 2}, blocks.{deeper - 1})" in caplog.text
    trained, _ = load_checkpoint(ckpt)
    assert trained.config.num_blocks == deeper
    assert torch.equal(trained.blocks[0].conv1[0].weight, shallow.blocks[0].conv1[0].weight)
    assert not trained.blocks[-1].conv2[1].weight.detach().any()


def test_resume_with_overrides_extends_a_run_and_keeps_its_network(tmp_path: Path) -> None:
    from connectx_az.training import train

    run_dir = tmp_path / "run"
    cfg = config.make_config("smoke", overrides=["num_generations=1", "eval_positions=0"])
    train.run(run_dir, cfg, progress=False)
    longer = config.override(config.load_config(run_dir), ["num_generations=2", "train.lr_schedule=cosine"])
    train.run(run_dir, longer, resume=True, progress=False)
    assert config.load_config(run_dir) == longer
    rows = runs.read_metrics(run_dir)
    assert [r["generation"] for r in rows] == [0, 1]
    assert rows[1]["lr"] == pytest.approx(longer.train.lr_min)
    wider = config.override(longer, ["num_generations=3", "net.num_filters=32"])
    with pytest.raises(config.ConfigError, match="keeps its network"):
        train.run(run_dir, wider, resume=True, progress=False)
    assert config.load_config(run_dir) == longer


def test_a_run_killed_between_its_metrics_line_and_its_checkpoint_resumes_with_one_line_a_generation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Generation 1 writes its metrics line, then the process dies before its checkpoint: the resumed run redoes
    generation 1 and keeps its new line only (the old one is dropped, not kept beside it)."""
    from connectx_az.training import train

    run_dir = tmp_path / "run"
    cfg = config.make_config("smoke", overrides=["num_generations=3", "eval_positions=0"])
    real_save, saved = train.save_checkpoint, []

    def save_then_die(path, *args, generation: int, **kwargs) -> None:
        if generation == 2:  # generation 1 is done and its line written: die before the checkpoint says so
            raise KeyboardInterrupt
        real_save(path, *args, generation=generation, **kwargs)
        saved.append(generation)

    monkeypatch.setattr(train, "save_checkpoint", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        train.run(run_dir, cfg, progress=False)
    assert saved == [1] and [r["generation"] for r in runs.read_metrics(run_dir)] == [0, 1]
    monkeypatch.setattr(train, "save_checkpoint", real_save)
    ran: list[int] = []
    train.run(run_dir, resume=True, progress=False, on_generation=lambda row: ran.append(row["generation"]))
    assert ran == [1, 2]  # from the checkpoint's generation on: generation 0 is not played again
    rows = runs.read_metrics(run_dir)
    assert [r["generation"] for r in rows] == [0, 1, 2]
    assert load_checkpoint(run_dir / runs.CHECKPOINT)[1]["generation"] == 3


def test_trim_metrics_keeps_the_generations_the_checkpoint_holds(tmp_path: Path) -> None:
    lines = [{"generation": g, "seconds": g} for g in (0, 1, 2, 3)]
    (tmp_path / runs.METRICS).write_text("".join(json.dumps(r) + "\n" for r in lines) + "\n")
    runs.trim_metrics(tmp_path, 2)
    assert runs.read_metrics(tmp_path) == lines[:2]
    runs.trim_metrics(tmp_path, 0)
    assert runs.read_metrics(tmp_path) == []
    runs.trim_metrics(tmp_path / "absent", 3)  # no metrics yet: nothing to do


def test_proven_positions_in_the_batches_pull_the_value_to_their_results() -> None:
    import torch

    from connectx_az.engine import game
    from connectx_az.training import train

    obs = np.stack([game.encode(*game.from_moves(m)) for m in ("44", "4455", "123", "7766")])
    selfplay = replay.ReplayData(obs[:2], np.full((2, 7), 1 / 7, np.float32), np.zeros(2, np.float32))
    proven = replay.ReplayData(obs[2:], np.zeros((2, 7), np.float32), np.ones(2, np.float32))
    values = {}
    for extra in (0, 8):
        torch.manual_seed(0)
        net = PolicyValueNet(NetConfig(num_blocks=1, num_filters=8, value_hidden=8))
        optimizer = torch.optim.AdamW(net.parameters(), lr=1e-2)
        losses = train.train_steps(net, optimizer, selfplay, 60, 8, np.random.default_rng(0), torch.device("cpu"),
                                   progress=False, solved=proven, solved_per_batch=extra)
        assert ("solved_value_loss" in losses) == bool(extra)
        with torch.no_grad():
            values[extra] = net(torch.from_numpy(obs[2:].astype(np.float32)))[1].mean().item()
    assert values[8] > 0.5 and values[8] > values[0] + 0.3, values


def test_best_moves_of_proven_positions_teach_the_policy_where_they_are_given() -> None:
    import torch

    from connectx_az.engine import game
    from connectx_az.training import train

    obs = np.stack([game.encode(*game.from_moves(m)) for m in ("44", "4455", "123", "7766")])
    selfplay = replay.ReplayData(obs[:2], np.full((2, 7), 1 / 7, np.float32), np.zeros(2, np.float32))
    best = np.zeros((2, 7), np.float32)
    best[:, 1] = 1.0  # column 2 is "the" best move of both proven positions (either side)
    best[:, 5] = 1.0  # ... and its mirror image, since batches are mirrored at random
    best /= 2
    probs = {}
    for name, target in (("without", np.zeros((2, 7), np.float32)), ("with", best)):
        torch.manual_seed(0)
        net = PolicyValueNet(NetConfig(num_blocks=1, num_filters=8, value_hidden=8))
        optimizer = torch.optim.AdamW(net.parameters(), lr=1e-2)
        proven = replay.ReplayData(obs[2:], target, np.ones(2, np.float32))
        losses = train.train_steps(net, optimizer, selfplay, 60, 8, np.random.default_rng(0), torch.device("cpu"),
                                   progress=False, solved=proven, solved_per_batch=8)
        assert ("solved_policy_loss" in losses) == (name == "with")
        with torch.no_grad():
            probs[name] = torch.softmax(net(torch.from_numpy(obs[2:].astype(np.float32)))[0], dim=1)[:, [1, 5]]
    assert probs["with"].sum(dim=1).min() > 0.6 and probs["without"].sum(dim=1).max() < 0.45, probs


def test_bfloat16_training_learns_what_float32_training_learns() -> None:
    import torch

    from connectx_az.engine import game
    from connectx_az.training import train

    obs = np.stack([game.encode(*game.from_moves(m)) for m in ("44", "4455", "123", "7766")])
    policy = np.zeros((4, 7), np.float32)
    policy[:, 3] = 1.0  # the middle column: the same after the mirroring of batches
    data = replay.ReplayData(obs, policy, np.array([1, -1, 1, -1], np.float32))
    out = {}
    for dtype in (None, torch.bfloat16):
        torch.manual_seed(0)
        net = PolicyValueNet(NetConfig(num_blocks=1, num_filters=8, value_hidden=8))
        optimizer = torch.optim.AdamW(net.parameters(), lr=1e-2)
        train.train_steps(net, optimizer, data, 80, 8, np.random.default_rng(0), torch.device("cpu"),
                          progress=False, dtype=dtype)
        assert all(p.dtype == torch.float32 for p in net.parameters())  # autocast leaves the weights float32
        with torch.no_grad():
            logits, value = net(torch.from_numpy(obs.astype(np.float32)))
        out[dtype] = torch.softmax(logits, dim=1)[:, 3], value
    for probs, value in out.values():
        assert probs.min() > 0.8 and (value * torch.tensor([1.0, -1.0, 1.0, -1.0])).min() > 0.5, (probs, value)
    assert (out[None][0] - out[torch.bfloat16][0]).abs().max() < 0.1


def test_the_any_target_scores_the_probability_on_the_best_moves_together() -> None:
    import torch

    from connectx_az.training import train

    probs = torch.tensor([[0.1, 0.6, 0.1, 0.05, 0.05, 0.05, 0.05], [0.1, 0.6, 0.1, 0.05, 0.05, 0.05, 0.05]])
    logits = probs.log().requires_grad_()
    log_probs = torch.log_softmax(logits, dim=1)
    target = torch.zeros(2, 7)
    target[0, [1, 2]] = 0.5  # two best moves; the second row has none (a lost position)
    terms = train.proven_policy_terms(log_probs, target)
    assert terms[0].item() == pytest.approx(-np.log(0.7), rel=1e-5) and terms[1].item() == 0.0
    terms.sum().backward()
    assert torch.isfinite(logits.grad).all() and logits.grad[1].abs().max() == 0.0
    # a policy sharp on one best move pays nothing, where an even share of them (the cross-entropy) would
    sharp = torch.log_softmax(torch.tensor([[0.0, 9.0, 0.0, 0.0, 0.0, 0.0, 0.0]]), dim=1)
    assert train.proven_policy_terms(sharp, target[:1]).item() < 1e-3
    assert -(target[:1] * sharp).sum().item() > 4.0


def test_the_any_target_teaches_one_of_the_best_moves_in_training() -> None:
    import torch

    from connectx_az.engine import game
    from connectx_az.training import train

    obs = np.stack([game.encode(*game.from_moves(m)) for m in ("44", "4455", "123", "7766")])
    selfplay = replay.ReplayData(obs[:2], np.full((2, 7), 1 / 7, np.float32), np.zeros(2, np.float32))
    best = np.zeros((2, 7), np.float32)
    best[:, [1, 2, 4, 5]] = 1 / 4  # columns 2 and 3 and their mirror images (batches are mirrored at random)
    torch.manual_seed(0)
    net = PolicyValueNet(NetConfig(num_blocks=1, num_filters=8, value_hidden=8))
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-2)
    proven = replay.ReplayData(obs[2:], best, np.ones(2, np.float32))
    losses = train.train_steps(net, optimizer, selfplay, 60, 8, np.random.default_rng(0), torch.device("cpu"),
                               progress=False, solved=proven, solved_per_batch=8)
    with torch.no_grad():
        p = torch.softmax(net(torch.from_numpy(obs[2:].astype(np.float32)))[0], dim=1)
    assert p[:, [1, 2, 4, 5]].sum(dim=1).min() > 0.8, p
    assert losses["solved_policy_loss"] < 0.5, losses  # the uniform target's floor is log 4 = 1.39


def test_solved_policy_needs_best_moves(tmp_path: Path) -> None:
    from connectx_az.engine import solver
    from connectx_az.tools import labeller
    from connectx_az.training import labels as label_files
    from connectx_az.training import train

    with pytest.raises(ValueError, match="solved_policy needs"):
        config.make_config("smoke", overrides=[*NO_LABELS, "train.solved_policy=true"])
    labels, _ = labeller.label(num_positions=3, min_plies=14, max_plies=16, prover=solver.Solver())
    label_files.save(tmp_path / "plain.npz", labels)
    assert not train.solved_data(tmp_path / "plain.npz").policy.any()
    with pytest.raises(label_files.LabelsError, match="no best moves.*--moves"):
        train.solved_data(tmp_path / "plain.npz", policy=True)
    labels, _ = labeller.label(num_positions=3, min_plies=14, max_plies=16, prover=solver.Solver(), moves=True)
    label_files.save(tmp_path / "moves.npz", labels)
    data = train.solved_data(tmp_path / "moves.npz", policy=True)
    assert np.array_equal(data.policy, labels.policy()) and data.policy.any()


def test_solved_max_plies_keeps_the_openings_only(tmp_path: Path) -> None:
    from connectx_az.engine import solver
    from connectx_az.tools import labeller
    from connectx_az.training import labels as label_files
    from connectx_az.training import train

    short, _ = labeller.label(num_positions=3, min_plies=14, max_plies=14, prover=solver.Solver(), seed=1)
    long, _ = labeller.label(num_positions=4, min_plies=17, max_plies=17, prover=solver.Solver(), seed=2)
    label_files.save(tmp_path / "both.npz", label_files.concat(short, long))
    assert len(train.solved_data(tmp_path / "both.npz")) == 7
    kept = train.solved_data(tmp_path / "both.npz", max_plies=14)
    assert len(kept) == 3 and np.array_equal(kept.obs, short.obs()) and np.array_equal(kept.value, short.result)
    with pytest.raises(label_files.LabelsError, match="no positions of at most 12 plies"):
        train.solved_data(tmp_path / "both.npz", max_plies=12)
    with pytest.raises(ValueError, match="solved_max_plies"):
        config.make_config("smoke", overrides=[*NO_LABELS, "train.solved_max_plies=14"])
    with pytest.raises(ValueError, match="solved_max_plies"):
        config.make_config("smoke", overrides=[*NO_LABELS, "train.solved_max_plies=-1"])


def test_solved_labels_are_checked_before_a_run_starts(tmp_path: Path) -> None:
    from connectx_az.training import train

    with pytest.raises(ValueError, match="only with train.solved_labels"):
        config.make_config("smoke", overrides=[*NO_LABELS, "train.solved_per_batch=8"])
    cfg = config.make_config("smoke", overrides=[*NO_LABELS, "num_generations=1", "eval_positions=0",
                                                 "train.solved_per_batch=8",
                                                 f"train.solved_labels={tmp_path / 'none.npz'}"])
    with pytest.raises(config.ConfigError, match="train.solved_labels: .*does not exist"):
        train.run(tmp_path / "run", cfg, progress=False)
    assert not (tmp_path / "run").exists()  # refused before the run folder is written


def test_a_run_trains_on_a_labels_file(tmp_path: Path) -> None:
    from connectx_az.engine import solver
    from connectx_az.tools import labeller
    from connectx_az.training import labels as label_files
    from connectx_az.training import train

    labels, _ = labeller.label(num_positions=4, min_plies=14, max_plies=16, prover=solver.Solver())
    label_files.save(tmp_path / "labels.npz", labels)
    cfg = config.make_config("smoke", overrides=[*NO_LABELS, "num_generations=1", "eval_positions=0",
                                                 "train.solved_per_batch=4",
                                                 f"train.solved_labels={tmp_path / 'labels.npz'}"])
    train.run(tmp_path / "run", cfg, progress=False)
    row = runs.read_metrics(tmp_path / "run")[-1]
    assert row["solved_value_loss"] >= 0 and row["value_loss"] >= 0


def test_the_loss_panels_draw_the_proven_positions_losses_where_a_run_has_them() -> None:
    pytest.importorskip("matplotlib")
    from connectx_az.training import plots

    rows = [{"generation": g, "value_loss": 0.1, "fresh_value_loss": 0.12, "solved_value_loss": 0.4 - g / 100,
             "policy_loss": 1.0, "solved_policy_loss": 0.9 - g / 100} for g in range(3)]

    def panel(rows: list[dict], title: str) -> list[str]:
        ax = next(ax for ax in plots.figure(rows).axes if ax.get_title() == title)
        return [line.get_label() for line in ax.lines]

    assert panel(rows, "value loss") == ["value_loss", "fresh_value_loss", "solved_value_loss"]
    assert panel(rows, "policy loss") == ["policy_loss", "solved_policy_loss"]
    plain = [{k: r[k] for k in ("generation", "value_loss", "policy_loss")} for r in rows]
    assert panel(plain, "value loss") == ["value_loss"]
    assert panel(plain, "policy loss") == ["policy_loss"]


def test_keep_every_keeps_every_nth_checkpoint_and_the_last(tmp_path: Path) -> None:
    from connectx_az.training import train

    cfg = config.make_config("smoke", overrides=["num_generations=3", "eval_positions=0", "selfplay.num_games=2"])
    train.run(tmp_path / "run", cfg, progress=False, keep_every=2)
    kept = sorted(p.name for p in (tmp_path / "run" / runs.SNAPSHOTS).iterdir())
    assert kept == ["gen_0002.pt", "gen_0003.pt"]  # the 2nd, and the run's last
    _, data = load_checkpoint(runs.snapshot_path(tmp_path / "run", 2))
    assert data["generation"] == 2
    # resumed without being told again, the run goes on keeping them; told 0, it stops
    longer = config.override(cfg, ["num_generations=6"])
    train.run(tmp_path / "run", longer, resume=True, progress=False, num_generations=1)
    train.run(tmp_path / "run", resume=True, progress=False, num_generations=1)
    kept = sorted(p.name for p in (tmp_path / "run" / runs.SNAPSHOTS).iterdir())
    assert kept == ["gen_0002.pt", "gen_0003.pt", "gen_0004.pt"]
    train.run(tmp_path / "run", resume=True, progress=False, keep_every=0)
    assert sorted(p.name for p in (tmp_path / "run" / runs.SNAPSHOTS).iterdir()) == kept
    with pytest.raises(config.ConfigError, match="positive number"):
        train.run(tmp_path / "other", cfg, progress=False, keep_every=-1)
    assert not (tmp_path / "other").exists()


def test_fork_previous_forks_the_first_wave_from_the_last_generations_positions(tmp_path: Path) -> None:
    from connectx_az.engine import game
    from connectx_az.training import train

    one_wave = [*NO_LABELS, "num_generations=2", "eval_positions=0", "selfplay.num_games=12",
                "selfplay.num_parallel_games=12", "selfplay.fork_share=0.5", "train.steps_per_generation=1"]
    for name, switch in (("plain", "false"), ("forks", "true")):
        cfg = config.make_config("smoke", overrides=[*one_wave, f"selfplay.fork_previous={switch}"])
        train.run(tmp_path / name, cfg, progress=False)
    rows = {name: [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
            for name in ("plain", "forks")}
    assert [row["fork_rate"] for row in rows["plain"]] == [0.0, 0.0]  # a first wave has nothing to fork from
    assert rows["forks"][0]["fork_rate"] == 0.0 and rows["forks"][1]["fork_rate"] > 0
    with np.load(replay.shard_path(tmp_path / "forks" / "replay", 0)) as shard:
        obs = shard["obs"]
    sources = replay.shard_positions(tmp_path / "forks" / "replay", 0)
    assert sources == [game.decode(o) for o in obs] and len(sources) > 0
    assert replay.shard_positions(tmp_path / "forks" / "replay", 5) == []
    assert replay.shard_positions(tmp_path / "forks" / "replay", -1) == []


def test_a_grown_network_answers_as_the_one_it_grew_from() -> None:
    from dataclasses import replace

    import torch

    from connectx_az.training.network import grow

    torch.manual_seed(0)
    small = PolicyValueNet(NetConfig(num_blocks=1, num_filters=16, value_hidden=16))
    for module in small.modules():
        if isinstance(module, torch.nn.BatchNorm2d):  # trained statistics, which the grown network must keep
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
    big = PolicyValueNet(replace(small.config, num_blocks=3))
    assert grow(small, big) == ["blocks.1", "blocks.2"]
    obs = torch.from_numpy(np.random.default_rng(0).integers(0, 2, (8, 2, 6, 7)).astype(np.float32))
    with torch.no_grad():
        for ours, theirs in zip(small.eval()(obs), big.eval()(obs), strict=True):
            torch.testing.assert_close(ours, theirs)
