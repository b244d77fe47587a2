"""The agent: the clock and the move (``template``), its inference backends, the fallback, the numpy ONNX runtime.

``template``, ``backends``, ``fallback`` and ``onnx_numpy`` are pasted into
``submission.py`` after the engine.  Import
rule for them: the standard library, numpy, ``engine`` and ``agent`` only; onnxruntime and
numba only inside a guarded import.  Every module here is pasted: ``tools.builder`` reads the
folder.  ``tests/test_layers.py`` checks the rule.
"""
