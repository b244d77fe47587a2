"""Runs in a fresh interpreter: what a game's first move pays to import numba and compile the kernel.
Prints one JSON line."""
import json
import time


def main() -> None:
    start = time.perf_counter()
    import numba  # noqa: F401  (timed: the import is what is measured)

    imported = time.perf_counter()
    from connectx_az.engine import solver_numba

    solver_numba.compile_kernel()
    print(json.dumps({"import_seconds": imported - start, "compile_seconds": solver_numba.compile_seconds,
                      "error": solver_numba.kernel_error()}))


if __name__ == "__main__":
    main()
