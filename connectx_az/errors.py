"""The base class of the errors a user sees.  Standard library only, below every tier.

``connectx-az`` prints a ``UserError`` as one ``error:`` line and exits with status 2, never a traceback:
a bad command line, path, setting, checkpoint, model card or file.  Each tier words its own (``ConfigError``,
``CheckpointError``, ``BuildError``, ...) and derives them from this class.  The one exception is the agent's
``backends.ModelError``: ``agent/`` is pasted into ``submission.py``, which imports nothing of the package.
"""


class UserError(Exception):
    """An expected failure, worded for the person running the command, who can fix it."""
