"""``connectx-az``: the parser of every command group, and ``main``.

Each command group is a module of this folder with its own ``add_parsers`` (``train``, ``build``,
``evaluate``, ``play``, ``release``, ``bench``); each command imports what it needs when it runs, so ``build``
works with numpy alone and ``--help`` is instant.  Expected failures (bad paths, bad configs,
corrupt models, files that are not submissions, optional packages not installed) print one line
starting with ``error:`` and exit with status 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from connectx_az import extras
from connectx_az.cli import bench, build, evaluate, play, release, train
from connectx_az.cli.common import UserError, command_name

#: the command groups, in the order ``--help`` lists their commands
GROUPS = (train, build, evaluate, play, release, bench)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="connectx-az", description="AlphaZero for Kaggle ConnectX: "
                                     "train, export, build a one-file submission, validate, measure.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.add_parsers(sub)
    return parser


def user_errors() -> tuple[type[BaseException], ...]:
    """The exceptions ``main`` prints as one ``error:`` line (status 2) rather than a traceback."""
    from connectx_az.evaluation.kaggle_sandbox import SubmissionError
    from connectx_az.evaluation.reports import ReportError

    errors: list[type[BaseException]] = [UserError, FileNotFoundError, PermissionError, extras.MissingPackage,
                                         SubmissionError, ReportError]
    # A build-only set-up has numpy alone: the error types of modules that need torch
    # cannot have been raised there, so a failed import just leaves them out.
    try:
        from connectx_az.training.config import ConfigError
        from connectx_az.training.network import CheckpointError

        errors += [ConfigError, CheckpointError]
    except ImportError:
        pass
    try:  # onnx too
        from connectx_az.training.export import ExportError

        errors.append(ExportError)
    except ImportError:
        pass
    from connectx_az.agent.backends import ModelError
    from connectx_az.cards import CardError
    from connectx_az.tools.builder import BuildError
    from connectx_az.tools.compare import CompareError

    errors += [ModelError, BuildError, CardError, CompareError]
    return tuple(errors)


def main(argv: list[str] | None = None) -> int:
    """Run the command of ``argv`` (default ``sys.argv[1:]``); its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    try:
        return int(args.func(args))
    except user_errors() as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:  # an optional package a command's ``require`` did not name
        if not extras.is_optional(exc.name):
            raise
        print(f"error: {extras.missing_message([exc.name], f'`connectx-az {command_name(args)}`')}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`... | head`): stop quietly, as a Unix tool does
        # Python flushes stdout again at exit, which would raise once more: point it at /dev/null.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
