"""``notebooks/train.ipynb`` runs headless on CPU (smoke preset) and builds a working submission.

Part of the default ``make test`` (not marked slow): the smoke preset, two tiny
generations, one validation game per opponent and seat on a short move clock.

The notebook is executed by nbclient in a kernel started with this very
interpreter (a kernel spec written to ``tmp_path``), with ``connectx_az``
importable through ``PYTHONPATH``.  Parameters are injected after the cell
tagged ``parameters``, as papermill does, so every file the notebook writes
lands in ``tmp_path``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("kaggle_environments")

from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402  (after the skips)
from jupyter_client.manager import KernelManager  # noqa: E402

from connectx_az.evaluation import kaggle_io  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK = REPO / "notebooks" / "train.ipynb"
GENERATIONS = 2
ACT_TIMEOUT = 0.2  # seconds a move in validation, instead of Kaggle's 2 s


def _kernel_manager(tmp_path: Path) -> KernelManager:
    """A ``python3`` kernel running ``sys.executable``, whatever kernel specs are installed."""
    spec_dir = tmp_path / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (test)", "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    specs = KernelSpecManager(kernel_dirs=[str(spec_dir.parent)], ensure_native_kernel=False)
    return KernelManager(kernel_name="python3", kernel_spec_manager=specs)


def _with_parameters(nb: Any, parameters: dict[str, Any]) -> Any:
    """Insert a cell assigning ``parameters`` right after the ``parameters`` cell."""
    index = next(i for i, cell in enumerate(nb.cells) if "parameters" in cell.metadata.get("tags", []))
    source = "\n".join(f"{name} = {value!r}" for name, value in parameters.items())
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
    nb.cells.insert(index + 1, cell)
    return nb


def _outputs(nb: Any) -> tuple[str, set[str]]:
    """All text the cells printed or displayed, and the MIME types of their rich outputs."""
    texts, mimes = [], set()
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                texts.append(out["text"])
            for mime, value in out.get("data", {}).items():
                mimes.add(mime)
                if mime in ("text/plain", "text/markdown"):
                    texts.append(value)
    return "\n".join(texts), mimes


def test_notebook_trains_exports_builds_and_validates_on_cpu(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    run_dir, out_dir = work / "run", work / "out"
    nb = _with_parameters(nbformat.read(NOTEBOOK, as_version=4), {
        "PRESET": "smoke",
        "RUN_DIR": str(run_dir),
        "OUT_DIR": str(out_dir),
        "GENERATIONS": GENERATIONS,
        "VALIDATE_GAMES": 1,
        "ACT_TIMEOUT": ACT_TIMEOUT,
        "OVERRIDES": ["selfplay.num_games=4", "selfplay.num_parallel_games=4", "eval_positions=4"],
        # the quick compare's steps on one position a set, one game a seat, numpy alone
        "COMPARE": {"limit": 1, "network_limit": 1, "games": 1, "act_timeout": ACT_TIMEOUT, "duel_opening": "4444333",
                    "runtimes": ["numpy"]},
    })
    # the kernel inherits this environment: the package from this checkout, no GPU, no stray threads
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")

    client = nbclient.NotebookClient(nb, km=_kernel_manager(tmp_path), timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(work)}})
    client.execute()

    text, mimes = _outputs(nb)
    assert str(REPO / "connectx_az") in text  # the checkout, not some installed copy
    assert "image/png" in mimes  # the training plots were displayed
    train_cell = next(c for c in nb.cells if "train.run(" in c.source)
    pngs = [o for o in train_cell.outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 1  # redrawn in place after each generation, not stacked
    assert f"generation {GENERATIONS}/{GENERATIONS} done" in text
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["generation"] for r in rows] == list(range(GENERATIONS))
    assert (out_dir / "model.onnx").is_file() and (out_dir / "model.json").is_file()
    assert "| negamax | 2 |" in text and "| random | 1 |" in text
    assert sorted(p.name for p in (out_dir / "replays").iterdir()) == [
        "negamax_seat1.html", "negamax_seat2.html", "random_seat1.html", "random_seat2.html"]
    assert "numpy runtime, under the clock" in text and "network alone, MCTS 800" in text
    [compared] = (out_dir / "compare").glob("*/verdict.json")
    upload = out_dir / "submission.py" if json.loads(compared.read_text())["ships"] else compared.parent / "shipped.py"
    assert f"Upload {upload}" in text  # the sentence that says which file to upload
    assert f"kaggle competitions submit -c connectx -f {upload} -m " in text
    assert sorted(p.name for p in work.iterdir()) == ["out", "run"]  # nothing written elsewhere

    # Kaggle executes the file in an empty namespace and calls the last callable it defines
    agent = kaggle_io.load_submission(out_dir / "submission.py")
    move = agent(*kaggle_io.kaggle_inputs(0, 0, act_timeout=1.0, overage=0))
    assert type(move) is int and 0 <= move < 7


def test_notebook_stops_at_its_time_budget_and_a_new_session_resumes_the_attached_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Session 1 trains until TIME_BUDGET, then still exports and builds; session 2 finds that run
    among its inputs (as Kaggle shows a saved version's output), copies it and finishes it.

    The budget, 0.1 s, is shorter than any generation (a smoke generation plays and trains for well over
    0.1 s on any machine) and far longer than the instant before the first one: the first generation always
    runs (nothing says how long one takes yet) and the second never does, however fast or loaded the machine."""
    import shutil

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    generations = 8
    common = {"PRESET": "smoke", "GENERATIONS": generations, "VALIDATE_GAMES": 0, "COMPARE": None,
              "OVERRIDES": ["selfplay.num_games=8", "selfplay.num_parallel_games=8", "eval_positions=4"]}

    def execute(work: Path, **parameters: Any) -> str:
        work.mkdir()
        nb = _with_parameters(nbformat.read(NOTEBOOK, as_version=4), {**common, **parameters})
        client = nbclient.NotebookClient(nb, km=_kernel_manager(work), timeout=300, kernel_name="python3",
                                         resources={"metadata": {"path": str(work)}})
        client.execute()
        return _outputs(nb)[0]  # stdout and stderr (the time budget's logged line) alike

    first = tmp_path / "first"
    text = execute(first, RUN_DIR=str(first / "run"), OUT_DIR=str(first / "out"), TIME_BUDGET="0.1s",
                   KAGGLE_INPUT=str(tmp_path / "no-input"))
    done = len((first / "run" / "metrics.jsonl").read_text().splitlines())
    assert done == 1
    assert f"training stopped at generation {done} of {generations} (TIME_BUDGET 0.1s)" in text
    assert f"time budget: stopped before generation {done} of {generations}" in text
    assert (first / "out" / "submission.py").is_file()  # built from the last checkpoint all the same
    assert "validation skipped" in text

    inputs = tmp_path / "input"
    shutil.copytree(first / "run", inputs / "connectx-notebook" / "runs" / "connectx_az")
    second = tmp_path / "second"
    text = execute(second, RUN_DIR=str(second / "run"), OUT_DIR=str(second / "out"), TIME_BUDGET=None,
                   KAGGLE_INPUT=str(inputs))
    assert f"copied the run in {inputs / 'connectx-notebook' / 'runs' / 'connectx_az'}" in text
    assert f"it resumes at generation {done}" in text and "resuming the run in" in text
    rows = [json.loads(line) for line in (second / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["generation"] for r in rows] == list(range(generations))
    assert f"generation {generations}/{generations} done" in text
    assert (second / "out" / "submission.py").is_file()
    assert len((inputs / "connectx-notebook" / "runs" / "connectx_az" / "metrics.jsonl").read_text().splitlines()) \
        == done  # the attached input is left as it was


def _install_functions() -> dict[str, Any]:
    """The install cell's functions, defined without running anything."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "def package_source(" in c.source)
    namespace: dict[str, Any] = {}
    exec(compile(cell.source, "install-cell", "exec"), namespace)
    return namespace


def test_the_install_cell_prefers_an_attached_wheel_then_the_clone_then_the_pip_spec(tmp_path: Path) -> None:
    cell = _install_functions()
    package_source = cell["package_source"]
    spec = ""  # the notebook's default: no pip spec
    inputs, elsewhere = tmp_path / "input", tmp_path / "elsewhere"
    elsewhere.mkdir()
    # nothing found and no spec: one line that says what to do, no pip traceback
    with pytest.raises(SystemExit) as stopped:
        package_source(spec, inputs, elsewhere)
    assert str(stopped.value) == (f"connectx_az is not installed, and neither a connectx_az wheel under {inputs} nor "
                                  f"a clone of the repository in {elsewhere} was found: attach the dataset made by "
                                  "`make kaggle` (Add input), or clone the repository into the working folder, or "
                                  "set PACKAGE_SPEC")
    assert package_source("connectx-az==0.1.0", inputs, elsewhere) == ("spec", "connectx-az==0.1.0")
    # the notebook inside a clone, or a clone in the working folder (`git clone --depth 1 URL` on Colab)
    assert package_source(spec, inputs, REPO / "notebooks") == ("clone", REPO)
    clone = elsewhere / "connectx_az"
    (clone / "connectx_az").mkdir(parents=True)
    (clone / "pyproject.toml").write_text("")
    assert package_source(spec, inputs, elsewhere) == ("clone", clone)
    # a wheel in an attached dataset wins over everything
    wheel = inputs / "connectx-az-package" / "connectx_az-0.1.0-py3-none-any.whl"
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"")
    assert package_source(spec, inputs, REPO / "notebooks") == ("wheel", wheel)


def test_notebook_times_a_new_run_by_train_time_and_sizes_it_to_the_machine(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    work = tmp_path / "work"
    work.mkdir()
    nb = _with_parameters(nbformat.read(NOTEBOOK, as_version=4), {
        "PRESET": "smoke", "RUN_DIR": str(work / "run"), "OUT_DIR": str(work / "out"), "TRAIN_TIME": "3s",
        "VALIDATE_GAMES": 0, "COMPARE": None, "KAGGLE_INPUT": str(tmp_path / "no-input"),
        "OVERRIDES": ["selfplay.num_games=4", "selfplay.num_parallel_games=4", "eval_positions=0"]})
    client = nbclient.NotebookClient(nb, km=_kernel_manager(tmp_path), timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(work)}})
    client.execute()
    text = _outputs(nb)[0]
    assert "machine: " in text and "games in flight, 4 games" in text  # the user's games kept, the rest sized
    assert "3 s of training in all" in text
    rows = [json.loads(line) for line in (work / "run" / "metrics.jsonl").read_text().splitlines()]
    assert f"generation {len(rows)} done (" in text and "generations expected in all" in text
    assert f"the run is complete: {len(rows)} generations" in text
    assert (rows[-2]["run_seconds"] if len(rows) > 1 else 0.0) <= 3  # the last generation began inside the time
    assert json.loads((work / "run" / "config.json").read_text())["total_time"] == 3.0
    assert (work / "out" / "submission.py").is_file()


def test_the_submit_command_names_the_file_by_its_whole_path_so_it_can_be_typed_anywhere(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # The notebook runs in notebooks/; its default OUT_DIR, "build", is notebooks/build.  The command it printed,
    # `-f build/submission.py`, typed from the clone's root uploaded the shipped file instead of the user's.
    from types import SimpleNamespace

    nb = nbformat.read(NOTEBOOK, as_version=4)
    last = [cell for cell in nb.cells if cell.cell_type == "code"][-1]
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    monkeypatch.chdir(notebooks)
    for upload, message in ((Path("build") / "submission.py", "connectx_az 1x16, 2 generations, model abcdefabcdef"),
                            (Path("build") / "compare" / "x" / "shipped.py", "connectx_az, the shipped model")):
        exec(last.source, {"Path": Path, "UPLOAD": upload, "SUBMISSION": Path("build") / "submission.py",
                           "EXPORT": SimpleNamespace(net_label="1x16", sha256="abcdef" * 10), "done": 2})
        assert capsys.readouterr().out == (f"kaggle competitions submit -c connectx -f {notebooks / upload} "
                                           f'-m "{message}"\n')
