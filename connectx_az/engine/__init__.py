"""The engine: the rules, the search, the exact solver and the opening book's lookup.

Every module here is pasted into ``submission.py`` (``tools.builder``), so the code that
trains is the code that plays on Kaggle.  Import rule: the standard library, numpy and
``connectx_az.engine`` only; an optional package (numba) only inside a guarded import
(``try``/``except ImportError`` or a function).  Nothing here imports ``agent``, ``testsets``,
``training``, ``evaluation`` or the package's top-level modules (``tests/test_layers.py``).
"""
