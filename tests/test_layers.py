"""The import direction between the package's layers, read from every module's source with ``ast``.

``engine/`` and ``agent/`` (less its two writers) are pasted into ``submission.py``: they import
only the standard library, numpy and each other, an optional package (numba, onnxruntime, torch)
only inside a function or a ``try`` that catches ``ImportError``.  ``evaluation/`` imports
``training/`` only inside functions, so grading never needs torch.  Nothing but tests imports
``cli``; ``cli`` and the top-level support modules import no heavy package at module level; the
``__init__`` files import nothing.  And the builder pastes exactly the engine and agent modules.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import connectx_az
from connectx_az.agent import builder

PACKAGE = Path(connectx_az.__file__).resolve().parent
LAYERS = ("engine", "agent", "training", "evaluation")
#: agent/ modules that write files and are not pasted
WRITERS = {"builder", "book_build"}
#: the only imports of training/ by a writer: book_build proves its entries in solved's forked prover pool
WRITER_TRAINING_IMPORTS = {("agent.book_build", "training.solved")}
STDLIB = set(sys.stdlib_module_names) | {"__future__"}


@dataclass(frozen=True)
class Import:
    module: str  # absolute dotted name: "numpy", "connectx_az.engine.game"
    line: int
    top_level: bool  # at import time of the module (not inside a function)
    guarded: bool  # inside a function, or a try whose handlers catch ImportError


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return handler.type is None or any(isinstance(n, ast.Name) and n.id in (
        "ImportError", "ModuleNotFoundError", "Exception", "BaseException") for n in names)


def imports_of(source: str) -> list[Import]:
    """Every import in ``source``, each ``from a import b`` as ``a.b`` where ``a`` is the package (``b`` a module)."""
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool, in_try: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                if isinstance(child, ast.Import):
                    names = [a.name for a in child.names]
                else:
                    assert child.level == 0, f"relative import at line {child.lineno}"
                    module = child.module or ""
                    is_package = module == "connectx_az" or module in {f"connectx_az.{layer}" for layer in LAYERS}
                    names = [f"{module}.{a.name}" for a in child.names] if is_package else [module]
                found.extend(Import(n, child.lineno, not in_function, in_function or in_try) for n in names)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(child, True, in_try)
            elif isinstance(child, ast.Try):
                guarded = any(_catches_import_error(h) for h in child.handlers)
                for stmt in child.body:
                    visit(ast.Module(body=[stmt], type_ignores=[]), in_function, in_try or guarded)
                for part in (*child.handlers, *child.orelse, *child.finalbody):
                    visit(part if isinstance(part, ast.ExceptHandler) else ast.Module(body=[part], type_ignores=[]),
                          in_function, in_try)
            else:
                visit(child, in_function, in_try)

    visit(ast.parse(source), False, False)
    return found


def layer_of(name: str) -> str:
    """``engine``, ``agent``, ``training``, ``evaluation``, ``cli``, ``support`` or ``package`` for a
    dotted name under ``connectx_az``; ``stdlib``, ``numpy`` or ``third-party`` otherwise."""
    parts = name.split(".")
    if parts[0] != "connectx_az":
        return "stdlib" if parts[0] in STDLIB else "numpy" if parts[0] == "numpy" else "third-party"
    if len(parts) == 1:
        return "package"
    return parts[1] if parts[1] in (*LAYERS, "cli") else "support"


def _modules() -> dict[str, Path]:
    """``"engine.game"``, ``"cli"``, ``"evaluation.bench_probes.probe_clock"``... -> path."""
    return {".".join(p.relative_to(PACKAGE).with_suffix("").parts): p for p in sorted(PACKAGE.rglob("*.py"))
            if "__pycache__" not in p.parts}


MODULES = _modules()


def is_pasted(module: str) -> bool:
    parts = module.split(".")
    return len(parts) == 2 and (parts[0] == "engine" or parts[0] == "agent" and parts[1] not in WRITERS) \
        and parts[1] != "__init__"


def violations(module: str, source: str) -> list[str]:
    """What ``module`` (a key of ``MODULES``) imports against the layers' rules, one line each."""
    layer = module.split(".")[0] if "." in module else ("cli" if module == "cli" else "support")
    if module.endswith("__init__"):
        return [f"{module}:{i.line} imports {i.module} (an __init__ imports nothing)"
                for i in imports_of(source) if i.module != "__future__"]
    out = []
    for i in imports_of(source):
        target = layer_of(i.module)
        where = f"{module}:{i.line} imports {i.module}"
        if target == "cli" or target == "package":
            out.append(f"{where}: only tests import cli, and nothing imports the bare package")
        elif is_pasted(module):
            allowed = {"stdlib", "numpy", "engine"} | ({"agent"} if layer == "agent" else set())
            if target == "third-party":
                if i.module.split(".")[0] not in builder._OPTIONAL_IMPORTS:
                    out.append(f"{where}: pasted code may use only the standard library, numpy and "
                               f"{sorted(builder._OPTIONAL_IMPORTS)}")
                elif not i.guarded:
                    out.append(f"{where}: an optional package goes inside a function or a try/except ImportError")
            elif target not in allowed:
                out.append(f"{where}: {layer} is pasted and may import only {sorted(allowed)}")
            elif target == "agent" and i.module.split(".")[-1] in WRITERS:
                out.append(f"{where}: the writers are not pasted")
        elif layer == "agent":  # the writers
            pair = (module, ".".join(i.module.split(".")[1:3]))
            if target == "evaluation" or target == "training" and pair not in WRITER_TRAINING_IMPORTS:
                out.append(f"{where}: a writer imports engine, agent and support modules (training only as "
                           "listed in WRITER_TRAINING_IMPORTS)")
        elif layer == "evaluation":
            if target == "training" and i.top_level:
                out.append(f"{where}: evaluation imports training only inside the function that needs it")
        elif layer in ("support", "cli"):
            if target in LAYERS and (layer == "support" or i.top_level):
                out.append(f"{where}: {layer} imports the layers {'never' if layer == 'support' else 'lazily'}")
            if target == "third-party" and i.top_level:
                out.append(f"{where}: {layer} imports no third-party package at module level")
    return out


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_flow_one_way(module: str) -> None:
    assert violations(module, MODULES[module].read_text(encoding="utf-8")) == []


def test_the_builder_pastes_exactly_the_engine_and_agent_modules() -> None:
    pasted = {module.split(".")[1] for module in MODULES if is_pasted(module)}
    assert {name for name, _ in builder.MODULES} == pasted
    for name, rel in builder.MODULES:
        module = ".".join(Path(rel).with_suffix("").parts)
        assert (PACKAGE / rel).is_file() and Path(rel).stem == name and is_pasted(module), rel
    assert set(builder.OPTIONAL_MODULES) <= pasted


def test_every_module_is_in_a_layer_or_named_support() -> None:
    top = {module for module in MODULES if "." not in module}
    assert top == {"__init__", "cli", "files", "extras", "cards"}
    assert {module.split(".")[0] for module in MODULES if "." in module} == set(LAYERS)


@pytest.mark.parametrize(("module", "source", "expected"), [
    ("engine.mcts", "from connectx_az.training import config\n", "engine is pasted"),
    ("engine.solver", "import numba\n", "inside a function or a try"),
    ("engine.solver", "try:\n    import numba\nexcept ImportError:\n    numba = None\n", None),
    ("engine.solver", "def f():\n    import scipy\n", "only the standard library, numpy and"),
    ("agent.template", "from connectx_az.agent import builder\n", "the writers are not pasted"),
    ("agent.template", "def f():\n    from connectx_az.evaluation import pons\n", "agent is pasted"),
    ("agent.builder", "from connectx_az.evaluation import kaggle_io\n", "a writer imports"),
    ("evaluation.pons", "from connectx_az.training import export\n", "only inside the function"),
    ("evaluation.pons", "def f():\n    from connectx_az.training import export\n", None),
    ("training.train", "from connectx_az import cli\n", "only tests import cli"),
    ("files", "from connectx_az.engine import game\n", "support imports the layers never"),
    ("cli", "import torch\n", "no third-party package at module level"),
    ("cli", "from connectx_az.training import train\n", "cli imports the layers lazily"),
    ("engine.__init__", "import numpy\n", "an __init__ imports nothing"),
])
def test_a_planted_violation_is_caught(module: str, source: str, expected: str | None) -> None:
    found = violations(module, source)
    assert (found == []) if expected is None else (len(found) == 1 and expected in found[0]), found
