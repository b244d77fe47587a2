"""Every path into the installed package's ``models/`` and ``data/``, named once."""

from __future__ import annotations

from pathlib import Path

#: the command as the README spells it, in the hints the package prints (``connectx-az`` is not on PATH after
#: ``make``)
COMMAND = ".venv/bin/connectx-az"
#: the installed package's folder (the builder reads the pasted sources from it)
PACKAGE_DIR = Path(__file__).resolve().parent
MODELS_DIR = PACKAGE_DIR / "models"
DATA_DIR = PACKAGE_DIR / "data"
#: the shipped network, its model card and the checkpoint it was exported from
DEFAULT_MODEL = MODELS_DIR / "default.onnx"
DEFAULT_CARD = MODELS_DIR / "default.json"
DEFAULT_CHECKPOINT = MODELS_DIR / "default.pt"
#: the shipped opening book (``connectx-az book`` writes one; ``data/book/README.md``)
DEFAULT_BOOK = DATA_DIR / "book" / "book.bin"
#: the shipped label file: random openings proven by the solver (``data/labels/README.md``)
BUILTIN_LABELS = DATA_DIR / "labels" / "openings.npz"
#: the Pons benchmark files (``data/pons/README.md``)
PONS_DIR = DATA_DIR / "pons"
