"""The Makefile's installs: a Python too old is refused before anything is made, a venv left by one says how to
start over, and the torch build (TORCH, TORCH_SPEC) is recorded so that changing it really reinstalls torch.

Nothing here installs anything: the venvs are folders with a fake ``python``, and the torch rules are read with
``make -n`` (what make would run).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    # a make of its own, not a sub-make of `make test` (whose messages say make[1]: and whose flags it would inherit)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    return subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), *args], capture_output=True, text=True,
                          timeout=60, env=env)


def _fake_python(path: Path, version: str) -> Path:
    """An executable that says it is Python ``version`` and fails every ``-c`` check, as a Python 3.10 would."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && echo 'Python {version}' && exit 0\nexit 1\n")
    path.chmod(0o755)
    return path


def test_a_python_too_old_is_refused_in_one_line_before_the_venv_is_made(tmp_path: Path) -> None:
    python = _fake_python(tmp_path / "bin" / "python3", "3.10.12")
    venv = tmp_path / "venv"
    done = _make("submission", f"PYTHON={python}", f"VENV={venv}")
    assert done.returncode != 0
    assert done.stdout.strip() == (f"error: connectx-az needs Python >= 3.11, and {python} is Python 3.10.12: "
                                   "run make again with PYTHON=python3.11 or newer")
    assert not venv.exists()  # nothing half made: the retry with another PYTHON starts clean


def test_a_venv_left_by_an_older_python_says_how_to_start_over(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _fake_python(venv / "bin" / "python", "3.10.12")
    done = _make("submission", f"VENV={venv}")
    assert done.returncode != 0
    assert done.stdout.strip() == (f"error: {venv} holds Python 3.10.12, and connectx-az needs Python >= 3.11: run "
                                   f"`make distclean` (removes {venv}), then make again with PYTHON=python3.11 or "
                                   "newer")
    assert sorted(p.name for p in venv.iterdir()) == ["bin"]
    assert "rm -rf " + str(venv) in _make("-n", "distclean", f"VENV={venv}").stdout
    assert str(venv) not in _make("-n", "clean", f"VENV={venv}").stdout  # clean keeps the venv


def _installed_venv(tmp_path: Path, torch_choice: str | None) -> Path:
    """A venv whose stamps say that everything is installed, torch as ``torch_choice`` records (None: no record)."""
    venv = tmp_path / "venv"
    _fake_python(venv / "bin" / "python", "3.11.7")
    if torch_choice is not None:
        (venv / ".torch").write_text(torch_choice + "\n")
    for stamp in (".core", ".train", ".test", ".validate"):
        (venv / stamp).touch()
    return venv


def test_the_torch_build_is_cpu_by_default_and_a_changed_choice_reinstalls_it(tmp_path: Path) -> None:
    venv = _installed_venv(tmp_path, "cpu torch==2.13.0")
    for target in ("install-train", "install-test"):  # as recorded: nothing to do
        assert _make("-n", target, f"VENV={venv}").stdout.strip() == f"make: Nothing to be done for '{target}'."

    # the README's CUDA line, and a bare TORCH_SPEC: torch is uninstalled, installed as asked, and recorded
    for args, install, record in ((["TORCH=cuda"], 'install --no-deps  "torch==2.13.0"', "cuda torch==2.13.0"),
                                  (["TORCH_SPEC=torch"], "install --no-deps --extra-index-url https://download."
                                                         'pytorch.org/whl/cpu "torch"', "cpu torch")):
        plan = _make("-n", "install-train", f"VENV={venv}", *args).stdout
        assert "uninstall -y torch" in plan and install in plan, plan
        assert f"echo '{record}' > {venv}/.torch" in plan
        assert 'install -e ".[train]"' in plan  # and the extra again, over the new torch

    # a plain call keeps the torch recorded, whichever it is
    cuda = _installed_venv(tmp_path / "cuda", "cuda torch==2.13.0")
    assert _make("-n", "install-test", f"VENV={cuda}").stdout.strip() == "make: Nothing to be done for 'install-test'."
    assert "uninstall -y torch" in _make("-n", "install-test", f"VENV={cuda}", "TORCH=cpu").stdout

    # a venv made before the record keeps a torch that satisfies the pin (pip finds it installed)
    fresh = _installed_venv(tmp_path / "old", None)
    plan = _make("-n", "install-train", f"VENV={fresh}").stdout
    assert "--no-deps --extra-index-url https://download.pytorch.org/whl/cpu \"torch==2.13.0\"" in plan
    assert "echo 'cpu torch==2.13.0'" in plan

    wrong = _make("-n", "install-train", f"VENV={venv}", "TORCH=gpu")
    assert wrong.returncode != 0 and 'TORCH must be cpu or cuda, not "gpu"' in wrong.stderr


def test_the_makefile_pin_of_torch_satisfies_pyproject() -> None:
    from packaging.requirements import Requirement

    pin = re.search(r"^TORCH_SPEC \?= (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert pin is not None
    pyproject = (ROOT / "pyproject.toml").read_text()
    wanted = Requirement(re.search(r'"(torch[^"]*)"', pyproject)[1])
    pinned = Requirement(pin[1])
    assert wanted.name == pinned.name == "torch"
    [version] = [spec.version for spec in pinned.specifier]
    assert wanted.specifier.contains(version)


def test_make_alone_prints_the_targets_and_makes_nothing(tmp_path: Path) -> None:
    done = _make(f"VENV={tmp_path / 'venv'}")
    assert done.returncode == 0 and done.stdout.startswith("make submission "), done.stdout
    assert not (tmp_path / "venv").exists()


def test_clean_removes_what_the_commands_wrote_and_keeps_an_exported_model(tmp_path: Path) -> None:
    kept = ["build/mine.onnx", "build/mine.json", "build/book/state.bin"]
    removed = ["build/submission.py", "build/submission_mine.py", "build/replays/submission/random_seat1.html",
               "build/compare/mine/compare.json", "build/duel_cache.sqlite", "build/kaggle/train.ipynb"]
    for name in kept + removed:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    done = subprocess.run(["make", "--no-print-directory", "-f", str(ROOT / "Makefile"), "clean"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()) == sorted(kept)


def test_gpu_check_says_in_one_line_what_it_lacks(tmp_path: Path) -> None:
    no_torch = _fake_python(tmp_path / "bin" / "python3", "3.11.7")
    done = _make("gpu-check", f"GPU_PYTHON={no_torch}")
    assert done.returncode != 0 and done.stdout.strip().startswith("error: make gpu-check needs a Python with torch")
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is here")
    import sys

    done = _make("gpu-check", f"GPU_PYTHON={sys.executable}")
    assert done.returncode != 0 and done.stdout.strip() == (
        f"error: make gpu-check measures a CUDA GPU, and the torch of {sys.executable} sees none here (no GPU, or a "
        "CPU build of torch: make install-train TORCH=cuda)")
