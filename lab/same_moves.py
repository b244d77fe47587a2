"""usage: same_moves.py A.py B.py [--sims N] [--per-set K]: do two built submissions choose the same moves?

Behaviour check for a refactor of the pasted code (the layers of issue 35: ``make submission`` on main and on
the branch, then this).  Two parts:

1. the pasted sources: each module's source in ``_SOURCES`` after the file's own loader has rewritten its
   imports (``_rewrite_imports``), compared line for line; import lines (rewritten into ``_pasted`` lines) are
   compared as a set, so a reordering of them shows as such.  Where more than import lines differ, the code
   is compared without its docstrings (``ast``).  Also the embedded model and book.
2. the moves: the 57 openings of up to two plies and the first K positions (default 24) of each of the six
   Pons sets (201 positions in all), each answered by a fresh ``Agent`` of each file's own template in a child
   interpreter that imitates Kaggle's sandbox (``kaggle_io.sandbox_prelude``: the package, onnxruntime, torch
   and numba blocked: the numpy backend and the pure-Python solver), at a FIXED budget rather than the clock:
   the search stops after N simulations (default 200) under a clock it never reaches, the solver runs (to its
   proof) only at 12 empty cells or fewer, and the book answers where it has the position.  Prints ``N of N
   positions: same move`` (exit 0) or the positions that differ (exit 1), and how the moves were chosen.
"""

import argparse
import ast
import collections
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from connectx_az.engine import game
from connectx_az.evaluation import kaggle_io
from connectx_az.testsets import pons

#: a pasted module's import of the package (what the builder's loader rewrites)
IMPORT = re.compile(r"^[ \t]*from connectx_az(\.\w+)* import ")
CHILD = kaggle_io.sandbox_prelude(("connectx_az", "onnxruntime", "torch", "numba")) + '''
import dataclasses, json, sys
submission, sims, inputs = sys.argv[1], int(sys.argv[2]), sys.argv[3]
_, env = exec_submission(submission)
template = env["_template"]
base = template.CONFIG
config = dataclasses.replace(base, backends=("numpy",), compile_solver=False, solver_schedule=((12, 1.0),),
                             search=dataclasses.replace(base.search, num_simulations=sims))
moves = []
for observation, configuration in json.load(open(inputs)):
    player = template.Agent(config, model_b64=env["MODEL_B64"], model_sha256=env["MODEL_SHA256"],
                            book_b64=env["BOOK_B64"])
    col = player(observation, configuration)
    moves.append([col, player.info.get("source"), int(player.info.get("simulations", 0)), player.backend])
print(json.dumps(moves))
'''


def pasted_sources(path: str) -> dict[str, str]:
    """``{module name: source}`` of a built file's ``_SOURCES.append((name, r'''...'''))`` lines."""
    out = {}
    for node in ast.parse(Path(path).read_text()).body:
        call = getattr(node, "value", None)
        if isinstance(call, ast.Call) and getattr(call.func, "attr", "") == "append" \
                and getattr(call.func.value, "id", "") == "_SOURCES":
            name, source = ast.literal_eval(call.args[0])
            out[name] = source
    return out


def embedded(path: str) -> tuple[str, str]:
    """The file's ``MODEL_B64`` and ``BOOK_B64`` values."""
    values = {}
    for node in ast.parse(Path(path).read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") in ("MODEL_B64", "BOOK_B64"):
            values[node.targets[0].id] = ast.literal_eval(node.value)
    return values["MODEL_B64"], values["BOOK_B64"]


def rewriter(path: str):
    """The file's own ``_rewrite_imports`` (its loader, as the file runs it)."""
    text = Path(path).read_text()
    start = text.index("_PACKAGE_IMPORT = re.compile(")
    end = text.index("def _load_modules(")
    namespace = {"re": __import__("re")}
    exec(text[start:end], namespace)
    return namespace["_rewrite_imports"]


def code(source: str) -> tuple[str, list[str]]:
    """``(the code, its package imports)`` of a rewritten source, as ``ast.dump`` text without docstrings or
    line numbers; the ``_pasted`` imports are taken out and returned sorted, so their order does not count."""
    tree = ast.parse(source)
    imports = []
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str) and isinstance(node, ast.Module | ast.ClassDef
                                                                        | ast.FunctionDef | ast.AsyncFunctionDef):
            body[0] = ast.Pass()
        for i, stmt in enumerate(body):
            if isinstance(stmt, ast.Assign) and "_pasted" in ast.dump(stmt.value):
                imports.append(ast.dump(stmt))
                body[i] = ast.Pass()
    return ast.dump(tree), sorted(imports)


def compare_sources(a: str, b: str) -> bool:
    """Print, module by module, how the pasted sources of ``a`` and ``b`` differ; True if only in import lines."""
    sources_a, sources_b = pasted_sources(a), pasted_sources(b)
    rewrite_a, rewrite_b = rewriter(a), rewriter(b)
    same = True
    for name in sorted(set(sources_a) | set(sources_b), key=lambda n: (n not in sources_a, n)):
        if name not in sources_a or name not in sources_b:
            print(f"  {name}: only in {'A' if name in sources_a else 'B'}")
            continue
        raw_a, raw_b = sources_a[name].split("\n"), sources_b[name].split("\n")
        raw = [k for k, (x, y) in enumerate(zip(raw_a, raw_b, strict=False)) if x != y]
        lines_a, lines_b = rewrite_a(sources_a[name]).split("\n"), rewrite_b(sources_b[name]).split("\n")
        changed = [k for k, (x, y) in enumerate(zip(lines_a, lines_b, strict=False)) if x != y]
        if len(raw_a) != len(raw_b) or not all(IMPORT.match(raw_a[k]) and IMPORT.match(raw_b[k]) for k in raw):
            if code(rewrite_a(sources_a[name])) == code(rewrite_b(sources_b[name])):
                print(f"  {name}: a docstring differs; the code is identical (ast, imports once rewritten)")
                continue
            same = False
            first = next((k for k in raw if not (IMPORT.match(raw_a[k]) and IMPORT.match(raw_b[k]))), None)
            print(f"  {name}: DIFFERS beyond its import lines ({len(raw_a)} vs {len(raw_b)} lines"
                  + (f"; line {first + 1}: {raw_a[first]!r} vs {raw_b[first]!r})" if first is not None else ")"))
        elif not raw:
            print(f"  {name}: identical")
        elif not changed:
            print(f"  {name}: {len(raw)} import lines differ; identical once the loader has rewritten them")
        elif {lines_a[k] for k in changed} == {lines_b[k] for k in changed}:
            print(f"  {name}: {len(raw)} import lines differ; once rewritten, the same lines in another order")
        else:
            same = False
            print(f"  {name}: {len(raw)} import lines differ and import other modules once rewritten: "
                  f"{sorted({lines_a[k] for k in changed} ^ {lines_b[k] for k in changed})}")
    model_a, book_a = embedded(a)
    model_b, book_b = embedded(b)
    print(f"  model: {'same' if model_a == model_b else 'DIFFERS'}; book: {'same' if book_a == book_b else 'DIFFERS'}")
    return same and model_a == model_b and book_a == book_b


def positions(per_set: int) -> list[tuple[str, str]]:
    """``(where, moves)``: every opening of up to two plies (the book's), then the first ``per_set`` of each Pons
    set (``moves`` in Pons' notation, 1-based columns)."""
    openings = [""] + [f"{a}" for a in range(1, 8)] + [f"{a}{b}" for a in range(1, 8) for b in range(1, 8)]
    return [("opening", m) for m in openings] + [(name, p.moves) for name in pons.SETS
                                                  for p in pons.load_set(name, limit=per_set)]


def play(path: str, sims: int, inputs: Path) -> list[list]:
    with tempfile.TemporaryDirectory() as tmp:
        child = Path(tmp) / "child.py"
        child.write_text(CHILD)
        done = subprocess.run([sys.executable, "-I", str(child), str(Path(path).resolve()), str(sims), str(inputs)],
                              capture_output=True, text=True, cwd=tmp, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{path}: the child failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--sims", type=int, default=200)
    parser.add_argument("--per-set", type=int, default=24)
    args = parser.parse_args()
    print(f"pasted sources, A = {args.a}, B = {args.b}:")
    sources_same = compare_sources(args.a, args.b)
    chosen = positions(args.per_set)
    with tempfile.TemporaryDirectory() as tmp:
        inputs = Path(tmp) / "inputs.json"
        inputs.write_text(json.dumps([kaggle_io.kaggle_inputs(*game.from_moves(moves), act_timeout=10_000.0)
                                      for _, moves in chosen]))
        moves_a, moves_b = play(args.a, args.sims, inputs), play(args.b, args.sims, inputs)
    differ = [(where, x, y) for where, x, y in zip(chosen, moves_a, moves_b, strict=True) if x[:3] != y[:3]]
    for (name, line), x, y in differ:
        print(f"  {name} {line}: A plays {x[0]} ({x[1]}, {x[2]} simulations), B {y[0]} ({y[1]}, {y[2]})")
    sources = collections.Counter(x[1].split(":")[0] for x in moves_a)
    used = ",".join(sorted({x[3] for x in moves_a + moves_b} - {""}))  # "": a move made before the model loads
    print(f"moves at {args.sims} simulations, backend {used}; "
          f"how A chose them: " + ", ".join(f"{k} {v}" for k, v in sources.most_common()))
    same_move = sum(x[0] == y[0] for x, y in zip(moves_a, moves_b, strict=True))
    print(f"{same_move} of {len(chosen)} positions: same move")
    print(f"{len(chosen) - len(differ)} of {len(chosen)} positions: same move, source and number of simulations")
    return 0 if not differ and sources_same else 1


if __name__ == "__main__":
    sys.exit(main())
