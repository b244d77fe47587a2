"""Bad input refused where it enters, in one line; nothing shipped or made earlier overwritten unasked (issue 70).

A model of another shape than the network (``build``, ``compare``, ``eval pons``), a model beside a card that does
not describe it (``card``), a built file whose opening book does not load (``validate``, ``duel``, ``compare``), an
export over the shipped model or another run's export, an output that is not a regular file, and option values
that each name themselves alone."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from conftest import cli_in_one_process, toy_onnx

from connectx_az import paths
from connectx_az.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ONNX = ROOT / "connectx_az" / "models" / "default.onnx"


def _one_line_error(capsys: pytest.CaptureFixture[str], code: int) -> str:
    """The line a command printed on stderr, asserting it stopped with status 2 on that one line."""
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: "), (code, err)
    return err


# --------------------------------------------------------------------------- a model that is not the network

#: models of another shape than the network, and what the refusal says of each
NOT_THE_NETWORK = {"planes3": ({"planes": 3}, "cannot score a position encoded as 2 planes of 6x7"),
                   "moves6": ({"moves": 6}, "its move output has shape (1, 6)"),
                   "novalue": ({"value": False}, "its value output has shape (7,)"),
                   "nan": ({"value_weight": float("nan")}, "not finite")}


@pytest.mark.parametrize("name", list(NOT_THE_NETWORK))
def test_build_compare_and_eval_pons_refuse_a_model_that_is_not_the_network_in_one_line(
        name: str, tmp_path: Path, capsys) -> None:
    # build used to write it ("unknown ResNet", exit 0), and eval pons to raise a traceback
    kwargs, said = NOT_THE_NETWORK[name]
    model = tmp_path / f"{name}.onnx"
    model.write_bytes(toy_onnx(**kwargs))
    for argv in (["build", "--model", str(model), "--out", str(tmp_path / "built.py")],
                 ["compare", str(model), "--out", str(tmp_path / "compared"), "--runtimes", "numpy", "--quick"],
                 ["eval", "pons", "--model", str(model), "--sims", "1", "--limit", "1", "--sets", "End-Easy"]):
        err = _one_line_error(capsys, cli_main.main(argv))
        assert str(model) in err and said in err, (argv, err)
    assert not (tmp_path / "built.py").exists() and not (tmp_path / "compared").exists()


def test_a_model_shaped_as_the_network_is_built(tmp_path: Path, capsys) -> None:
    model = tmp_path / "toy.onnx"
    model.write_bytes(toy_onnx())
    assert cli_main.main(["build", "--model", str(model), "--out", str(tmp_path / "built.py"), "--no-book"]) == 0
    assert (tmp_path / "built.py").is_file()


# --------------------------------------------------------------------------- card


def test_card_says_when_the_model_is_not_the_one_its_card_describes(tmp_path: Path, capsys) -> None:
    model = tmp_path / "default.onnx"
    shutil.copy(DEFAULT_ONNX, model)
    shutil.copy(DEFAULT_ONNX.with_suffix(".json"), model.with_suffix(".json"))
    assert cli_main.main(["card", str(model)]) == 0
    assert capsys.readouterr().err == ""
    data = DEFAULT_ONNX.read_bytes()
    model.write_bytes(data[: len(data) // 2])  # cut short
    assert cli_main.main(["card", str(model)]) == 1
    out, err = capsys.readouterr()
    assert "003dff4de025" in out  # the card is shown, then what is wrong with the file
    assert err == (f"error: {model} is not the model this card describes: it holds {len(data) // 2:,} bytes, the "
                   f"card {len(data):,} (cut short or replaced since it was exported)\n")
    changed = bytearray(data)
    changed[-1] ^= 1  # the same size, one bit changed
    model.write_bytes(bytes(changed))
    assert cli_main.main(["card", str(model.with_suffix(".json")), "--json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["sha256"].startswith("003dff4de025")
    assert "its sha256 is " in err and "the card's 003dff4de025 (changed since it was exported)" in err


# --------------------------------------------------------------------------- a book that does not load


def test_a_file_whose_book_does_not_load_fails_in_one_line_in_validate_duel_and_compare(tmp_path: Path) -> None:
    # The agent plays on without its book (every opening move searched, seconds from the bank): before an upload,
    # the commands say so as they say a network did not load.
    from connectx_az.tools import builder

    builder.build_submission(DEFAULT_ONNX, tmp_path / "good.py")
    lines = (tmp_path / "good.py").read_text().splitlines(keepends=True)
    at = lines.index('BOOK_B64 = """\n') + 5
    lines[at] = ("B" if lines[at][10] != "B" else "C").join((lines[at][:10], lines[at][11:]))  # one character
    (tmp_path / "damaged.py").write_text("".join(lines))
    runs = [["validate", "damaged.py", "--games", "1", "--opponents", "random"],
            ["duel", "damaged.py", "--games", "1", "--cache", "cache.sqlite", "--solver", "python"],
            ["compare", "damaged.py", "--out", "compared", "--runtimes", "numpy", "--limit", "1", "--games", "1"]]
    for argv, (code, err) in zip(runs, cli_in_one_process(runs, tmp_path), strict=True):
        assert code == 2 and err.count("\n") == 1, (argv, err)
        assert err.startswith("error: damaged.py: its opening book did not load (BookError: book is corrupt"), err
        assert "on Kaggle it would search every opening move" in err
    assert not (tmp_path / "compared").exists()


# --------------------------------------------------------------------------- keep: export and build outputs


@pytest.fixture
def two_runs(tmp_path: Path, make_net) -> tuple[Path, Path]:
    """Two run folders, each with a checkpoint of its own small net and a config.json."""
    pytest.importorskip("torch")
    from connectx_az.training.network import save_checkpoint

    made = []
    for seed, name in enumerate(("run_a", "run_b")):
        run = tmp_path / name
        run.mkdir()
        save_checkpoint(run / "checkpoint.pt", make_net(seed), generation=1)
        (run / "config.json").write_text("{}")
        made.append(run)
    return made[0], made[1]


def test_export_without_out_writes_one_file_a_run(two_runs: tuple[Path, Path], tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    for run in two_runs:
        assert cli_main.main(["export", str(run)]) == 0
    assert cli_main.main(["export", str(two_runs[0] / "checkpoint.pt")]) == 0  # the run's checkpoint: the run's file
    made = sorted(p.name for p in (tmp_path / "build").iterdir())
    assert made == ["run_a.json", "run_a.onnx", "run_b.json", "run_b.onnx"]


def test_export_refuses_to_replace_another_runs_export_or_the_shipped_model_without_force(
        two_runs: tuple[Path, Path], tmp_path: Path, monkeypatch, capsys) -> None:
    run_a, run_b = two_runs
    out = tmp_path / "build" / "model.onnx"
    assert cli_main.main(["export", str(run_a), "--out", str(out)]) == 0
    assert cli_main.main(["export", str(run_a), "--out", str(out)]) == 0  # the same run again: its own file
    exported = out.read_bytes()
    capsys.readouterr()
    err = _one_line_error(capsys, cli_main.main(["export", str(run_b), "--out", str(out)]))
    assert f"{out} holds an export of {run_a}" in err and "--out build/run_b.onnx" in err and "--force" in err
    assert out.read_bytes() == exported
    assert cli_main.main(["export", str(run_b), "--out", str(out), "--force"]) == 0
    assert out.read_bytes() != exported
    # a file no run exported (no card beside it) is kept too
    (tmp_path / "mine.onnx").write_bytes(b"my own")
    err = _one_line_error(capsys, cli_main.main(["export", str(run_a), "--out", str(tmp_path / "mine.onnx")]))
    assert "holds a model this run did not export" in err and (tmp_path / "mine.onnx").read_bytes() == b"my own"

    # the shipped model (a copy here, so that nothing shipped is at risk) and its card
    shipped = tmp_path / "models" / "default.onnx"
    shipped.parent.mkdir()
    shutil.copy(DEFAULT_ONNX, shipped)
    shutil.copy(DEFAULT_ONNX.with_suffix(".json"), shipped.with_suffix(".json"))
    monkeypatch.setattr(paths, "DEFAULT_MODEL", shipped)
    card = shipped.with_suffix(".json").read_bytes()
    err = _one_line_error(capsys, cli_main.main(["export", str(run_a), "--out", str(shipped)]))
    assert f"{shipped} is the shipped model, and default.json beside it its card" in err
    assert "--out build/run_a.onnx" in err
    err = _one_line_error(capsys, cli_main.main(["export", str(run_a), "--out", str(shipped.with_suffix(".json"))]))
    assert f"{shipped.with_suffix('.json')} is in the shipped model's folder" in err
    assert shipped.read_bytes() == DEFAULT_ONNX.read_bytes() and shipped.with_suffix(".json").read_bytes() == card


def _fifo(path: Path) -> Path:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes here")
    os.mkfifo(path)
    return path


def test_export_and_build_refuse_an_output_that_is_not_a_regular_file(two_runs: tuple[Path, Path], tmp_path: Path,
                                                                       capsys) -> None:
    # As root, `build --out /dev/full` replaced the device node with a file; a named pipe stands in for it here.
    pipe = _fifo(tmp_path / "pipe.onnx")
    err = _one_line_error(capsys, cli_main.main(["export", str(two_runs[0]), "--out", str(pipe), "--force"]))
    assert f"{pipe} is not a regular file" in err
    built = _fifo(tmp_path / "pipe.py")
    err = _one_line_error(capsys, cli_main.main(["build", "--out", str(built)]))
    assert f"cannot write {built}: not a regular file" in err
    assert stat.S_ISFIFO(pipe.stat().st_mode) and stat.S_ISFIFO(built.stat().st_mode)


def test_the_hint_for_the_shipped_checkpoint_exports_to_a_file_of_its_own(capsys) -> None:
    # it said `--out connectx_az/models/default.onnx`: over the shipped model and its card
    err = _one_line_error(capsys, cli_main.main(["build", "--model", str(paths.DEFAULT_CHECKPOINT)]))
    assert "--out build/default.onnx`" in err and "models/default.onnx" not in err
    assert hashlib.sha256(DEFAULT_ONNX.read_bytes()).hexdigest().startswith("003dff4de025")


# --------------------------------------------------------------------------- option values


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("duel", "--noise", "2", "--games", "1"), "--noise 2 must lie in [0, 1]"),  # it listed the settings that held
        (("duel", "--max-nodes", "0"), "--max-nodes 0 must be 1 or more"),
        (("eval", "pons", "--sims", "64", "0"), "--sims 0 must be positive"),
        (("eval", "value", "--bands", "0.2", "1.5"), "--bands 1.5 must lie in [0, 1)"),
        (("book", "--depth", "-1"), "--depth -1 must be zero or more"),
        (("book", "--depth", "2", "--table-bits", "40"), "--table-bits 40 must lie in 10..30"),
        (("bench", "solver", "--limit", "0"), "--limit 0 must be positive"),
        (("bench", "precision", "--sims", "-1"), "--sims -1 must be zero or more"),
        (("compare", "x.onnx", "--duel-opening", "4444444"), "--duel-opening 4444444: move 6: column 3 is full"),
    ],
)
def test_a_bad_option_value_names_itself_alone(args: tuple[str, ...], said: str, capsys) -> None:
    assert _one_line_error(capsys, cli_main.main(list(args))) == f"error: {said}\n"
