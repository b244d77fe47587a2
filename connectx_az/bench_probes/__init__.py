"""The programs ``bench.py`` runs in fresh interpreters (never imported: each is read as text and run with
``python -c`` or written beside a built submission; see the function in ``bench.py`` that names it)."""
