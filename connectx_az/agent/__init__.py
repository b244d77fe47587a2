"""The agent: the clock and the move (``template``), its inference backends, the fallback, the numpy ONNX runtime.

Every module here is pasted into ``submission.py`` after the engine (``tools.builder`` reads the folder): it
imports the standard library, numpy, ``engine`` and ``agent`` only, onnxruntime and numba only inside a
guarded import (``tests/test_layers.py``)."""
