"""Calling an agent the way Kaggle does: its inputs, and executing its file.  Standard library only.

``kaggle_io.sandbox_prelude`` pastes this file verbatim into child scripts that imitate Kaggle's sandbox (and so
cannot import the package); ``kaggle_io`` uses the same functions in-process.  No ``from __future__`` import: the
file runs pasted after other code."""

#: Kaggle's ConnectX settings besides the clock
_RULES = {"rows": 6, "columns": 7, "inarow": 4, "episodeSteps": 1000, "runTimeout": 1200, "agentTimeout": 60}


def kaggle_dicts(board: list[int], mark: int, step: int, overage: float, act_timeout: float) -> tuple[dict, dict]:
    """``(observation, configuration)`` as Kaggle passes them, as plain dicts.

    ``board``: Kaggle's 42-cell list (0 empty, 1 and 2 the players' stones); ``mark``: the side to move; ``step``: the
    stones played; ``overage``: the bank shown as ``remainingOverageTime``; ``act_timeout``: the free seconds a move."""
    observation = {"board": list(board), "mark": mark, "step": step, "remainingOverageTime": overage}
    configuration = {**_RULES, "actTimeout": act_timeout, "timeout": act_timeout}
    return observation, configuration


class SubmissionError(ValueError):
    """The file is not a submission: it cannot be read or compiled as Python, raises when executed, or
    defines no callable."""


def exec_submission(path: str) -> tuple:
    """``(agent, namespace)``: execute the file in empty globals, as Kaggle does, and take its last callable.  Raises
    ``OSError`` when the file cannot be opened and ``SubmissionError`` (one line) when it is not a submission."""
    try:
        with open(path) as f:
            code = compile(f.read(), str(path), "exec")
    except UnicodeDecodeError:
        raise SubmissionError(f"{path} is not a submission: not a text file") from None
    except (SyntaxError, ValueError) as exc:  # ValueError: null bytes in the source
        where = f" at line {exc.lineno}" if getattr(exc, "lineno", None) else ""
        raise SubmissionError(f"{path} is not a submission: not Python ({getattr(exc, 'msg', exc)}{where})") from None
    namespace: dict = {}
    try:
        exec(code, namespace)
    except Exception as exc:
        first = (str(exc).splitlines() or [""])[0]
        raise SubmissionError(f"{path} is not a submission: executing it raised {type(exc).__name__}: {first}") \
            from exc
    agents = [v for v in namespace.values() if callable(v)]
    if not agents:
        raise SubmissionError(f"{path} is not a submission: it defines no callable agent (Kaggle calls the last "
                              "function the file defines)")
    return agents[-1], namespace
