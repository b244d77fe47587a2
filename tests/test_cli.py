"""The command line: --help, one-line errors on bad input, the whole road end to end, `play` and `arena`."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import cli_in_one_process

from connectx_az.cli import bars
from connectx_az.cli import build as cli_build
from connectx_az.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ONNX = ROOT / "connectx_az" / "models" / "default.onnx"
DEFAULT_CARD = DEFAULT_ONNX.with_suffix(".json")


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "connectx_az.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_help_lists_the_commands() -> None:
    out = _run("--help").stdout
    for command in ("train", "export", "build", "validate", "eval", "bench", "plot"):
        assert command in out


def test_every_argument_has_help() -> None:
    def undocumented(parser: argparse.ArgumentParser, name: str) -> list[str]:
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    found += undocumented(sub, f"{name} {sub_name}")
            elif not action.help:
                found.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
        return found

    assert undocumented(cli_main.build_parser(), "connectx-az") == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("build", "--model", "missing.onnx"), "does not exist"),
        (("train", "RUN", "--preset", "huge"), "--preset huge: choose one of smoke, cpu, gpu"),
        (("train", "RUN", "--preset", "smoke", "--set", "mcts.sims=3"), "valid keys"),
        (("export", "missing.pt"), "does not exist"),
        (("train", "--resume", "no_such_run"), "--resume no_such_run: not a run's folder"),
        (("validate", "missing_submission.py"), "run `make submission` first"),
    ],
)
def test_bad_input_is_one_line_error(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    result = _run(*args, cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], result.stderr


def test_build_needs_numpy_only_and_still_reports_errors_in_one_line(tmp_path: Path) -> None:
    from connectx_az.evaluation import kaggle_io

    script = kaggle_io.sandbox_prelude(("torch", "onnxruntime", "onnx", "kaggle_environments")) + (
        "from connectx_az.cli.main import main\nsys.exit(main(sys.argv[1:]))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ok = subprocess.run([sys.executable, "-c", script, "build", "--out", str(tmp_path / "s.py")], cwd=tmp_path,
                        env=env, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "s.py").is_file()
    bad = subprocess.run([sys.executable, "-c", script, "build", "--model", "missing.onnx"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and len(bad.stderr.splitlines()) == 1


def test_corrupt_model_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage" * 10)
    result = _run("build", "--model", str(bad), "--out", str(tmp_path / "s.py"), cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.startswith("error:")
    assert not (tmp_path / "s.py").exists()


def test_smoke_train_export_build_and_play_a_kaggle_game(tmp_path: Path) -> None:
    pytest.importorskip("kaggle_environments")
    run = tmp_path / "run"
    assert _run("train", str(run), "--preset", "smoke", "--quiet", cwd=tmp_path).returncode == 0
    exported = _run("export", str(run), "--out", str(tmp_path / "model.onnx"), cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    built = _run("build", "--model", str(tmp_path / "model.onnx"), "--out", str(tmp_path / "submission.py"),
                 cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    assert "trained: connectx-az train RUN --preset smoke" in built.stdout

    from kaggle_environments import make

    from connectx_az.evaluation import kaggle_io

    env = make("connectx", configuration={"actTimeout": 0.3}, debug=False)
    agent = kaggle_io.load_submission(tmp_path / "submission.py")
    steps = env.run([agent, "random"])
    assert [s.status for s in steps[-1]] == ["DONE", "DONE"]
    assert steps[-1][0].reward in (-1, 0, 1)


def test_eval_pons_grades_the_chosen_sets_for_a_model_and_a_submission(tmp_path: Path) -> None:
    import json

    result = _run("eval", "pons", "--sets", "Begin-Hard", "End-Easy", "--limit", "5", "--sims", "4", "--json",
                  "--compare", str(DEFAULT_ONNX))
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert list(rows) == ["policy", "mcts4", "value", "value_children"]
    assert {name: v["n"] for name, v in rows["mcts4"].items()} == {"Begin-Hard": 5, "End-Easy": 5}
    assert all(0 <= v["mistake_rate"] <= v["strict_rate"] <= 1 for v in rows["policy"].values())
    assert {name: v["n"] for name, v in rows["value"].items()} == {"Begin-Hard": 5, "End-Easy": 5}
    assert all(0 <= v["accuracy"] <= 1 and v["n"] > 5 for v in rows["value_children"].values())
    # the shipped model against itself: the same grades, nothing gained or lost
    for row in rows.values():
        for v in row.values():
            assert v["control"] == {k: x for k, x in v.items()
                                    if k in ("n", "mistake_rate", "strict_rate", "accuracy", "mistakes")}
            assert v["only_this_right"] == v["only_control_right"] == 0
    text = _run("eval", "pons", "--sets", "Begin-Hard", "--limit", "3", "--sims").stdout
    assert "value_children" in text and "W/D/L accuracy" in text and "Begin-Hard 3" in text
    refused = _run("eval", "pons", "--submission", "submission.py", "--compare", str(DEFAULT_ONNX))
    assert refused.returncode != 0 and "--compare pairs two ONNX models" in refused.stderr

    assert _run("build", "--out", str(tmp_path / "submission.py")).returncode == 0
    result = _run("eval", "pons", "--submission", str(tmp_path / "submission.py"), "--sets", "End-Easy",
                  "--limit", "3", "--act-timeout", "0.5", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["submission@0.5s"]["End-Easy"]["n"] == 3

    # two builds in turns on the same positions: the later one paired with the first
    (tmp_path / "other.py").write_bytes((tmp_path / "submission.py").read_bytes())
    both = [str(tmp_path / "submission.py"), str(tmp_path / "other.py")]
    result = _run("eval", "pons", "--submission", *both, "--sets", "End-Easy", "--limit", "2",
                  "--act-timeout", "0.5", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert list(rows) == ["submission@0.5s", "other@0.5s"]
    first, other = rows["submission@0.5s"]["End-Easy"], rows["other@0.5s"]["End-Easy"]
    assert first["n"] == other["n"] == 2 and "control" not in first
    assert other["control"] == first
    assert other["only_this_right"] == len(set(first["mistakes"]) - set(other["mistakes"]))
    text = _run("eval", "pons", "--submission", *both, "--sets", "End-Easy", "--limit", "1",
                "--act-timeout", "0.5").stdout
    assert "other@0.5s" in text and "  paired" in text and "control: submission@0.5s" in text
    missing = _run("eval", "pons", "--submission", both[0], str(tmp_path / "nope.py"))
    assert missing.returncode != 0 and "nope.py not found" in missing.stderr


def test_a_warm_start_continues_the_network_it_starts_from(tmp_path: Path) -> None:
    """`--init-model` takes the checkpoint's heads (the shipped model's are wide) unless net.* is set."""
    from connectx_az.training.network import NetConfig, PolicyValueNet, load_checkpoint, save_checkpoint

    wide = NetConfig(num_blocks=1, num_filters=8, policy_filters=4, value_filters=4, value_pool=True)
    save_checkpoint(tmp_path / "wide.pt", PolicyValueNet(wide))
    quick = ("--preset", "smoke", "--quiet", "--init-model", str(tmp_path / "wide.pt"), "--set", "num_generations=1",
             "--set", "eval_positions=0", "--set", "selfplay.num_games=2", "--set", "train.steps_per_generation=0")
    result = _run("train", str(tmp_path / "a"), *quick, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "warm start: the 1x8 p4 v4+pool network" in result.stdout
    assert load_checkpoint(tmp_path / "a" / "checkpoint.pt")[0].config == wide
    # An explicit net.* keeps the asked-for heads, the preset's (the tower is loaded, the other heads start afresh).
    result = _run("train", str(tmp_path / "b"), *quick, "--set", "net.num_blocks=1", "--set", "net.num_filters=8",
                  cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "warm start:" not in result.stdout
    asked = NetConfig(num_blocks=1, num_filters=8, value_hidden=16, policy_filters=32, value_filters=32,
                      value_pool=True)
    assert load_checkpoint(tmp_path / "b" / "checkpoint.pt")[0].config == asked != wide


def test_show_config_prints_the_settings_and_trains_nothing(tmp_path: Path) -> None:
    """`train --show-config` is a look before a run: the resolved settings as JSON, no run folder."""
    result = _run("train", str(tmp_path / "run"), "--preset", "cpu", "--set", "mcts.num_simulations=123",
                  "--show-config", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["mcts"]["num_simulations"] == 123 and shown["train"]["solved_labels"] == "builtin"
    assert not (tmp_path / "run").exists()


def test_eval_value_calibrates_the_value_head_against_eval_pons(tmp_path: Path) -> None:
    graded = json.loads(_run("eval", "pons", "--sets", "Begin-Hard", "Middle-Easy", "--limit", "25", "--sims",
                             "--json").stdout)
    result = _run("eval", "value", "--sets", "Begin-Hard", "Middle-Easy", "--limit", "25", "--json")
    assert result.returncode == 0, result.stderr
    (label, sets), = json.loads(result.stdout).items()
    assert label == "default" and list(sets) == ["Begin-Hard", "Middle-Easy"]
    for name, c in sets.items():
        assert c["num_positions"] == 25 == sum(map(sum, c["confusion"]))
        # its first band is `eval pons`'s value row: the same accuracy, and the diagonal of the confusion
        band, accuracy = c["band_accuracy"][0]
        assert abs(band - 1 / 3) < 1e-9 and abs(accuracy - graded["value"][name]["accuracy"]) < 1e-4
        assert sum(c["confusion"][k][k] for k in range(3)) == 25 - len(graded["value"][name]["mistakes"])
        assert [b for b, _ in c["band_accuracy"]] == [band, 0.2, 0.1, 0.05]
        assert c["sign_accuracy"] is None or 0 <= c["sign_accuracy"] <= 1
    (tmp_path / "other").mkdir()
    other = tmp_path / "other" / DEFAULT_ONNX.name
    shutil.copy(DEFAULT_ONNX, other)
    text = _run("eval", "value", "--models", str(DEFAULT_ONNX), str(other), "--sets", "End-Easy",
                "--limit", "5", "--bands", "0.5", "--children").stdout
    rows = [line for line in text.splitlines() if "End-Easy" in line]
    assert len(rows) == 2 and rows[1].startswith(str(other))  # two files of one stem: labelled by path
    assert rows[0].split()[1:] == rows[1].split()[1:] and "±0.5" in text and "sign" in text
    twice = _run("eval", "value", "--models", str(other), str(other), "--sets", "End-Easy", "--limit", "2").stdout
    assert f"{other}#1" in twice and f"{other}#2" in twice
    no_draws = _run("eval", "value", "--sets", "Begin-Easy", "--limit", "10").stdout  # its first 10: no draw
    assert " / - / " in no_draws and "nan" not in no_draws
    bad = _run("eval", "value", "--bands", "1.5")
    assert bad.returncode == 2 and "--bands 1.5 must lie in [0, 1)" in bad.stderr


def test_eval_paired_counts_what_each_arm_alone_gets_wrong(tmp_path: Path) -> None:
    result = _run("eval", "pons", "--sets", "Begin-Hard", "End-Easy", "--limit", "30", "--sims", "2", "8", "--json")
    assert result.returncode == 0, result.stderr
    graded = tmp_path / "graded.json"
    graded.write_text(result.stdout)
    rows = json.loads(result.stdout)
    for mode in rows:
        for row in rows[mode].values():
            rate = row["mistake_rate"] if "mistake_rate" in row else 1 - row["accuracy"]
            assert len(row["mistakes"]) == round(rate * row["n"])
    done = _run("eval", "paired", f"{graded}:mcts2", f"{graded}:mcts8", "--json")
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    for name, c in counts.items():
        a, b = set(rows["mcts2"][name]["mistakes"]), set(rows["mcts8"][name]["mistakes"])
        assert c == {"n": 30, "only_a": len(a - b), "only_b": len(b - a), "both": len(a & b)}
    assert "only a" in _run("eval", "paired", f"{graded}:policy", f"{graded}:policy").stdout
    # eval show prints the saved table; with a second file its modes and sets join the table
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"submission@2s": {"Middle-Easy": {"n": 4, "mistake_rate": 0.25,
                                                                    "strict_rate": 0.5, "mistakes": [1]}}}))
    shown = _run("eval", "show", str(graded), str(other))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["mode", "End-Easy", "Middle-Easy", "Begin-Hard"]
    mcts8 = next(line for line in lines if line.startswith("mcts8")).split()
    assert mcts8[1] == f"{100 * rows['mcts8']['End-Easy']['mistake_rate']:.1f}%/" and mcts8[3] == "-"
    assert next(line for line in lines if line.startswith("submission@2s")).split()[1:4] == ["-", "25.0%/", "50.0%"]
    # two gradings of the same mode and set (two models): each row is labelled with its file
    twin = tmp_path / "twin.json"
    twin.write_text(json.dumps({"mcts8": {"End-Easy": {"n": 30, "mistake_rate": 0.5, "strict_rate": 0.5,
                                                       "mistakes": []}}}))
    labelled = _run("eval", "show", str(graded), str(twin)).stdout.splitlines()
    assert next(line for line in labelled if line.startswith("twin:mcts8")).split()[1] == "50.0%/"
    assert next(line for line in labelled if line.startswith("graded:mcts8")).split()[1] == mcts8[1]
    assert not any(line.startswith("mcts8") for line in labelled)
    missing = _run("eval", "show", str(tmp_path / "x.json"))
    assert missing.returncode != 0 and "cannot read" in missing.stderr and "Traceback" not in missing.stderr
    values = tmp_path / "values.json"  # another command's output (`eval value --json`): a one-line error
    values.write_text(json.dumps({"m.onnx": {"End-Easy": {"name": "End-Easy", "sign_accuracy": 0.8}}}))
    for path, json_text in ((values, None), (twin, "[1, 2]"), (twin, '{"mcts8": 3}')):
        if json_text is not None:
            path.write_text(json_text)
        wrong = _run("eval", "show", str(path))
        assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1 and "not the output of" in wrong.stderr
    # one-line errors: no mode given for a file of three, a mode it lacks, a file that is not there
    for args, message in (((str(graded), f"{graded}:mcts2"), "pick one as"),
                          ((f"{graded}:mcts9", f"{graded}:mcts2"), "has no mode 'mcts9'"),
                          ((str(tmp_path / "none.json"), str(graded)), "cannot read")):
        bad = _run("eval", "paired", *args)
        assert bad.returncode != 0 and message in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


@pytest.mark.slow  # its graders compile numba from scratch, in a process of their own
def test_eval_pons_grades_a_submission_in_the_kaggle_runtime(tmp_path: Path) -> None:
    pytest.importorskip("numba")
    assert _run("build", "--out", str(tmp_path / "submission.py")).returncode == 0
    result = _run("eval", "pons", "--submission", str(tmp_path / "submission.py"), "--sets", "Begin-Medium",
                  "--limit", "2", "--runtime", "kaggle", "--bank", "30", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["submission@2s+30s/kaggle"]["Begin-Medium"]["n"] == 2
    # what it will take, before it starts: 2 positions at up to 2 s, the 30 s bank and executing the file each
    assert "grading 2 positions, 1 file, runtime kaggle, 2 s a move: at most about 65 s" in result.stderr


def test_eval_pons_of_a_submission_says_what_it_will_take_before_it_starts(tmp_path: Path) -> None:
    assert _run("build", "--out", str(tmp_path / "submission.py")).returncode == 0
    result = _run("eval", "pons", "--submission", str(tmp_path / "submission.py"), "--sets", "Begin-Medium",
                  "--limit", "1", "--act-timeout", "0.2", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["submission@0.2s"]["Begin-Medium"]["n"] == 1
    assert "grading 1 positions, 1 file, runtime numpy, 0.2 s a move: at most about" in result.stderr


def test_validate_refuses_an_opponent_kaggle_environments_lacks_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "submission.py").write_text("def agent(observation, configuration):\n    return 3\n")
    bad = _run("validate", "submission.py", "--opponents", "alphazero", cwd=tmp_path)
    assert bad.returncode == 2 and "invalid choice: 'alphazero'" in bad.stderr
    assert "Traceback" not in bad.stderr, bad.stderr


def test_eval_pons_refuses_an_unknown_runtime(tmp_path: Path) -> None:
    bad = _run("eval", "pons", "--submission", str(tmp_path / "submission.py"), "--runtime", "onnx")
    assert bad.returncode == 2 and "invalid choice: 'onnx'" in bad.stderr


def test_validate_plays_games_through_kaggle_environments_and_reports_them(tmp_path: Path) -> None:
    import json

    # no book: against random the book and the solver can play a whole game, and the report's backend is checked
    assert _run("build", "--no-book", "--out", str(tmp_path / "submission.py")).returncode == 0
    result = _run("validate", str(tmp_path / "submission.py"), "--opponents", "random", "--games", "1",
                  "--act-timeout", "0.25", "--replays", str(tmp_path / "replays"), "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["results"]
    assert [(r["opponent"], r["seat"], r["wins"] + r["draws"] + r["losses"]) for r in rows] == [
        ("random", 1, 1), ("random", 2, 1)]
    assert all(r["losses"] == 0 and not r["bad_statuses"] and r["backends"] == ["numpy"] for r in rows)
    assert sorted(p.name for p in (tmp_path / "replays").iterdir()) == ["random_seat1.html", "random_seat2.html"]


def test_label_proves_positions_and_adds_to_its_file(tmp_path: Path) -> None:
    from connectx_az.training import labels as label_files

    out = tmp_path / "labels.npz"
    for total in (6, 12):
        result = _run("label", str(out), "--positions", "6", "--plies", "14", "16")
        assert result.returncode == 0, result.stderr
        assert f"wrote {out}: {total} positions" in result.stdout and "6 new" in result.stdout
    assert len(label_files.load(out)) == 12 and len(label_files.load(out).keys()) == 12
    assert not label_files.load(out).best.any()
    # --moves: the file's positions get their best moves first, then new ones are proven with theirs
    result = _run("label", str(out), "--positions", "2", "--plies", "14", "16", "--moves")
    assert result.returncode == 0, result.stderr
    labels = label_files.load(out)
    lacking = int(sum(labels.result[:12] >= 0))
    assert f"best moves of {lacking} of the {lacking} positions" in result.stdout
    assert f"wrote {out}: 14 positions" in result.stdout
    assert f"{int(sum(labels.result[12:] >= 0))} with their best moves" in result.stdout
    assert np.array_equal(labels.has_moves(), labels.result >= 0)
    result = _run("label", str(out), "--positions", "2", "--plies", "20", "22", "--moves", "--workers", "2")
    assert result.returncode == 0, result.stderr
    assert f"wrote {out}: 16 positions" in result.stdout and " x 2" in result.stdout
    assert np.array_equal(label_files.load(out).has_moves(), label_files.load(out).result >= 0)
    marked = label_files.load(out)  # moves sought and not proven within the budget: retried on request only
    unproven = marked.result >= 0
    label_files.save(out, label_files.Labels(marked.position, marked.mask, marked.plies, marked.result,
                                   np.where(unproven, label_files.UNPROVEN_MOVES, 0).astype(np.uint8)))
    result = _run("label", str(out), "--positions", "1", "--plies", "20", "22", "--moves")
    assert result.returncode == 0 and "best moves of" not in result.stdout
    result = _run("label", str(out), "--positions", "1", "--plies", "20", "22", "--moves", "--retry-unproven")
    assert result.returncode == 0, result.stderr
    assert f"best moves of {int(unproven.sum())} of the {int(unproven.sum())} positions" in result.stdout
    assert np.array_equal(label_files.load(out).has_moves(), label_files.load(out).result >= 0)
    bad = _run("label", str(out), "--positions", "1", "--retry-unproven")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "add --moves" in bad.stderr
    bad = _run("label", str(out), "--positions", "1", "--workers", "0")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--workers must be positive" in bad.stderr
    (tmp_path / "junk.npz").write_text("junk")
    bad = _run("label", str(tmp_path / "junk.npz"), "--positions", "1")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "not a labels file" in bad.stderr


def _cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "connectx_az.cli", *args], cwd=ROOT, env=env, input=stdin,
                          capture_output=True, text=True, timeout=120)


def test_cli_play_finishes_a_game_from_scripted_input() -> None:
    # Bad inputs are re-prompted; columns cycle until the game ends (full columns are refused too).
    script = "x\n0\n9\n" + "1\n2\n3\n4\n5\n6\n7\n" * 12
    result = _cli("play", "--sims", "8", "--first", stdin=script)
    assert result.returncode == 0, result.stderr
    assert "'x' is not a playable column" in result.stdout
    assert result.stdout.rstrip().splitlines()[-1] in ("you win", "the agent wins", "draw")


def test_cli_play_quits_on_q() -> None:
    result = _cli("play", "--sims", "8", stdin="q\n")
    assert result.returncode == 0, result.stderr
    assert "agent plays" in result.stdout and result.stdout.rstrip().endswith("bye")


def test_cli_arena_json() -> None:
    result = _cli("arena", "--games", "2", "--sims", "8", "--alphabeta", "1", "--builtin", "random", "--json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert {r["name"] for r in out["ratings"]} == {"default@8", "alphabeta1", "random"}
    assert len(out["games"]) == 3 * 2 and out["anchor"] == "random"


def test_build_prints_a_notebook_card_that_lacks_games_and_hours(tmp_path: Path) -> None:
    """The notebook's card has generations but no games or hours; building from it must not fail."""
    model = tmp_path / "model.onnx"
    shutil.copy(Path(__file__).resolve().parents[1] / "connectx_az" / "models" / "default.onnx", model)
    model.with_suffix(".json").write_text(json.dumps(
        {"trained_by": "connectx_az notebooks/train.ipynb", "training": {"generations": 3}}))
    built = _run("build", "--model", str(model), "--out", str(tmp_path / "submission.py"), cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    assert "trained: connectx_az notebooks/train.ipynb; 3 generations\n" in built.stdout


def test_build_prints_five_short_lines_and_card_shows_the_rest(tmp_path: Path) -> None:
    built = _run("build", "--out", str(tmp_path / "submission.py"), cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    lines = built.stdout.splitlines()
    assert len(lines) <= 5 and max(map(len, lines)) <= 120, lines
    assert lines[0].startswith("wrote ") and lines[1].startswith("model: default.onnx, 4x64")
    assert any(line.startswith("strength: Kaggle clock") for line in lines)
    shown = _run("card", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    card = json.loads(DEFAULT_CARD.read_text())
    # the command that remakes it, whole in the card; in build's line, the --set options counted
    assert "trained by: " + card["trained_by"] in " ".join(shown.stdout.split())
    assert "trained: connectx-az train RUN --preset cpu --workers 0 +3 --set; 450 generations" in built.stdout
    assert "measured by: connectx-az compare" in shown.stdout
    assert card["trained_by"].startswith("connectx-az train RUN --preset cpu")
    assert card["training"]["generations"] == 450
    as_json = _run("card", str(DEFAULT_CARD), "--json", cwd=tmp_path)
    assert json.loads(as_json.stdout) == card
    (tmp_path / "bad.json").write_text("{not json")
    bad = _run("card", str(tmp_path / "bad.json"), cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "is not readable JSON" in bad.stderr
    missing = _run("card", str(tmp_path / "none.onnx"), cwd=tmp_path)
    assert missing.returncode == 2 and missing.stderr == f"error: {tmp_path / 'none.onnx'} not found\n"


def test_a_model_of_ones_own_gets_a_file_of_its_own_and_a_replaced_file_is_said(small_onnx: Path, tmp_path: Path,
                                                                                 monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copy(small_onnx, tmp_path / "mine.onnx")
    assert cli_main.main(["build", "--no-book"]) == 0
    assert capsys.readouterr().out.startswith("wrote build/submission.py (")
    shipped = (tmp_path / "build" / "submission.py").read_bytes()
    assert cli_main.main(["build", "--model", "mine.onnx", "--no-book"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("wrote build/submission_mine.py (") and "replaced" not in out, out
    assert (tmp_path / "build" / "submission.py").read_bytes() == shipped  # the shipped build is left alone
    assert cli_main.main(["build", "--model", "mine.onnx", "--no-book", "--out", "build/submission.py"]) == 0
    lines = capsys.readouterr().out.splitlines()
    shipped_sha256 = hashlib.sha256(DEFAULT_ONNX.read_bytes()).hexdigest()
    assert lines[1] == f"replaced: build/submission.py held another model (sha256 {shipped_sha256[:12]})", lines
    assert cli_main.main(["build", "--model", "mine.onnx", "--no-book", "--out", "build/submission.py"]) == 0
    assert "replaced" not in capsys.readouterr().out  # the same model again: nothing replaced worth saying
    (tmp_path / "mine.pt").write_bytes(b"not onnx")
    assert _one_line_error(capsys, cli_main.main(["build", "--model", "mine.pt"])) == (
        "error: model mine.pt is a PyTorch checkpoint, not an ONNX model: export it first, "
        "`.venv/bin/connectx-az export mine.pt --out build/mine.onnx`, and build that\n")


def test_a_reader_that_goes_away_stops_the_output_quietly(tmp_path: Path) -> None:
    # `connectx-az eval show X | head -3`: once the reader has gone, a print fails with EPIPE; the
    # command stops with 141 (as 128 + SIGPIPE) and no traceback. The read end is closed before the
    # child writes, so every print meets the closed pipe.
    graded = tmp_path / "graded.json"
    graded.write_text(json.dumps({f"mcts{i}": {"End-Easy": {"n": 4, "mistake_rate": 0.25, "strict_rate": 0.5,
                                                            "mistakes": [1]}} for i in range(50)}))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    child = subprocess.Popen([sys.executable, "-m", "connectx_az.cli", "eval", "show", str(graded)], cwd=ROOT,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    child.stdout.close()
    stderr = child.stderr.read()
    assert child.wait(timeout=120) == 141, stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr


def test_bench_solver_takes_its_sets_and_deadline() -> None:
    done = _run("bench", "solver", "--solvers", "python", "--limit", "1", "--sets", "End-Easy", "--deadline", "1",
                "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    row = result["solvers"]["python"]
    assert result["deadline_s"] == 1 and row["End-Easy"] == {"n": 1, "within_0.5s": 1.0, "within_1s": 1.0,
                                                              "wrong": 0}
    assert "Begin-Hard" not in row and sum(cell["proven"] for cell in row["nodes_by_empty"].values()) == 1
    bad = _run("bench", "solver", "--deadline", "0")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "--deadline 0 must be positive" in bad.stderr


def _one_line_error(capsys: pytest.CaptureFixture[str], code: int) -> str:
    """The line a command printed on stderr, asserting it stopped with status 2 on that one line."""
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: "), (code, err)
    return err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("eval", "pons", "--limit", "-3"), "--limit -3 must be positive"),
        (("eval", "pons", "--sims", "64", "0"), "--sims 0 must be positive"),
        (("eval", "pons", "--bank", "-1", "--act-timeout", "0"), "--act-timeout 0 must be positive; --bank -1 must be "
                                                                 "zero or more"),
        (("eval", "value", "--limit", "0"), "--limit 0 must be positive"),
        (("validate", "--games", "0"), "--games 0 must be positive"),
        (("duel", "--act-timeout", "-2"), "--act-timeout -2 must be positive"),
        (("arena", "--opening-plies", "-1"), "--opening-plies -1 must be zero or more"),
        (("play", "--sims", "0"), "--sims 0 must be positive"),
        (("bench", "precision", "--seconds", "-1"), "--seconds -1 must be positive"),
        (("compare", "x.onnx", "--games", "0"), "--games 0 must be positive"),
        (("train", "r", "--generations", "0"), "--generations 0 must be positive"),  # it said "checkpoint: r/..."
        (("train", "r", "--threads", "0", "--keep-every", "-1"), "--threads 0 must be positive; --keep-every -1 "
                                                                  "must be zero or more"),
    ],
)
def test_a_count_or_a_time_that_is_not_positive_is_refused_in_one_line(args: tuple[str, ...], said: str,
                                                                        capsys) -> None:
    assert _one_line_error(capsys, cli_main.main(list(args))) == f"error: {said}\n"


@pytest.mark.parametrize(
    ("args", "blocked", "extra"),
    [
        (("play",), ("onnxruntime",), "eval"),
        (("train", "{tmp}/run", "--preset", "smoke"), ("torch",), "train"),
        (("train", "{tmp}/run", "--preset", "smoke"), ("tqdm",), "train"),
        (("export", "{tmp}/checkpoint.pt"), ("onnx",), "train"),
        (("validate", "{tmp}/submission.py"), ("kaggle_environments",), "validate"),
        (("eval", "pons"), ("onnxruntime",), "eval"),
        (("eval", "value"), ("onnxruntime",), "eval"),
        (("arena", "--model", "--alphabeta", "1"), ("kaggle_environments",), "validate"),
        (("arena", "--builtin"), ("onnxruntime",), "eval"),
        (("plot", "{tmp}"), ("matplotlib",), "train"),
        (("bench", "selfplay"), ("torch",), "train"),
        (("bench", "solver", "--solvers", "numba"), ("numba",), "validate"),
    ],
)
def test_a_missing_optional_package_is_one_line_that_says_how_to_install_it(
        args: tuple[str, ...], blocked: tuple[str, ...], extra: str, tmp_path: Path, monkeypatch, capsys) -> None:
    from connectx_az import extras

    (tmp_path / "submission.py").write_text("def agent(observation, configuration):\n    return 3\n")
    for name in blocked:
        monkeypatch.setitem(sys.modules, name, None)  # as Python marks a module that cannot be imported
    err = _one_line_error(capsys, cli_main.main([a.format(tmp=tmp_path) for a in args]))
    command = " ".join(a for a in args[:2] if a.isalpha())  # e.g. "eval pons", "train"
    names = [extras.PACKAGES[name][0] for name in blocked]
    assert f"`connectx-az {command}` needs {', '.join(names[:-1]) + ' and ' if len(names) > 1 else ''}{names[-1]}" \
        in err
    assert f"`make install-{extra}`" in err and f"pip install -e '.[{extra}]'" in err


def test_grading_a_model_and_the_arena_need_no_torch(monkeypatch, capsys) -> None:
    for name in ("torch", "onnx", "tqdm"):  # what `make install-eval` leaves out
        monkeypatch.setitem(sys.modules, name, None)
    assert cli_main.main(["eval", "pons", "--limit", "2", "--sets", "End-Easy", "--sims", "4", "--json"]) == 0
    graded = json.loads(capsys.readouterr().out)
    assert graded and "End-Easy" in json.dumps(graded)
    assert cli_main.main(["arena", "--games", "2", "--sims", "4", "--alphabeta", "1", "--json"]) == 0
    assert "elo" in capsys.readouterr().out.lower()


def test_an_optional_import_that_fails_deeper_in_a_command_is_one_line_too(monkeypatch, capsys) -> None:
    def build_without_tqdm(args) -> int:
        raise ModuleNotFoundError("No module named 'tqdm.auto'", name="tqdm.auto")

    monkeypatch.setattr(cli_build, "cmd_build", build_without_tqdm)
    err = _one_line_error(capsys, cli_main.main(["build"]))
    assert "`connectx-az build` needs tqdm" in err and "`make install-train`" in err

    def build_with_a_bug(args) -> int:  # a module of the package itself missing is a bug: the traceback stays
        raise ModuleNotFoundError("No module named 'connectx_az.nothing'", name="connectx_az.nothing")

    monkeypatch.setattr(cli_build, "cmd_build", build_with_a_bug)
    with pytest.raises(ModuleNotFoundError):
        cli_main.main(["build"])


def test_label_counts_its_progress_without_tqdm(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "numba", None)  # the pure-Python solver: nothing to compile
    from connectx_az.engine import solver_numba

    # a compile tried while numba is blocked records its failure for the process: undo it afterwards, so a
    # later test in this process can still compile
    monkeypatch.setattr(solver_numba, "_KERNEL_ERROR", solver_numba._KERNEL_ERROR)
    out = tmp_path / "labels.npz"
    assert cli_main.main(["label", str(out), "--positions", "2", "--plies", "28", "30"]) == 0
    assert f"wrote {out}: 2 positions" in capsys.readouterr().out


@pytest.mark.parametrize("args", [("eval", "pons", "--sims", "4", "--limit", "1", "--model"),
                                  ("eval", "value", "--limit", "1", "--models"),
                                  ("play", "--model"), ("arena", "--builtin", "--model"),
                                  ("bench", "agent", "--model")])
@pytest.mark.parametrize("content", [b"", b"\x08\x07garbage", b"not a model\n"])
def test_a_file_that_is_no_model_is_one_line(args: tuple[str, ...], content: bytes, tmp_path: Path,
                                             capsys) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(content)
    err = _one_line_error(capsys, cli_main.main([*args, str(bad)]))
    assert str(bad) in err and ("cannot load" in err or "cannot run in the agent" in err)


@pytest.mark.parametrize(("args", "content"), [(("export",), b"garbage"), (("export",), b""),
                                               (("label", "--positions", "1"), b"garbage"),
                                               (("train", "{tmp}/run", "--preset", "smoke", "--init-model"), b"")])
def test_a_corrupt_checkpoint_or_labels_file_is_one_line(args: tuple[str, ...], content: bytes, tmp_path: Path,
                                                         capsys) -> None:
    bad = tmp_path / ("bad.npz" if args[0] == "label" else "bad.pt")
    bad.write_bytes(content)
    argv = [a.format(tmp=tmp_path) for a in args]
    argv = [argv[0], str(bad), *argv[1:]] if args[0] == "label" else [*argv, str(bad)]
    err = _one_line_error(capsys, cli_main.main(argv))
    assert str(bad) in err and ("not a readable checkpoint" in err or "not a labels file" in err)
    assert not (tmp_path / "run").exists()


#: files that are not submissions, and what the error says of each
NOT_SUBMISSIONS = {"empty.py": (b"", "defines no callable agent"),
                   "syntax.py": (b"def agent(:\n", "not Python (invalid syntax at line 1)"),
                   "binary.py": (bytes(range(128, 256)), "not a text file")}


def test_a_file_that_is_no_submission_is_one_line_in_every_command_that_plays_one(tmp_path: Path) -> None:
    # One process runs the commands in turn (validate and eval pons --submission pin it to one core and
    # block packages, as Kaggle's sandbox would: not this test process).
    for name, (content, _) in NOT_SUBMISSIONS.items():
        (tmp_path / name).write_bytes(content)
    runs = [[*command, name] for name in NOT_SUBMISSIONS
            for command in (["validate"], ["eval", "pons", "--submission"], ["arena", "--model", "--submission"])]
    for argv, (code, err) in zip(runs, cli_in_one_process(runs, tmp_path), strict=True):
        expected = NOT_SUBMISSIONS[argv[-1]][1]
        assert code == 2 and err.count("\n") == 1 and err.startswith(f"error: {argv[-1]} is not a submission"), argv
        assert expected in err, (argv, err)


def test_a_file_whose_network_does_not_load_fails_in_one_line_in_every_command_that_grades_or_plays_it(
        tmp_path: Path) -> None:
    # On Kaggle the agent plays on with uniform priors (the game must go on); before an upload it must fail.
    from connectx_az.tools import builder

    builder.build_submission(DEFAULT_ONNX, tmp_path / "good.py")
    lines = (tmp_path / "good.py").read_text().splitlines(keepends=True)
    start = lines.index('MODEL_B64 = """\n')
    lines[start + 3] = "\n"  # one line of the embedded model blanked
    (tmp_path / "blanked.py").write_text("".join(lines))
    # one process runs them in turn; validate, first, blocks numba for the rest of it: the duel's referee is Python's
    runs = [["validate", "blanked.py", "--games", "1", "--opponents", "random"],
            ["eval", "pons", "--submission", "blanked.py", "--limit", "1", "--sets", "End-Easy"],
            ["duel", "blanked.py", "--games", "1", "--cache", "cache.sqlite", "--solver", "python"],
            ["arena", "--model", "--alphabeta", "1", "--builtin", "--submission", "blanked.py"],
            ["compare", "blanked.py", "--out", "compared", "--runtimes", "numpy", "--limit", "1", "--games", "1"]]
    for argv, (code, err) in zip(runs, cli_in_one_process(runs, tmp_path), strict=True):
        assert code == 2 and err.count("\n") == 1, (argv, err)
        assert err.startswith("error: blanked.py: its network did not load (model: the embedded model fails its "
                              "sha256 check); on Kaggle it would play with uniform priors"), (argv, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blanked.py", "good.py"]  # no replays, no compare folder


@pytest.mark.parametrize(("argv", "files", "message"), [
    (["card", "README.md"], {"README.md": "# notes\n"}, "README.md is neither an ONNX model nor its .json card"),
    (["card", "empty.py"], {"empty.py": ""}, "empty.py is neither an ONNX model nor its .json card"),
    (["card", "model.onnx"], {"model.onnx": "x"},
     "no model card in model.json: `.venv/bin/connectx-az export` writes one beside the model it exports"),
    (["card", "card.json"], {"card.json": "{}"},
     "no model card in card.json: `.venv/bin/connectx-az export` writes one beside the model it exports"),
    (["build", "--model", "nonexistent.onnx"], {},
     "model nonexistent.onnx does not exist; export one from a training run first: "
     "`.venv/bin/connectx-az export RUN_DIR --out nonexistent.onnx`"),
    (["train", "run", "--preset", "smoke", "--set", "mcts.num_simulations=abc"], {},
     "setting mcts.num_simulations: expected an integer, got 'abc'"),
    *[(argv, {"m.onnx": "x"}, "m.onnx is an ONNX model, an export that training cannot read: use the .pt checkpoint "
       "it came from (a run's checkpoint.pt; the shipped network's is connectx_az/models/default.pt)")
      for argv in (["train", "run", "--preset", "smoke", "--init-model", "m.onnx"], ["export", "m.onnx"])],
    (["train", "notarun", "--preset", "smoke"], {"notarun/notes.txt": "mine\n"},
     "notarun is not empty and holds no run (no config.json); a new run needs a new or empty folder"),
])
def test_a_wrong_argument_is_one_line_that_names_it_and_nothing_is_written(
        argv: list[str], files: dict[str, str], message: str, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert _one_line_error(capsys, cli_main.main(argv)) == f"error: {message}\n"
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("command", [["eval", "pons", "--submission"], ["validate"], ["duel"]])
def test_the_kaggle_runtime_without_numba_is_refused_in_one_line(command: list[str], tmp_path: Path, monkeypatch,
                                                                 capsys) -> None:
    # without numba the file would play with its pure-Python solver (the numpy case) under the kaggle label
    monkeypatch.setitem(sys.modules, "numba", None)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "submission.py").write_text("def agent(observation, configuration):\n    return 3\n")
    err = _one_line_error(capsys, cli_main.main([*command, "submission.py", "--runtime", "kaggle"]))
    assert err.startswith(f"error: `connectx-az {' '.join(command[:2]).split(' -')[0]} --runtime kaggle` needs "
                          "numba, which is not installed: run `make install-validate`"), err
    assert err.endswith("; or use --runtime numpy\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["submission.py"]


def test_without_tqdm_progress_is_a_plain_line_with_the_time_left(monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    monkeypatch.setattr(bars.LineBar, "interval", 0.0)  # a line every step (30 s apart otherwise)
    assert cli_main.main(["bench", "solver", "--solvers", "python", "--limit", "2", "--sets", "End-Easy",
                     "--deadline", "1"]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("positions:")]
    assert [line.split(",")[0] for line in lines] == ["positions: 1/2 positions", "positions: 2/2 positions"]
    assert lines[0].endswith(" left") and not lines[1].endswith(" left")
    assert bars.duration(42) == "42 s" and bars.duration(720) == "12 min" and bars.duration(4 * 3600) == "4.0 h"
    with bars.progress_bar(3, "games", eta=False) as bar:  # validate's: its games differ too much in length
        bar.update(1)
    err = capsys.readouterr().err
    assert err.startswith("games: 1/3 games, ") and "left" not in err, err


def test_validate_stops_at_a_broken_move_in_one_line_and_keeps_another_files_replays(tmp_path: Path) -> None:
    pytest.importorskip("kaggle_environments")
    leftmost = ("def agent(observation, configuration):\n"
                "    return next(c for c in range(configuration['columns']) if observation['board'][c] == 0)\n")
    (tmp_path / "leftmost.py").write_text(leftmost)
    (tmp_path / "broken.py").write_text(leftmost.replace("    return", "    if observation['board'].count(0) < 41:\n"
                                                         "        raise KeyError('lost my book')\n    return"))
    done = _run("validate", "leftmost.py", "--opponents", "random", "--games", "1", "--act-timeout", "0.25",
                cwd=tmp_path)
    assert done.returncode in (0, 1) and "replays: build/replays/leftmost" in done.stdout, done.stderr
    replays = sorted(p.relative_to(tmp_path) for p in (tmp_path / "build").rglob("*"))
    assert [str(p) for p in replays] == ["build/replays", "build/replays/leftmost",
                                         "build/replays/leftmost/random_seat1.html",
                                         "build/replays/leftmost/random_seat2.html"]
    broken = _run("validate", "broken.py", "--opponents", "random", "--games", "1", "--act-timeout", "0.25",
                  cwd=tmp_path)
    assert broken.returncode == 2, broken.stderr
    assert broken.stderr.splitlines()[-1] == ("error: broken.py, game 1 against random (seat 1), ply 2: its agent "
                                              "raised KeyError: 'lost my book'; validation stops at the file's first "
                                              "broken move")
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "build").rglob("*")) == replays


def test_workers_above_one_need_fork_for_the_book_and_the_labels(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import multiprocessing

    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    for command in (["book", str(tmp_path / "state.bin"), "--depth", "1", "--workers", "2"],
                    ["label", str(tmp_path / "labels.npz"), "--workers", "2"]):
        assert cli_main.main(command) == 2, command
        assert "--workers above 1 needs processes started by fork" in capsys.readouterr().err, command
    assert not list(tmp_path.iterdir())


def test_the_errors_a_user_sees_share_one_base_class() -> None:
    from connectx_az import cards, errors, extras
    from connectx_az.evaluation import reports
    from connectx_az.tools import builder, compare
    from connectx_az.training import config, network

    for error in (config.ConfigError, network.CheckpointError, cards.CardError, builder.BuildError,
                  compare.CompareError, reports.ReportError, extras.MissingPackage):
        assert issubclass(error, errors.UserError), error
    assert errors.UserError in cli_main.user_errors()
    assert cli_main.main(["train", "RUN", "--preset", "huge"]) == 2  # a ConfigError: one line, no traceback
