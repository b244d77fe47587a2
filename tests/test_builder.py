"""The built submission: one file that runs Kaggle's way in a fresh process without the package."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import connectx_az
from connectx_az.agent import backends
from connectx_az.evaluation import kaggle_io
from connectx_az.tools import builder
from connectx_az.training import export

PACKAGE = Path(connectx_az.__file__).resolve().parent

# Runs in a fresh interpreter: block the package, onnxruntime and torch, execute the
# file as Kaggle does (empty globals, last callable), play a few moves, score positions.
_RUNNER = kaggle_io.sandbox_prelude() + textwrap.dedent('''
    import json, sys, time
    import numpy as np

    for name in ("connectx_az", "onnxruntime", "torch"):
        try:
            __import__(name)
        except ImportError:
            pass
        else:
            raise SystemExit(name + " could be imported")

    submission, positions, out = sys.argv[1:4]
    agent, env = exec_submission(submission)

    # a few plies of one game, the agent playing both sides
    rows, columns = 6, 7
    board = [0] * (rows * columns)
    moves = []
    for ply in range(8):
        mark = 1 + ply % 2
        observation, configuration = kaggle_dicts(board, mark, ply, 2.0, 0.4)
        start = time.perf_counter()
        move = agent(observation, configuration)
        seconds = time.perf_counter() - start
        assert type(move) is int and 0 <= move < columns and board[move] == 0, move
        row = max(r for r in range(rows) if board[r * columns + move] == 0)
        board[row * columns + move] = mark
        moves.append({"move": move, "seconds": seconds})

    player = env["_agent"]
    evaluator = player.load_model()
    logits, value = evaluator.evaluate(np.load(positions))
    np.savez(out, logits=logits, value=value)
    print(json.dumps({
        "agent": agent.__name__, "moves": moves, "backend": player.backend,
        "load_error": player.load_error, "solver": env["_template"].solver is not None,
        "modules": sorted(m for m in sys.modules if m.startswith("connectx")),
    }))
''')


def _run_fresh(submission: Path, tmp_path: Path) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray]:
    positions = export.random_positions(32, np.random.default_rng(21))
    np.save(tmp_path / "positions.npy", positions)
    runner = tmp_path / "runner.py"
    runner.write_text(_RUNNER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["OMP_NUM_THREADS"] = "1"
    args = [str(runner), str(submission), str(tmp_path / "positions.npy"), str(tmp_path / "out.npz")]
    done = subprocess.run(
        [sys.executable, "-I", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    out = np.load(tmp_path / "out.npz")
    return result, positions, out["logits"], out["value"]


@pytest.mark.parametrize("fixture", ["small_onnx", "small_onnx16"])
def test_submission_runs_alone_like_kaggle(fixture, request, tmp_path):
    model_path: Path = request.getfixturevalue(fixture)
    out = tmp_path / "submission.py"
    report = builder.build_submission(model_path, out, metadata={"generation": 7, "note": "test"})
    assert report.path == out and report.num_bytes == out.stat().st_size
    assert report.model_sha256 == export.model_card(model_path)["sha256"] and report.net_label == "1x16"

    result, positions, logits, value = _run_fresh(out, tmp_path)
    assert result["agent"] == "agent" and result["backend"] == "numpy", result["load_error"]
    assert result["solver"]
    assert "connectx_az" not in result["modules"]
    assert "connectx_az_submission.game" in result["modules"]
    assert len(result["moves"]) == 8

    ref_logits, ref_value = backends.OnnxRuntimeEvaluator(model_path).evaluate(positions)
    assert np.abs(logits - ref_logits).max() <= 1e-4 and np.abs(value - ref_value).max() <= 1e-4


def test_file_layout(small_onnx, tmp_path):
    out = tmp_path / "submission.py"
    report = builder.build_submission(small_onnx, out, metadata={"generation": 7})
    text = out.read_text()
    for rel in ("engine/game.py", "engine/mcts.py", "engine/solver.py", "agent/onnx_numpy.py", "agent/fallback.py",
                "agent/backends.py", "agent/template.py"):
        assert (PACKAGE / rel).read_text() in text, rel  # the same tested source, verbatim
    assert "GumbelConfig" not in text and "_considered_visits" not in text  # self-play's Gumbel root stays home
    assert report.model_sha256 in text.split("\n", 3)[2]  # header names the model
    assert '"generation": 7' in text and "1x16" in text
    module = ast.parse(text)
    last = module.body[-1]
    assert isinstance(last, ast.FunctionDef) and last.name == "agent"
    assert [a.arg for a in last.args.args] == ["observation", "configuration"]
    # nothing at top level imports the package, torch or onnxruntime
    for node in module.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            assert all(n.split(".")[0] in sys.stdlib_module_names for n in names), names


def test_import_rewriting_covers_the_template_forms():
    rewrite = builder._loader_namespace()["_rewrite_imports"]
    source = ("from connectx_az.engine import game, mcts\n"
              "    from connectx_az.agent import onnx_numpy as onx  # x\nx = 1")
    assert rewrite(source).splitlines() == [
        "game, mcts = _pasted('game'), _pasted('mcts')",
        "    onx = _pasted('onnx_numpy')",
        "x = 1",
    ]


def test_corrupt_or_missing_model_is_refused(small_onnx, tmp_path):
    out = tmp_path / "submission.py"
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(small_onnx.read_bytes()[:500])
    with pytest.raises(builder.BuildError, match="cannot run in the submission"):
        builder.build_submission(bad, out)
    with pytest.raises(builder.BuildError, match="does not exist"):
        builder.build_submission(tmp_path / "missing.onnx", out)
    with pytest.raises(builder.BuildError, match="expected"):
        builder.build_submission(small_onnx, out, expected_sha256="0" * 64)
    assert not out.exists()


def test_bad_output_folder_and_size_limit(small_onnx, tmp_path, monkeypatch):
    # A missing folder is created (a fresh clone has no build/); a path through a file is refused.
    nested = tmp_path / "no" / "such" / "dir" / "submission.py"
    builder.build_submission(small_onnx, nested)
    assert nested.is_file()
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(builder.BuildError, match="cannot create output folder"):
        builder.build_submission(small_onnx, a_file / "submission.py")
    monkeypatch.setattr(builder, "MAX_BYTES", 10_000)
    out = tmp_path / "submission.py"
    with pytest.raises(builder.BuildError, match="over the"):
        builder.build_submission(small_onnx, out)
    assert not out.exists() and not list(tmp_path.glob(".*.tmp"))


def test_sources_with_foreign_imports_are_refused(small_onnx, tmp_path, monkeypatch):
    fake = tmp_path / "pkg"
    shutil.copytree(PACKAGE, fake, ignore=shutil.ignore_patterns("__pycache__", "data"))
    template = fake / "agent" / "template.py"
    template.write_text(template.read_text().replace("import numpy as np\n", "import numpy as np\nimport numba\n", 1))
    monkeypatch.setattr(builder, "PACKAGE_DIR", fake)
    with pytest.raises(builder.BuildError, match="imports 'numba' at the top level"):
        builder.build_submission(small_onnx, tmp_path / "submission.py")
    template.write_text(template.read_text().replace("import numba\n", "import scipy\n", 1))
    with pytest.raises(builder.BuildError, match="imports 'scipy'; the submission may use only"):
        builder.build_submission(small_onnx, tmp_path / "submission.py")


def test_the_file_carries_the_agents_import_closure_and_nothing_else(small_onnx, tmp_path, monkeypatch):
    fake = tmp_path / "pkg"
    shutil.copytree(PACKAGE, fake, ignore=shutil.ignore_patterns("__pycache__", "data"))
    # a training-only helper in engine/ that the agent never imports, and one the search starts to import
    (fake / "engine" / "trainer_helper.py").write_text('"""Training only."""\n\nVALUE = 1\n')
    (fake / "engine" / "search_helper.py").write_text('"""Imported by the search."""\n\nVALUE = 2\n')
    mcts_py = fake / "engine" / "mcts.py"
    imports = "from connectx_az.engine import game, jit, search_tree"
    mcts_py.write_text(mcts_py.read_text().replace(imports, imports.replace("jit,", "jit, search_helper,")))
    monkeypatch.setattr(builder, "PACKAGE_DIR", fake)
    modules = dict(builder.pasted_modules())
    assert "trainer_helper" not in modules and modules["search_helper"] == "engine/search_helper.py"
    names = list(modules)
    assert names[-1] == "template" and names.index("search_helper") < names.index("mcts")  # imports load first
    assert {"game", "search_tree", "mcts", "jit", "solver", "solver_numba", "book", "backends", "fallback",
            "onnx_numpy", "onnx_proto"} <= set(names)
    out = tmp_path / "submission.py"
    builder.build_submission(small_onnx, out)
    text = out.read_text()
    assert "Training only." not in text and "Imported by the search." in text


@pytest.mark.slow
def test_full_game_in_kaggle_environments(small_onnx, tmp_path):
    """A whole game against kaggle-environments' random agent, in a fresh process."""
    pytest.importorskip("kaggle_environments")
    out = tmp_path / "submission.py"
    builder.build_submission(small_onnx, out)
    script = tmp_path / "game.py"
    script.write_text(textwrap.dedent(f'''
        import json
        from kaggle_environments import make
        env = make("connectx", configuration={{"actTimeout": 1}}, debug=True)
        steps = env.run([{str(out)!r}, "random"])
        last = steps[-1]
        print(json.dumps([[s["status"], s["reward"]] for s in last]))
    '''))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["OMP_NUM_THREADS"] = "1"
    done = subprocess.run([sys.executable, "-I", str(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    statuses = json.loads(done.stdout.strip().splitlines()[-1])
    assert statuses[0][0] == "DONE" and statuses[0][1] is not None
