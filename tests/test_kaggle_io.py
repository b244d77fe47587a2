"""Running a file the way Kaggle does: what is refused as no submission, and the first-move check."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectx_az.evaluation import kaggle_io


@pytest.mark.parametrize(("content", "message"), [
    (b"", "it defines no callable agent"),
    (b"x = 1\n", "it defines no callable agent"),
    (b"def agent(:\n", "not Python (invalid syntax at line 1)"),
    (b"x = 1\x00\n", "not Python"),
    (bytes(range(128, 256)), "not a text file"),
    (b"raise RuntimeError('no model here\\nsecond line')\n", "executing it raised RuntimeError: no model here"),
    (b"import no_such_package_anywhere\n", "raised ModuleNotFoundError: No module named 'no_such_package_anywhere'"),
])
def test_a_file_that_is_no_submission_raises_one_line(content: bytes, message: str, tmp_path: Path) -> None:
    path = tmp_path / "submission.py"
    path.write_bytes(content)
    with pytest.raises(kaggle_io.SubmissionError) as caught:
        kaggle_io.load_submission(path)
    assert str(caught.value).startswith(f"{path} is not a submission: ") and message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        kaggle_io.load_submission(tmp_path / "missing.py")


@pytest.mark.parametrize(("body", "message"), [
    ("def main():\n    return 3\n", "its agent raised TypeError on the empty board"),
    ("def agent(observation, configuration):\n    return None\n", "its agent answered None on the empty board"),
    ("import numpy\ndef agent(observation, configuration):\n    return numpy.int64(3)\n", "answered np.int64(3)"),
    ("def agent(observation, configuration):\n    return 7\n", "answered 7 on the empty board, not a column"),
])
def test_first_move_refuses_an_agent_that_cannot_play(body: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "submission.py"
    path.write_text(body)
    with pytest.raises(kaggle_io.SubmissionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        kaggle_io.first_move(path)


def test_first_move_plays_an_agent_that_can(tmp_path: Path) -> None:
    path = tmp_path / "submission.py"
    path.write_text("def agent(observation, configuration):\n"
                    "    assert observation['remainingOverageTime'] == 15 and configuration['actTimeout'] == 0.5\n"
                    "    return sum(observation['board']) + 3\n")
    assert kaggle_io.first_move(path, act_timeout=0.5) == 3


def test_warm_up_compiles_the_solver_that_a_book_move_skips(tmp_path: Path) -> None:
    """The shipped book answers the empty board, so a first move compiles nothing; `warm_up` searches one
    with the book off and the bank full, and leaves numba's kernel to every later execution of the file
    (a Pons grading with an empty bank then plays with the compiled solver, as a game out of its book does)."""
    import subprocess
    import sys

    pytest.importorskip("numba")
    from connectx_az import paths
    from connectx_az.tools import builder

    sub = tmp_path / "sub.py"
    builder.build_submission(paths.DEFAULT_MODEL, sub)
    script = f"""
from connectx_az.evaluation import kaggle_io

def solver_with_an_empty_bank():  # a fresh execution of the file, as for each graded position
    agent, namespace = kaggle_io.exec_submission({str(sub)!r})
    namespace["_agent"].book_b64 = ""
    observation, configuration = kaggle_io.kaggle_inputs(0, 0, overage=0.0)
    agent(observation, configuration)
    return namespace["_agent"].solver_kind

kaggle_io.first_move({str(sub)!r})
print("after first move:", solver_with_an_empty_bank())
kaggle_io.warm_up({str(sub)!r})
print("after warm-up:", solver_with_an_empty_bank())
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["after first move: python", "after warm-up: numba"], out.stdout


#: files whose agent breaks on its second move (the first is a legal column 3), and what validation says of each
BROKEN_LATER = {
    "raises.py": ("raise ValueError('no column\\nsecond line')",
                  "ply 2: its agent raised ValueError: no column"),
    "nine.py": ("return 9", "ply 2: its agent answered 9, not a legal column"),
    "numpy_int.py": ("import numpy\n        return numpy.int64(2)",
                     "ply 2: its agent answered np.int64(2), not a legal"),
}


@pytest.mark.parametrize("name", BROKEN_LATER)
def test_validate_stops_at_the_first_broken_move_and_says_what_it_did(name: str, tmp_path: Path) -> None:
    pytest.importorskip("kaggle_environments")
    body, message = BROKEN_LATER[name]
    path = tmp_path / name
    path.write_text("def agent(observation, configuration):\n    if sum(observation['board']) == 0:\n"
                    f"        return 3\n    else:\n        {body}\n")
    with pytest.raises(kaggle_io.SubmissionError) as caught:
        kaggle_io.validate(path, opponents=("random",), games=3, replay_dir=tmp_path / "replays")
    assert str(caught.value).startswith(f"{path}, game 1 against random (seat 1), {message}")
    assert str(caught.value).endswith("; validation stops at the file's first broken move")
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "replays").exists()  # no replay of a broken file


def test_check_network_names_the_backend_of_a_good_file_and_leaves_a_file_of_another_kind_alone(
        tmp_path: Path) -> None:
    from connectx_az import paths
    from connectx_az.tools import builder

    builder.build_submission(paths.DEFAULT_MODEL, tmp_path / "good.py", book_path=None)
    assert kaggle_io.check_network(tmp_path / "good.py") in ("onnxruntime", "numpy")
    (tmp_path / "plain.py").write_text("def agent(observation, configuration):\n    return 3\n")
    assert kaggle_io.check_network(tmp_path / "plain.py") == ""


def test_a_game_the_book_played_reports_no_backend_as_none_needed_not_as_a_failure() -> None:
    from types import SimpleNamespace

    from connectx_az.evaluation import reports

    book_only = {"_agent": SimpleNamespace(backend="", solver_kind="")}
    assert kaggle_io._submission_backend(book_only) == kaggle_io._submission_solver(book_only) == "none needed"
    searched = {"_agent": SimpleNamespace(backend="numpy", solver_kind="python")}
    assert (kaggle_io._submission_backend(searched), kaggle_io._submission_solver(searched)) == ("numpy", "python")
    assert "none needed: the book, forced moves or the solver chose every move" in " ".join(
        reports.validate_report([], runtime="numpy", replays="build/replays/x"))
