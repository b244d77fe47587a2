"""The wheel that ``make kaggle`` puts in the Kaggle dataset works with numpy alone.

On Kaggle with Internet off, the notebook installs this wheel with ``--no-deps``;
building a submission must then need nothing the host lacks.  The test builds
the wheel, installs it into a fresh virtual environment that has only numpy,
and builds and runs a submission there; a command that needs more says what to
install, in one line.

The test needs a package registry once, to download numpy's wheel and the build
backend's (setuptools, wheel); everything after that is installed from those files
with ``--no-index``.  Where no registry answers the test is skipped, saying why.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def _download(folder: Path, *specs: str) -> str:
    """Download the wheels of ``specs`` and their dependencies into ``folder``; ``""``, or pip's last line of
    error if it could not."""
    done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--retries",
                           "1", "--timeout", "15", "--only-binary=:all:", "-d", str(folder), *specs],
                          capture_output=True, text=True, timeout=600)
    return "" if done.returncode == 0 else (done.stderr.strip().splitlines() or ["failed"])[-1]


def test_the_wheel_builds_a_submission_in_a_fresh_environment_with_only_numpy(tmp_path: Path) -> None:
    downloads = tmp_path / "downloads"
    problem = _download(downloads, f"numpy=={np.__version__}", "setuptools>=68", "wheel")
    if problem:
        pytest.skip(f"no package registry answers: pip download numpy, setuptools and wheel: {problem}")
    offline = ["--no-index", "--find-links", downloads]
    # built from a copy of the sources, so that setuptools' build folders stay out of the checkout
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".*", "build", "runs", "*.egg-info", "__pycache__"))
    wheels = tmp_path / "wheels"
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", *offline, "--no-deps", "-w", wheels,
         source)
    [wheel] = wheels.glob("connectx_az-*.whl")

    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    _run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *offline, f"numpy=={np.__version__}")
    _run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", wheel)
    listed = json.loads(_run(python, "-m", "pip", "list", "--format", "json").stdout)
    assert {p["name"].lower() for p in listed} - {"pip", "setuptools", "wheel"} == {"numpy", "connectx-az"}

    out = tmp_path / "submission.py"
    _run(env / "bin" / "connectx-az", "build", "--out", out, cwd=tmp_path)
    # the file plays a legal move in that environment, as Kaggle runs it (last callable of the file)
    move = _run(python, "-c", "import json, sys\n"
                "env = {}\n"
                "exec(compile(open(sys.argv[1]).read(), 'submission.py', 'exec'), env)\n"
                "agent = [v for v in env.values() if callable(v)][-1]\n"
                "col = agent({'board': [0] * 42, 'mark': 1, 'remainingOverageTime': 60},\n"
                "            {'rows': 6, 'columns': 7, 'inarow': 4, 'actTimeout': 0.3})\n"
                "print(json.dumps([type(col).__name__, col]))", out, cwd=tmp_path)
    kind, col = json.loads(move.stdout.strip().splitlines()[-1])
    assert kind == "int" and 0 <= col < 7
    # what a user who ran `make submission` alone meets next: `play` names what to install, in one line
    play = subprocess.run([env / "bin" / "connectx-az", "play"], cwd=tmp_path, input="q\n", capture_output=True,
                          text=True, timeout=120)
    assert play.returncode == 2 and play.stderr.count("\n") == 1, play.stderr
    assert play.stderr.startswith("error: `connectx-az play` needs onnxruntime, which is not installed") and \
        "`make install-eval`" in play.stderr and "pip install -e '.[eval]'" in play.stderr, play.stderr
