"""The programs ``bench.py`` and ``bench_clock.py`` run in fresh interpreters (never imported: each is read as
text and run with ``python -c`` or written beside a built submission; see the function that names it)."""
