"""The agent: the clock and the move (``template``), its inference backends, the fallback, the numpy ONNX runtime.

``template``, ``backends``, ``fallback`` and ``onnx_numpy`` are pasted into
``submission.py`` after the engine.  Import
rule for them: the standard library, numpy, ``engine`` and ``agent`` only; onnxruntime, torch and
numba only inside a guarded import.  The two writers here are not pasted: ``builder`` writes
``submission.py`` and ``book_build`` the opening book.  ``tests/test_layers.py`` checks both rules.
"""
