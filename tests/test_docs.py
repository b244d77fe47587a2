"""Every path the README and the docs name exists in the tree, or its line names a commit that holds it.

A path is a token that starts with one of the repository's folders (``connectx_az/``, ``lab/``, ``tests/``,
``docs/``, ``notebooks/``, ``.ci/``) or with one of the package's tiers (``engine/mcts.py`` is
``connectx_az/engine/mcts.py``); in ``docs/`` a Markdown link or image is read relative to its page too. A path
the tree no longer holds passes when a commit id (7 to 40 hex digits) on the same line holds it
(``git cat-file -e COMMIT:PATH``). Outside a git checkout, or in a shallow clone whose history lacks the commit,
the line only has to name one.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [
    ROOT / "README.md",
    ROOT / "DEVELOPERS.md",
    ROOT / "lab" / "README.md",
    ROOT / "lab" / "device" / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
]
FOLDERS = ("connectx_az", "lab", "tests", "docs", "notebooks", ".ci")
TIERS = ("engine", "agent", "testsets", "training", "evaluation", "tools", "cli")
# A path: a folder or a tier, then name characters and slashes; a trailing "::test" or ":line" is not part of it.
PREFIXES = "|".join(re.escape(f) for f in FOLDERS + TIERS)
PATH = re.compile(rf"(?<![\w./-])((?:{PREFIXES})/[\w./-]*)")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
COMMIT = re.compile(r"(?<![\w])([0-9a-f]{7,40})(?![\w])")
# Placeholders stand for a family of paths, not one: ablNN, gen_NNNN, ARM, ...
PLACEHOLDER = re.compile(r"NN|[A-Z]{3,}|\.\.\.")


def _git(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess | None:
    if shutil.which("git") is None:
        return None
    return subprocess.run(["git", "-C", str(ROOT), *args], input=stdin, capture_output=True, text=True)


def _objects_exist(specs: list[str]) -> dict[str, bool]:
    """``git cat-file --batch-check`` on each ``COMMIT:PATH`` (or bare commit): whether the object exists."""
    if not specs:
        return {}
    done = _git("cat-file", "--batch-check", stdin="".join(s + "\n" for s in specs))
    if done is None or done.returncode != 0:
        return {s: False for s in specs}
    lines = done.stdout.splitlines()
    return {s: not line.endswith(" missing") for s, line in zip(specs, lines, strict=True)}


def _history_is_whole() -> bool:
    """A git checkout with its whole history (not a shallow clone), so that a commit a line names can be read."""
    done = _git("rev-parse", "--is-shallow-repository")
    return done is not None and done.returncode == 0 and done.stdout.strip() == "false"


def _paths(page: Path, line: str) -> list[str]:
    """The repository-relative paths a line names."""
    found = []
    for token in PATH.findall(line):
        token = token.split("::")[0].rstrip(".,;:")
        if not token or PLACEHOLDER.search(token):
            continue
        if token.split("/")[0] in FOLDERS:
            found.append(token)
        elif token.endswith((".py", "/")):  # a tier alone is a word ("engine/agent"); a module or a folder is a path
            found.append(f"connectx_az/{token}")
    if page.parent.name == "docs":
        for target in LINK.findall(line):
            if "://" in target or target.startswith("mailto:"):
                continue
            resolved = (page.parent / target).resolve()
            if resolved.is_relative_to(ROOT):
                found.append(resolved.relative_to(ROOT).as_posix())
    return found


def _references() -> list[tuple[str, int, str, str]]:
    """(page, line number, line, path) for every path named by the pages."""
    refs = []
    for page in PAGES:
        if not page.exists():
            continue
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            for path in _paths(page, line):
                refs.append((page.relative_to(ROOT).as_posix(), number, line, path))
    return refs


def test_the_pages_name_paths():
    # The pattern finds what the pages name (a guard against a pattern that finds nothing and so passes).
    names = {path for _, _, _, path in _references()}
    assert "connectx_az/training/config.py" in names and any(p.startswith("lab/") for p in names)
    assert _paths(
        ROOT / "docs" / "x.md", "`engine/mcts.py`, [a](../lab/README.md#x), tests/test_agent.py::test_x."
    ) == ["connectx_az/engine/mcts.py", "tests/test_agent.py", "lab/README.md"]
    assert _paths(ROOT / "README.md", "`lab/ablations/ablNN/arm.sh`, runs/x, https://x.org/docs/y") == []


def test_every_path_exists_or_its_line_names_a_commit_that_holds_it():
    missing = [ref for ref in _references() if not (ROOT / ref[3]).exists()]
    whole = _history_is_whole()
    holds = _objects_exist([f"{c}:{ref[3]}" for ref in missing for c in COMMIT.findall(ref[2])]) if whole else {}
    bad = []
    for page, number, line, path in missing:
        commits = COMMIT.findall(line)
        if any(holds.get(f"{c}:{path}") for c in commits) or (commits and not whole):
            continue  # without the history, naming a commit is all a line can do
        bad.append(f"{page}:{number}: {path}" + (f" (not in {', '.join(commits)})" if commits else ""))
    assert not bad, "paths that are neither in the tree nor in a commit their line names:\n" + "\n".join(bad)


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    anchors = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def test_every_link_to_a_section_finds_its_heading():
    bad = []
    for page in PAGES:
        if not page.exists():
            continue
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", line):
                if "://" in target:
                    continue
                linked = (page.parent / target).resolve() if target else page
                if linked.suffix == ".md" and linked.exists() and anchor not in _anchors(linked):
                    bad.append(f"{page.relative_to(ROOT).as_posix()}:{number}: {target}#{anchor}")
    assert not bad, "links to a heading that is not there:\n" + "\n".join(bad)
