# ruff: noqa: F821
# exec_submission and kaggle_dicts come from kaggle_io.sandbox_prelude(), which duel.py puts before this source.
"""The duel's child program: a built file's agent behind a pipe, in an interpreter that imitates Kaggle's sandbox.

Never imported: ``duel`` writes ``kaggle_io.sandbox_prelude(blocked)`` followed by this source into a script and
runs it with the submission's path as its argument.  ``main`` reads one JSON request a line (board, mark, step,
bank, act_timeout), calls the file's agent and answers one JSON line: the move (``null`` unless a plain int, as
Kaggle requires), its repr, the seconds the call took (the first executes the file too), the agent's solver and
backend, or an error."""
import json
import sys
import time


def main() -> None:
    replies, sys.stdout = sys.stdout, sys.stderr  # what the file prints must not mix with the replies
    agent = namespace = None
    while True:
        line = sys.stdin.readline()
        if not line:
            break
        request = json.loads(line)
        start = time.perf_counter()
        reply = {}
        try:
            if agent is None:
                agent, namespace = exec_submission(sys.argv[1])
        except Exception as exc:
            reply["load_error"] = f"{type(exc).__name__}: {exc}"
        else:
            try:
                move = agent(*kaggle_dicts(request["board"], request["mark"], request["step"], request["bank"],
                                           request["act_timeout"]))
                reply["move"] = move if type(move) is int else None
                reply["repr"] = repr(move)[:60]
            except Exception as exc:
                reply["error"] = f"{type(exc).__name__}: {exc}"
        reply["seconds"] = time.perf_counter() - start
        player = (namespace or {}).get("_agent")
        reply["solver"] = str(getattr(player, "solver_kind", "") or "")
        reply["backend"] = str(getattr(player, "backend", "") or "")
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


if __name__ == "__main__":
    main()
