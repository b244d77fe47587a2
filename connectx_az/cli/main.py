"""``connectx-az``: the parser of every command group (``GROUPS``, each with its ``add_parsers``), and ``main``.

Commands import what they need when they run, so ``build`` works with numpy alone and ``--help`` is instant."""

from __future__ import annotations

import argparse
import functools
import logging
import os
import re
import signal
import sys
import threading

from connectx_az import errors, extras
from connectx_az.cli import bench, build, evaluate, play, release, train
from connectx_az.cli.common import command_name

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


def _value_options(parser: argparse.ArgumentParser) -> set[str]:
    """The option strings of ``parser`` and its subparsers that take exactly one value."""
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _value_options(sub)
        elif action.option_strings and action.nargs is None:
            found.update(action.option_strings)
    return found


def join_dash_values(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """``argv`` with an option's value that starts with a dash and a digit (``--total-time -5m``) joined to it
    (``--total-time=-5m``): argparse would take ``-5m`` for an option and say only "expected one argument", where
    the command can name the option and its bad value."""
    options = _value_options(parser)
    joined: list[str] = []
    for token in argv:
        if joined and joined[-1] in options and re.match(r"-[\d.]", token):
            joined[-1] = f"{joined[-1]}={token}"
        else:
            joined.append(token)
    return joined


def user_errors() -> tuple[type[BaseException], ...]:
    """The exceptions ``main`` prints as one ``error:`` line (status 2): ``errors.UserError``, a missing or
    unreadable file, and the two of code pasted where the package cannot be imported."""
    from connectx_az.agent.backends import ModelError
    from connectx_az.evaluation.kaggle_sandbox import SubmissionError

    return errors.UserError, FileNotFoundError, PermissionError, ModelError, SubmissionError


#: what an interrupted command says it kept, unless it set ``args.kept`` (``interrupted: ...``, one line)
NOTHING_KEPT = "nothing was kept; run the same command again"


def _interrupt(main_pid: int, signum: int, frame: object) -> None:
    """SIGTERM as Ctrl-C in the process that runs ``main`` (``main_pid``): a ``KeyboardInterrupt``, so that every
    command stops its children, removes its temporary files and says what it kept, whichever of the two ends it.
    A child forked from it inherits this handler; there SIGTERM keeps its default meaning (``terminate()``)."""
    if os.getpid() != main_pid:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Run the command of ``argv`` (default ``sys.argv[1:]``); its exit status (130 when Ctrl-C or SIGTERM ended
    it, after one line saying what was kept: ``args.kept``, which a command may set as it goes)."""
    parser = build_parser()
    args = parser.parse_args(join_dash_values(parser, sys.argv[1:] if argv is None else argv))
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, functools.partial(_interrupt, os.getpid())) if in_main_thread else None
    try:
        return _run(args)
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _run(args: argparse.Namespace) -> int:
    """``args.func(args)``, its user's errors as one ``error:`` line, an interrupt as one ``interrupted:`` line."""
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
        print(f"interrupted: {getattr(args, 'kept', None) or NOTHING_KEPT}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`... | head`): stop quietly, as a Unix tool does
        # Python flushes stdout again at exit, which would raise once more: point it at /dev/null.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
