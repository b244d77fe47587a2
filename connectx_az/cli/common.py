"""What every command module shares: the user's errors and the package checks."""

from __future__ import annotations

import argparse
import multiprocessing

from connectx_az import errors, extras

#: what ``backends.OnnxRuntimeEvaluator`` (a model run by onnxruntime) imports
ONNXRUNTIME_EVALUATOR = ("onnxruntime",)


def require(args: argparse.Namespace, *modules: str) -> None:
    """Stop with one line naming those of ``modules`` (``extras.PACKAGES``) not installed, and how to install them."""
    extras.require(*modules, needed_by=f"`connectx-az {command_name(args)}`")


def require_runtime(args: argparse.Namespace) -> None:
    """Stop with one line where ``--runtime kaggle`` asks for numba and numba is not installed: the file would
    quietly play with its pure-Python solver, the ``numpy`` case, under the ``kaggle`` label."""
    if args.runtime == "kaggle" and not extras.is_installed("numba"):
        needed_by = f"`connectx-az {command_name(args)} --runtime kaggle`"
        raise extras.MissingPackage(f"{extras.missing_message(['numba'], needed_by)}; or use --runtime numpy",
                                    name="numba")


def require_positive(args: argparse.Namespace, *options: str, zero_allowed: tuple[str, ...] = ()) -> None:
    """Stop with one line where a count or a time given as one of ``options`` (``--limit``; a list too, as
    ``--sims 64 200``) is not positive, or where one of ``zero_allowed`` is negative; it names each such value alone."""
    bad = []
    for option in (*options, *zero_allowed):
        value = getattr(args, option.lstrip("-").replace("-", "_"), None)
        values = value if isinstance(value, list) else [] if value is None else [value]
        zero_ok = option in zero_allowed
        wrong = [v for v in values if v < 0 or (v == 0 and not zero_ok)]
        if wrong:  # the values that fail, alone: `--sims 64 0` says `--sims 0`
            shown = " ".join(f"{v:g}" for v in wrong)
            bad.append(f"{option} {shown} must be {'zero or more' if zero_ok else 'positive'}")
    if bad:
        raise errors.UserError("; ".join(bad))


def require_each(*checks: tuple[bool, str]) -> None:
    """Stop with one line naming each option value that fails, alone: ``checks`` are ``(holds, message)``, and the
    message of every check that does not hold is printed (``--depth -1 must be zero or more``), none of the others."""
    bad = [message for holds, message in checks if not holds]
    if bad:
        raise errors.UserError("; ".join(bad))


def require_fork(workers: int) -> None:
    """Stop with one line where ``--workers`` above 1 asks for processes this platform cannot fork."""
    if workers > 1 and "fork" not in multiprocessing.get_all_start_methods():
        raise errors.UserError("--workers above 1 needs processes started by fork (Linux, macOS); use --workers 1")


def command_name(args: argparse.Namespace) -> str:
    """The command as typed, e.g. ``eval pons`` or ``bench solver``."""
    return " ".join(str(getattr(args, key)) for key in ("command", "benchmark", "what") if getattr(args, key, None))


def add_runtime(parser: argparse.ArgumentParser) -> None:
    from connectx_az.evaluation.kaggle_io import RUNTIMES

    parser.add_argument("--runtime", choices=list(RUNTIMES), default="numpy",
                        help="what the agent may import: numpy (default; onnxruntime, torch and numba blocked: "
                             "the worst case), kaggle (onnxruntime blocked: numba and torch as Kaggle's image most "
                             "likely has them), full (everything installed here)")
