"""The import order of the package's tiers, read from every module's source with ``ast``.

``TIERS`` is the order, from the bottom up: a module imports the standard library, the tiers below its
own and its own tier, nothing above, at module level or inside a function alike.  ``training`` and
``evaluation`` share a rank and never import each other.  Each tier also says which other packages it
may import: ``engine`` and ``agent`` are pasted into ``submission.py`` and import numpy, and the
optional packages (numba, onnxruntime) only inside a function or a ``try`` that catches
``ImportError``; ``testsets`` is numpy only; torch is imported only by ``training`` and ``tools``;
``support`` (the top-level modules) is the standard library alone; ``cli`` imports no other package at
module level, and the tiers below it only inside functions (``--help`` imports nothing heavy).  The
``__init__`` files import nothing.  No exceptions: a module that needs something above it belongs
higher up.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import connectx_az
from connectx_az.tools import builder


@dataclass(frozen=True)
class Tier:
    name: str
    rank: int  # a module imports tiers of a lower rank, and its own tier
    pasted: bool = False  # into submission.py: the standard library, numpy and guarded optional packages only
    packages: str = "any"  # other packages it may import: "none", "numpy", "any but torch", "any"
    lazy: bool = False  # imports lower tiers and other packages only inside functions


#: the import order, from the bottom up (engine < agent < testsets < training, evaluation < tools < cli)
TIERS = (
    Tier("support", 0, packages="none"),  # files, extras, cards, paths, errors: the top-level modules
    Tier("engine", 1, pasted=True),
    Tier("agent", 2, pasted=True),
    Tier("testsets", 3, packages="numpy"),
    Tier("training", 4),
    Tier("evaluation", 4, packages="any but torch"),
    Tier("tools", 5),
    Tier("cli", 6, lazy=True),
)
BY_NAME = {tier.name: tier for tier in TIERS}
FOLDERS = {tier.name for tier in TIERS} - {"support"}
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
                    is_package = module == "connectx_az" or module in {f"connectx_az.{folder}" for folder in FOLDERS}
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


def tier_of(name: str) -> str:
    """The tier of a dotted name under ``connectx_az`` (``package`` for the bare package); ``stdlib``,
    ``numpy`` or ``third-party`` otherwise."""
    parts = name.split(".")
    if parts[0] != "connectx_az":
        return "stdlib" if parts[0] in STDLIB else "numpy" if parts[0] == "numpy" else "third-party"
    if len(parts) == 1:
        return "package"
    return parts[1] if parts[1] in FOLDERS else "support"


def _modules() -> dict[str, Path]:
    """``"engine.game"``, ``"cli.main"``, ``"files"``... -> path."""
    return {".".join(p.relative_to(PACKAGE).with_suffix("").parts): p for p in sorted(PACKAGE.rglob("*.py"))
            if "__pycache__" not in p.parts}


PACKAGE = Path(connectx_az.__file__).resolve().parent
MODULES = _modules()


def is_pasted(module: str) -> bool:
    return BY_NAME[tier_of(f"connectx_az.{module}")].pasted and not module.endswith("__init__")


def violations(module: str, source: str) -> list[str]:
    """What ``module`` (a key of ``MODULES``) imports against ``TIERS``, one line each."""
    own = BY_NAME[tier_of(f"connectx_az.{module}")]
    if module.endswith("__init__"):
        return [f"{module}:{i.line} imports {i.module} (an __init__ imports nothing)"
                for i in imports_of(source) if i.module != "__future__"]
    out = []
    for i in imports_of(source):
        target = tier_of(i.module)
        where = f"{module}:{i.line} imports {i.module}"
        if target == "stdlib":
            continue
        if target == "package":
            out.append(f"{where}: nothing imports the bare package")
        elif target in BY_NAME:
            other = BY_NAME[target]
            if other.rank > own.rank or other.rank == own.rank and other is not own:
                out.append(f"{where}: {own.name} (rank {own.rank}) imports only the tiers below it and itself, "
                           f"not {other.name} (rank {other.rank})")
            elif own.pasted and not other.pasted:
                out.append(f"{where}: {own.name} is pasted and imports only pasted tiers")
            elif own.lazy and other is not own and other.name != "support" and i.top_level:
                out.append(f"{where}: {own.name} imports the tiers below it only inside functions")
        elif own.pasted:
            if target == "third-party":
                if i.module.split(".")[0] not in builder.OPTIONAL_IMPORTS:
                    out.append(f"{where}: pasted code may use only the standard library, numpy and "
                               f"{sorted(builder.OPTIONAL_IMPORTS)}")
                elif not i.guarded:
                    out.append(f"{where}: an optional package goes inside a function or a try/except ImportError")
        elif own.packages == "none" or own.packages == "numpy" and target == "third-party":
            out.append(f"{where}: {own.name} imports {'no other package' if own.packages == 'none' else 'numpy alone'}")
        elif own.packages == "any but torch" and i.module.split(".")[0] == "torch":
            out.append(f"{where}: {own.name} never needs torch")
        elif own.lazy and i.top_level:
            out.append(f"{where}: {own.name} imports no other package at module level")
    return out


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_flow_one_way(module: str) -> None:
    assert violations(module, MODULES[module].read_text(encoding="utf-8")) == []


def test_the_builder_pastes_exactly_the_pasted_tiers() -> None:
    pasted = {module.split(".")[1] for module in MODULES if is_pasted(module)}
    assert {name for name, _ in builder.pasted_modules()} == pasted
    for name, rel in builder.pasted_modules():
        module = ".".join(Path(rel).with_suffix("").parts)
        assert (PACKAGE / rel).is_file() and Path(rel).stem == name and is_pasted(module), rel
    assert set(builder.OPTIONAL_MODULES) <= pasted


def test_every_module_is_in_a_tier() -> None:
    top = {module for module in MODULES if "." not in module}
    assert top == {"__init__", "files", "extras", "cards", "paths", "errors"}  # support
    assert {module.split(".")[0] for module in MODULES if "." in module} == FOLDERS


@pytest.mark.parametrize(("module", "source", "expected"), [
    ("engine.mcts", "from connectx_az.training import config\n", "not training"),
    ("engine.mcts", "from connectx_az import files\n", "pasted and imports only pasted tiers"),
    ("engine.solver", "import numba\n", "inside a function or a try"),
    ("engine.solver", "try:\n    import numba\nexcept ImportError:\n    numba = None\n", None),
    ("engine.solver", "def f():\n    import scipy\n", "only the standard library, numpy and"),
    ("agent.template", "from connectx_az.tools import builder\n", "not tools"),
    ("agent.template", "def f():\n    from connectx_az.evaluation import grading\n", "not evaluation"),
    ("testsets.pons", "import torch\n", "numpy alone"),
    ("training.solved", "from connectx_az.evaluation import grading\n", "not evaluation"),
    ("training.train", "def f():\n    from connectx_az.evaluation import grading\n", "not evaluation"),
    ("evaluation.grading", "def f():\n    from connectx_az.training import export\n", "not training"),
    ("evaluation.players", "def f():\n    import torch\n", "never needs torch"),
    ("evaluation.players", "from connectx_az.testsets import pons\n", None),
    ("tools.builder", "from connectx_az.cli import main\n", "not cli"),
    ("tools.compare", "from connectx_az.training import export\nfrom connectx_az.evaluation import grading\n", None),
    ("files", "from connectx_az.engine import game\n", "not engine"),
    ("files", "import numpy\n", "no other package"),
    ("cli.main", "import torch\n", "no other package at module level"),
    ("cli.main", "from connectx_az.training import train\n", "only inside functions"),
    ("cli.main", "def f():\n    from connectx_az.training import train\n", None),
    ("engine.__init__", "import numpy\n", "an __init__ imports nothing"),
])
def test_a_planted_violation_is_caught(module: str, source: str, expected: str | None) -> None:
    found = violations(module, source)
    assert (found == []) if expected is None else (len(found) == 1 and expected in found[0]), found
