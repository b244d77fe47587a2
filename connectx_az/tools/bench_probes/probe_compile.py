"""Runs in a fresh interpreter: what a game's first move pays to import numba and compile the kernel.
Prints one JSON line.
"""
import json
import time

start = time.perf_counter()
import numba  # noqa: E402, F401  (timed: the import is what is measured)

imported = time.perf_counter()
from connectx_az.engine import solver_numba  # noqa: E402

kernel = solver_numba.compile_kernel()
print(json.dumps({"import_seconds": imported - start, "compile_seconds": solver_numba.compile_seconds,
                  "error": solver_numba.kernel_error()}))
