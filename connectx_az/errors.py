"""The base class of the errors a user sees, printed by ``connectx-az`` as one ``error:`` line (status 2).

Each tier derives its own from it, except the agent's ``backends.ModelError``: ``agent/`` is pasted into
``submission.py``, which imports nothing of the package."""


class UserError(Exception):
    """An expected failure, worded for the person running the command, who can fix it."""
