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
