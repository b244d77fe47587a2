"""The programs the benchmarks run in fresh interpreters, one module each with a ``main()``: never imported, each is
read as text (``bench.probe_source``) and run with ``python -c`` or written beside a built submission after
``kaggle_io.sandbox_prelude`` (see the function that names it)."""
