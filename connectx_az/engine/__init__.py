"""The engine: the rules, the search, the exact solvers and the opening book's lookup.

Every module here is pasted into ``submission.py`` (``tools.builder``): it imports the standard library,
numpy and ``connectx_az.engine`` only, and numba only inside a guarded import (``tests/test_layers.py``)."""
