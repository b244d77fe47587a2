"""Optional packages: which pip extra installs each, and the one-line error when a command lacks one.

The package needs numpy alone.  A command names what it needs with ``require`` before any work, and
``cli.main.main`` words any other failed import of ``PACKAGES`` the same way (``missing_message``)."""

from __future__ import annotations

import importlib.util

from connectx_az.errors import UserError

#: import name -> (name to install, the extra of pyproject.toml that installs it)
PACKAGES: dict[str, tuple[str, str]] = {
    "torch": ("torch", "train"),
    "onnx": ("onnx", "train"),
    "onnxruntime": ("onnxruntime", "eval"),
    "tqdm": ("tqdm", "train"),
    "matplotlib": ("matplotlib", "train"),
    "kaggle_environments": ("kaggle-environments", "validate"),
    "numba": ("numba", "validate"),
}
#: extra -> the Makefile target that installs it into the checkout's .venv
MAKE_TARGETS = {"eval": "install-eval", "train": "install-train", "validate": "install-validate"}


class MissingPackage(UserError, ImportError):
    """Optional packages a command needs are not installed; the message says how to install them."""


def is_optional(module: str | None) -> bool:
    """Whether ``module`` (an import name, dotted or not) belongs to one of ``PACKAGES``."""
    return bool(module) and module.split(".")[0] in PACKAGES


def missing_message(modules: list[str], needed_by: str) -> str:
    """One line: ``needed_by`` needs ``modules`` (``PACKAGES``' import names), and the ``make`` targets and pip
    extras that install them."""
    names = [PACKAGES[m.split(".")[0]][0] for m in modules]
    extras = sorted({PACKAGES[m.split(".")[0]][1] for m in modules}, key=list(MAKE_TARGETS).index)
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    targets = " ".join(MAKE_TARGETS[e] for e in extras)
    # the package is not on PyPI: the extras install from the clone (pip install -e, as the Makefile does)
    return (f"{needed_by} needs {listed}, which {'is' if len(names) == 1 else 'are'} not installed: run "
            f"`make {targets}` in the repository (or there: pip install -e '.[{','.join(extras)}]')")


def is_installed(module: str) -> bool:
    """Whether ``module`` can be imported (found, not blocked), without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a blocked import, or a module left half-imported
        return False


def require(*modules: str, needed_by: str) -> None:
    """Raise ``MissingPackage`` naming every one of ``modules`` (keys of ``PACKAGES``) not installed."""
    missing = [m for m in modules if not is_installed(m)]
    if missing:
        raise MissingPackage(missing_message(missing, needed_by), name=missing[0])
