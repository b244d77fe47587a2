"""Run settings: presets, overrides, schedules, and saved configs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from connectx_az.testsets import pons
from connectx_az.training import config, sizing
from connectx_az.training import labels as label_files


def test_overrides_and_unknown_keys() -> None:
    cfg = config.make_config("smoke", overrides=["mcts.num_simulations=40", "train.lr=0.01", "train.dedupe=false"])
    assert cfg.mcts.num_simulations == 40 and cfg.train.lr == 0.01 and cfg.train.dedupe is False
    with pytest.raises(config.ConfigError, match="valid keys: .*mcts.num_simulations"):
        config.make_config("smoke", overrides=["mcts.simulations=40"])
    with pytest.raises(config.ConfigError, match="choose one of: smoke, cpu, gpu"):
        config.make_config("huge")
    with pytest.raises(config.ConfigError, match="^setting mcts.num_simulations: expected an integer, got 'lots'$"):
        config.make_config("smoke", overrides=["mcts.num_simulations=lots"])
    with pytest.raises(config.ConfigError, match="^setting train.lr: expected a number, got '1e'$"):
        config.make_config("smoke", overrides=["train.lr=1e"])
    with pytest.raises(config.ConfigError, match="^setting train.dedupe: expected true or false, got 'maybe'$"):
        config.make_config("smoke", overrides=["train.dedupe=maybe"])


@pytest.mark.parametrize(("key", "listed", "meant"), [
    ("mcts.sims", "valid keys: mcts.{num_simulations, c_puct, ", None),
    ("net.blocks", "valid keys: net.{num_blocks, num_filters, ", "net.num_blocks"),
    ("selfplay.games", "fork_share, fork_previous, num_workers, cache_positions}",
     "selfplay.num_games"),
    ("num_generation", "valid keys: net.*, mcts.*, selfplay.*, train.*, num_generations, seed, ", "num_generations"),
    ("foo.bar", "valid keys: net.*, mcts.*, selfplay.*, train.*, num_generations, seed, ", None),
])
def test_an_unknown_key_lists_the_keys_of_its_section_in_one_short_line(key: str, listed: str,
                                                                        meant: str | None) -> None:
    # in an override, and in a config file (where an unknown section is the unknown key: 'foo' of foo.bar)
    for make, named in ((lambda: config.make_config("smoke", overrides=[f"{key}=1"]), key),
                        (lambda: config.from_dict({**config.to_dict(config.RunConfig()), **_nested(key, 1)}),
                         "foo" if key == "foo.bar" else key)):
        with pytest.raises(config.ConfigError) as caught:
            make()
        message = str(caught.value)
        assert message.startswith(f"unknown config key {named!r}; ") and listed in message, message
        assert (f"; did you mean {meant}?" in message) if meant else "did you mean" not in message, message
        assert len(message) < 400 and "\n" not in message  # all 55 keys made a line of 1,200 characters


def _nested(key: str, value: object) -> dict:
    """``{"a": {"b": value}}`` for ``"a.b"``, as a config file holds a dotted key."""
    head, _, rest = key.partition(".")
    return {head: _nested(rest, value) if rest else value}


def test_config_round_trips_through_json(tmp_path: Path) -> None:
    cfg = config.make_config("cpu", overrides=["seed=5"])
    config.save_config(cfg, tmp_path)
    assert config.load_config(tmp_path) == cfg


def test_cosine_schedule_runs_from_lr_to_lr_min_after_its_start() -> None:
    cfg = config.make_config("smoke", overrides=["train.lr_schedule=cosine", "train.lr=0.002", "train.lr_min=0.0001",
                                                 "train.lr_schedule_start=10"]).train
    assert cfg.lr_at(0, 30) == cfg.lr_at(10, 30) == 0.002
    assert cfg.lr_at(29, 30) == pytest.approx(0.0001)
    rates = [cfg.lr_at(g, 30) for g in range(10, 30)]
    assert all(a > b for a, b in zip(rates, rates[1:], strict=False))
    constant = config.make_config("smoke", overrides=["train.lr_schedule=constant"]).train
    assert constant.lr_at(29, 30) == constant.lr
    with pytest.raises(config.ConfigError, match="lr_schedule must be one of constant, cosine"):
        config.make_config("smoke", overrides=["train.lr_schedule=linear"])


def test_growing_window_starts_at_one_generation() -> None:
    fixed = config.make_config("cpu").train
    assert [fixed.window_at(g) for g in (0, 5, 50)] == [8, 8, 8]
    growing = config.make_config("cpu", overrides=["train.replay_growth=0.5"]).train
    assert [growing.window_at(g) for g in (0, 1, 2, 6, 14, 50)] == [1, 1, 2, 4, 8, 8]


def test_a_config_saved_before_a_setting_existed_still_matches_its_preset() -> None:
    saved = config.to_dict(config.make_config("cpu", overrides=["seed=3"]))
    del saved["train"]["replay_growth"], saved["selfplay"]["num_workers"]
    assert sizing.train_command(saved) == "connectx-az train RUN --preset cpu --workers 0"
    assert sizing.train_command({**saved, "num_generations": 7}) == \
        "connectx-az train RUN --preset cpu --workers 0 --set num_generations=7"


def test_a_saved_config_without_a_setting_added_since_loads_as_it_ran(tmp_path: Path) -> None:
    saved = config.to_dict(config.make_config("cpu"))
    del saved["selfplay"]["fork_previous"]  # a run saved before forks from the previous generation existed
    (tmp_path / "config.json").write_text(json.dumps(saved))
    assert config.load_config(tmp_path) == config.make_config("cpu", overrides=["selfplay.fork_previous=false"])
    assert config.make_config("cpu").selfplay.fork_previous  # a new run gets today's default
    assert set(config.ADDED).isdisjoint(config.RETIRED)


def test_a_saved_config_with_a_setting_that_left_loads_where_it_did_what_the_code_does(tmp_path: Path) -> None:
    # the shipped checkpoint's config holds the Gumbel root's settings, switched off
    saved = config.to_dict(config.make_config("cpu", overrides=["seed=3"]))
    saved["selfplay"]["gumbel"] = {"enabled": False, "considered": 16, "c_visit": 50.0, "c_scale": 0.1}
    assert config.from_dict(saved) == config.make_config("cpu", overrides=["seed=3"])
    assert sizing.train_command(saved) == "connectx-az train RUN --preset cpu --workers 0"
    saved["selfplay"]["gumbel"]["enabled"] = True
    (tmp_path / "config.json").write_text(json.dumps(saved))
    with pytest.raises(config.ConfigError, match=r"^selfplay.gumbel.enabled=true: this setting has left the package"):
        config.load_config(tmp_path)
    with pytest.raises(config.ConfigError, match="unknown config key 'selfplay.gumbel.enabled'"):
        config.make_config("cpu", overrides=["selfplay.gumbel.enabled=false"])


def test_the_shipped_checkpoints_config_loads_as_it_ran_and_its_command_remakes_it() -> None:
    torch = pytest.importorskip("torch")
    data = torch.load(Path(config.__file__).parents[1] / "models" / "default.pt", weights_only=True, map_location="cpu")
    # saved before forks from the previous generation existed, and before the preset's recipe moved on from it
    sets = ["selfplay.num_parallel_games=64", "selfplay.fork_previous=false", "train.precision=float32"]
    assert sizing.train_command(data["config"]) == \
        "connectx-az train RUN --preset cpu --workers 0" + "".join(f" --set {s}" for s in sets)
    remade = sizing.sized(config.make_config("cpu", overrides=sets), cores=1, gpu=False, workers=0)
    assert config.from_dict(data["config"]) == remade
    card = json.loads((Path(config.__file__).parents[1] / "models" / "default.json").read_text())
    assert card["trained_by"] == sizing.train_command(data["config"])  # the card names the command that made it


def test_every_preset_carries_the_recipe() -> None:
    # the switches that won their ablations (docs/ablations.md) are what a user's run gets, whichever preset
    for name in config.PRESETS:
        cfg = config.make_config(name)
        assert (cfg.net.policy_filters, cfg.net.value_filters, cfg.net.value_pool) == (32, 32, True), name
        assert (cfg.selfplay.prefix_share, cfg.selfplay.prefix_max_plies, cfg.selfplay.fork_share) == (0.5, 14, 0.25)
        # forks start from positions searched before: the previous generation's, so all its games may be in flight
        assert cfg.selfplay.fork_previous, name
        assert (cfg.train.lr_schedule, cfg.train.lr_schedule_start, cfg.train.value_mix) == ("cosine", 0, 0.5)
        assert cfg.train.solved_labels == label_files.BUILTIN and cfg.train.solved_per_batch > 0, name
        train = cfg.train
        assert (train.solved_policy, train.solved_max_plies) == (True, 12), name


#: what a preset may set: sizes, and how the work is spread over the machine; the rest is the recipe, the defaults
SIZES = {"net.num_blocks", "net.num_filters", "net.value_hidden", "mcts.num_simulations", "selfplay.num_games",
         "selfplay.num_parallel_games", "selfplay.num_workers", "selfplay.cache_positions", "train.batch_size",
         "train.steps_per_generation", "train.replay_generations", "train.replay_max_positions",
         "train.solved_per_batch", "num_generations", "eval_positions", "threads"}


def test_the_defaults_are_the_recipe_and_a_preset_sets_only_sizes() -> None:
    for name, preset in config.PRESETS.items():
        assert set(config.leaves(preset)) <= SIZES, name
    assert config.RunConfig().net == config.make_config("cpu").net  # the shipped network's shape, heads included


def test_the_cosine_spans_the_runs_own_generations() -> None:
    # a run made of --time-budget chunks resumed with --resume follows the recipe with no --set in between
    cfg = config.make_config("cpu")
    rates = [cfg.train.lr_at(g, cfg.num_generations) for g in range(cfg.num_generations)]
    assert rates[0] == cfg.train.lr and rates[-1] == pytest.approx(cfg.train.lr_min)
    assert all(a > b for a, b in zip(rates, rates[1:], strict=False))


def test_the_package_ships_the_recipes_label_file() -> None:
    labels = label_files.load(label_files.BUILTIN)
    assert label_files.resolve(label_files.BUILTIN) == label_files.BUILTIN_PATH and len(labels) == 16_373
    assert int(labels.has_moves().sum()) == 11_352 and labels.plies.min() == 4 and labels.plies.max() == 12
    assert not {(int(p), int(m)) for p, m in zip(labels.position, labels.mask, strict=True)} & pons.benchmark_keys()


def test_the_settings_load_without_torch() -> None:
    # `train --show-config`, the notebook's configuration cell and the tools read settings where torch may be missing
    code = ("import sys; sys.modules['torch'] = None\n"
            "from connectx_az.training import config\n"
            "print(config.make_config('cpu').net.label)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0 and out.stdout.strip() == "4x64 p32 v32+pool", out.stderr


def test_a_timed_runs_rate_follows_the_share_of_its_time_spent() -> None:
    train = config.make_config("cpu").train
    assert train.lr_at_fraction(0.0) == train.lr and train.lr_at_fraction(1.0) == pytest.approx(train.lr_min)
    assert train.lr_at_fraction(0.5) == pytest.approx((train.lr + train.lr_min) / 2)
    assert train.lr_at_fraction(2.0) == pytest.approx(train.lr_min)  # past the end it stays at the floor
    # a run of N generations and a timed run agree where the shares agree
    assert train.lr_at(45, 91) == pytest.approx(train.lr_at_fraction(0.5))
