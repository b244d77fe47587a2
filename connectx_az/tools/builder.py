"""Build the single-file Kaggle submission from the package's own, tested source files.

``build_submission`` writes one ``submission.py`` holding, in order: a header comment (model sha256, net shape,
sizes, the caller's metadata); standard-library imports, the base64 model with its sha256 and the base64 opening
book (``""`` without one); the source of the agent's module and of every module of ``engine/`` and ``agent/`` it
imports (its import closure, ``pasted_modules``: a module the agent does not import does not ship), verbatim as raw
string literals read from disk at build time; the loader (``_LOADER``), which executes each source in a fresh
module registered as ``connectx_az_submission.<name>`` (so ``dataclasses`` finds it) after rewriting its ``from
connectx_az.engine import x`` / ``from connectx_az.agent import y`` lines into references to the modules loaded
before it (same line count, so tracebacks point at real lines); last ``_agent``, the template's ``Agent`` with the
embedded model, and ``def agent(observation, configuration)``, the last callable, which Kaggle calls.

Where ``book``, ``solver`` or ``solver_numba`` fails to load, the agent plays on without it; where the template
fails, ``agent`` plays the most central open column.  ``BuildError`` (one line) refuses a missing or corrupt model,
one ``NumpyOnnxModel`` cannot run, a book ``book.decode`` refuses, sources that import beyond the standard library,
numpy and ``OPTIONAL_IMPORTS`` (those only inside a function or ``try``), an unwritable output folder and a file over
``MAX_BYTES``.  Output is written atomically."""

from __future__ import annotations

import ast
import base64
import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from connectx_az import files, paths
from connectx_az.agent import backends, onnx_numpy
from connectx_az.engine import book
from connectx_az.errors import UserError

#: where the pasted sources are read from (a test points it at a copy)
PACKAGE_DIR = paths.PACKAGE_DIR
#: the folders a pasted module may come from, and the module whose import closure is pasted (the agent)
PASTED = ("engine", "agent")
ROOT = "agent/template.py"
OPTIONAL_MODULES = frozenset({"book", "solver", "solver_numba"})  # the agent plays on without these
MAX_BYTES = 5_000_000  # submissions above ~5 MB were reported to fail
_B64_LINE = 100
#: packages Kaggle's image may lack: imported only where their absence is caught
OPTIONAL_IMPORTS = frozenset({"onnxruntime", "numba"})
_ALLOWED_IMPORTS = frozenset(sys.stdlib_module_names) | {"numpy"} | OPTIONAL_IMPORTS


def pasted_modules() -> list[tuple[str, str]]:
    """``(module name, path relative to the package)`` of ``ROOT`` and every module of the ``PASTED`` folders it
    imports, directly or through another (``from connectx_az.engine import x`` anywhere in a file, inside a ``try``
    too): its import closure, each module after those it imports (depth first, in the order of the imports).
    A module nothing imports is left out.  ``BuildError`` for two modules of one name or an import cycle."""
    paths: dict[str, Path] = {}
    for folder in PASTED:
        for path in sorted((PACKAGE_DIR / folder).glob("*.py")):
            if path.stem == "__init__":
                continue
            if path.stem in paths:
                raise BuildError(f"{folder}/{path.stem}.py and {paths[path.stem].parent.name}/{path.stem}.py share "
                                 "a name; each pasted module needs its own")
            paths[path.stem] = path
    order: dict[str, str] = {}
    _visit(Path(ROOT).stem, paths, order, set())
    return list(order.items())


def _visit(name: str, paths: dict[str, Path], order: dict[str, str], visiting: set[str]) -> None:
    """Add ``name`` to ``order`` after the pasted modules it imports (``pasted_modules``)."""
    if name in order:
        return
    if name in visiting:
        raise BuildError(f"{paths[name].parent.name}/{name}.py is in an import cycle")
    visiting.add(name)
    folders = {f"connectx_az.{folder}" for folder in PASTED}
    for node in ast.walk(ast.parse(paths[name].read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module in folders:
            for alias in node.names:
                if alias.name in paths and paths[alias.name].parent.name == node.module.rsplit(".", 1)[1]:
                    _visit(alias.name, paths, order, visiting)
    order[name] = f"{paths[name].parent.name}/{name}.py"


class BuildError(UserError, RuntimeError):
    """The submission cannot be built; the message says why in one line."""


@dataclass(frozen=True)
class BuildReport:
    """What ``build_submission`` wrote."""

    path: Path
    num_bytes: int
    model_sha256: str
    model_bytes: int
    net_label: str
    book_entries: int = 0  # 0: built without a book
    book_bytes: int = 0


# The loader is written into the submission as it stands here; the builder also
# runs ``_rewrite_imports`` from this very text to check every source before
# writing.  Keep it standard-library only.
_LOADER = r'''
_PACKAGE_IMPORT = re.compile(
    r"^(?P<indent>[ \t]*)from connectx_az\.(?:engine|agent) import (?P<names>[A-Za-z_]\w*(?: as [A-Za-z_]\w*)?"
    r"(?:, *[A-Za-z_]\w*(?: as [A-Za-z_]\w*)?)*)[ \t]*(?:#.*)?$"
)


def _rewrite_imports(source):
    """Turn ``from connectx_az.{engine,agent} import a, b as c`` lines into ``a, c = _pasted("a"), _pasted("b")``."""
    lines = source.split("\n")
    for i, line in enumerate(lines):
        match = _PACKAGE_IMPORT.match(line)
        if match:
            names = [part.strip().split(" as ") for part in match.group("names").split(",")]
            targets = ", ".join(alias[-1] for alias in names)
            values = ", ".join("_pasted(%r)" % alias[0] for alias in names)
            lines[i] = "%s%s = %s" % (match.group("indent"), targets, values)
    return "\n".join(lines)


def _load_modules(sources, optional):
    """Execute each source in its own registered module; returns {name: module or None}."""
    loaded = {}

    def _pasted(name):
        module = loaded.get(name)
        if module is None:
            raise ImportError("connectx_az module %r is not available in this submission" % name)
        return module

    for name, source in sources:
        module = types.ModuleType("connectx_az_submission." + name)
        module.__dict__["_pasted"] = _pasted
        sys.modules[module.__name__] = module
        try:
            exec(compile(_rewrite_imports(source), "<connectx_az/%s>" % name, "exec"), module.__dict__)
        except Exception:
            sys.modules.pop(module.__name__, None)
            if name not in optional:
                raise
            module = None
        loaded[name] = module
    return loaded
'''

_TAIL = '''
try:
    _MODULES = _load_modules(_SOURCES, {optional!r})
    _template = _MODULES["template"]
    _agent = _template.Agent(model_b64=MODEL_B64, model_sha256=MODEL_SHA256, book_b64=BOOK_B64,
                             preload_seconds=time.perf_counter() - _T_START)
except Exception as _exc:  # keep the file loadable; agent() below still plays legal moves
    _template = _agent = None
    _LOAD_ERROR = "%s: %s" % (type(_exc).__name__, _exc)


def agent(observation, configuration):
    """Kaggle's entry point (the last callable in this file)."""
    if _agent is not None:
        return _agent(observation, configuration)
    try:
        board = observation["board"]
        columns = int(configuration["columns"])
        free = [c for c in range(columns) if board[c] == 0]
        return int(min(free, key=lambda c: abs(2 * c - columns + 1)))
    except Exception:
        return 3
'''


def _loader_namespace() -> dict:
    namespace = {"re": re, "sys": sys, "types": __import__("types")}
    exec(compile(_LOADER, "<builder._LOADER>", "exec"), namespace)
    return namespace


def _check_source(name: str, source: str, rewrite) -> None:
    """Refuse sources the submission could not run on its own."""
    try:
        tree = ast.parse(rewrite(source))
    except SyntaxError as exc:
        raise BuildError(f"{name}: does not parse after rewriting its imports: {exc}") from None
    top_level = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise BuildError(f"{name}: relative import at line {node.lineno} cannot run in one file")
            roots = [(node.module or "").split(".")[0]]
        else:
            continue
        for root in roots:
            if root == "connectx_az":
                raise BuildError(f"{name}: line {node.lineno} imports connectx_az in a form the builder "
                                 "cannot inline; use 'from connectx_az.engine import x' (or .agent)")
            if root not in _ALLOWED_IMPORTS:
                raise BuildError(f"{name}: line {node.lineno} imports {root!r}; the submission may use "
                                 "only the standard library and numpy")
            if root in OPTIONAL_IMPORTS and id(node) in top_level:
                raise BuildError(f"{name}: line {node.lineno} imports {root!r} at the top level; Kaggle may "
                                 "lack it, so import it inside a function or a try block")


def _literal(source: str, name: str) -> str:
    """``source`` as a raw string literal that reproduces it exactly (verbatim in the file)."""
    literal = "r'''" + source + "'''"
    try:
        exact = "'''" not in source and not source.endswith("\\") and ast.literal_eval(literal) == source
    except (SyntaxError, ValueError):
        exact = False
    if not exact:
        raise BuildError(f"{name}: cannot be pasted verbatim (contains ''' or a trailing backslash)")
    return literal


def _read_model(model_path: str | Path) -> bytes:
    path = Path(model_path)
    if not path.is_file():
        raise BuildError(f"model {path} does not exist; export one from a training run first: "
                         f"`{paths.COMMAND} export RUN_DIR --out {path}`")
    if path.suffix == ".pt":
        raise BuildError(f"model {path} is a PyTorch checkpoint, not an ONNX model: export it first, "
                         f"`{paths.COMMAND} export {path} --out build/{path.stem}.onnx`, and build that")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise BuildError(f"cannot read model {path}: {exc.strerror}") from None


def _read_book(book_path: str | Path) -> tuple[bytes, int]:
    """``(bytes, entries)`` of the book file, refused (``BuildError``) unless it decodes for this board."""
    path = Path(book_path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BuildError(f"cannot read book {path}: {exc.strerror}; build one with `{paths.COMMAND} book`, "
                         "or leave it out with --no-book") from None
    try:
        return data, len(book.decode(data))
    except book.BookError as exc:
        raise BuildError(f"book {path}: {exc}") from None


def build_submission(model_path: str | Path, out_path: str | Path, *, metadata: dict | None = None,
                     expected_sha256: str | None = None,
                     book_path: str | Path | None = paths.DEFAULT_BOOK) -> BuildReport:
    """Write the single-file agent for the ONNX model at ``model_path`` to ``out_path``.

    ``expected_sha256``, when given, must match the model bytes (e.g. the export report's).  ``metadata``
    (JSON-able) goes into the header.  ``book_path``: the opening book to embed (``None``: none).  ``BuildError``."""
    out_path = Path(out_path)
    data = _read_model(model_path)
    sha256 = hashlib.sha256(data).hexdigest()
    if expected_sha256 is not None and sha256 != expected_sha256.lower():
        raise BuildError(f"model {model_path} has sha256 {sha256[:16]}..., expected {expected_sha256[:16]}...")
    try:
        model = onnx_numpy.NumpyOnnxModel(data)
        backends.check_outputs(model)  # the agent's check of its network: a model of another shape stops here
    except ValueError as exc:
        raise BuildError(f"model {model_path} cannot run in the submission: {exc}") from None
    net = model.net_shape()
    net_label = str(net.get("label", "unknown"))
    book_data, book_entries = _read_book(book_path) if book_path is not None else (b"", 0)
    try:
        out_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildError(f"cannot create output folder {out_path.parent}: {exc.strerror}") from None
    if not os.access(out_path.parent, os.W_OK):
        raise BuildError(f"output folder {out_path.parent} is not writable; choose another --out")

    sources = _pasted_sources()
    try:
        meta = json.dumps(metadata or {}, sort_keys=True, default=str)
    except (TypeError, ValueError) as exc:
        raise BuildError(f"metadata is not JSON-able: {exc}") from None
    text = _file_text(data, sha256, model, net, book_data, book_entries, meta, sources)
    num_bytes = len(text.encode("utf-8"))
    if num_bytes > MAX_BYTES:
        raise BuildError(f"submission would be {num_bytes / 1e6:.2f} MB, over the {MAX_BYTES / 1e6:g} MB limit; "
                         "export with float16=True or a smaller net, or embed a smaller book")
    try:
        compile(text, str(out_path), "exec")
    except SyntaxError as exc:
        raise BuildError(f"generated file does not compile: {exc}") from None
    _write_atomic(text, out_path)
    return BuildReport(path=out_path, num_bytes=num_bytes, model_sha256=sha256, model_bytes=len(data),
                       net_label=net_label, book_entries=book_entries, book_bytes=len(book_data))


def _pasted_sources() -> list[tuple[str, str, str]]:
    """``(name, path relative to the package, source)`` of every pasted module, in load order, each checked."""
    rewrite = _loader_namespace()["_rewrite_imports"]
    sources = []
    for name, rel in pasted_modules():
        path = PACKAGE_DIR / rel
        if not path.is_file():
            raise BuildError(f"package source {path} is missing")
        source = path.read_text(encoding="utf-8")
        _check_source(rel, source, rewrite)
        sources.append((name, rel, source))
    return sources


def _file_text(data: bytes, sha256: str, model: onnx_numpy.NumpyOnnxModel, net: dict, book_data: bytes,
               book_entries: int, meta: str, sources: list[tuple[str, str, str]]) -> str:
    """The text of ``submission.py``: the header, the embedded model and book, the sources, the loader, the tail."""
    b64 = base64.b64encode(data).decode("ascii")
    book_b64 = base64.b64encode(book_data).decode("ascii")
    book_line = (f"# book: {book_entries} positions, {len(book_data)} bytes, sha256 "
                 f"{hashlib.sha256(book_data).hexdigest()}\n" if book_data else "# book: none\n")
    parts = [
        "# ConnectX agent built by connectx_az.tools.builder: AlphaZero MCTS over an embedded ONNX net.\n",
        "# Generated file; edit the package sources, then rebuild.\n",
        f"# model sha256: {sha256}\n",
        f"# model: {len(data)} bytes, net {net.get('label', 'unknown')} {json.dumps(net, sort_keys=True)}, "
        f"float16 weights: {model.has_float16_weights}\n",
        book_line,
        f"# sources: {', '.join(rel for _, rel, _ in sources)}\n",
        f"# metadata: {meta}\n",
        "import base64\nimport re\nimport sys\nimport time\nimport types\n\n",
        "_T_START = time.perf_counter()\n",
        f"MODEL_SHA256 = {sha256!r}\n",
        'MODEL_B64 = """\n',  # base64.b64decode skips the newlines
        *(f"{b64[i:i + _B64_LINE]}\n" for i in range(0, len(b64), _B64_LINE)),
        '"""\n\n',
        *(['BOOK_B64 = """\n', *(f"{book_b64[i:i + _B64_LINE]}\n" for i in range(0, len(book_b64), _B64_LINE)),
           '"""\n\n'] if book_b64 else ['BOOK_B64 = ""\n\n']),
        "_SOURCES = []\n",
    ]
    for name, rel, source in sources:
        parts.append(f"\n# ---- connectx_az/{rel} (verbatim) ----\n")
        parts.append(f"_SOURCES.append(({name!r}, {_literal(source, name)}))\n")
    parts.append(_LOADER)
    parts.append(_TAIL.format(optional=sorted(OPTIONAL_MODULES)))
    return "".join(parts)


def embedded_model(path: str | Path) -> bytes:
    """The ONNX model a built ``submission.py`` embeds (its ``MODEL_B64``); ``BuildError`` where it holds none."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BuildError(f"cannot read {path} ({type(exc).__name__})") from None
    match = re.search(r'^MODEL_B64 = """\n(.*?)"""', text, re.S | re.M)
    if match is None:
        raise BuildError(f"{path} is not a file built by connectx-az (no embedded model)")
    return base64.b64decode(match[1])


def _write_atomic(text: str, path: Path) -> None:
    try:
        files.atomic_write_bytes(path, text.encode("utf-8"))
    except OSError as exc:
        raise BuildError(f"cannot write {path}: {exc.strerror}; choose a path you can write to") from None
