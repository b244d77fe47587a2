"""Evaluation: grading against the Pons sets, running a file the way Kaggle does, players, arenas, duels, reports.

Measures what ``engine``, ``agent`` and ``training`` make without importing ``training``: grading a built file
or an ONNX model needs onnxruntime at most, never torch (``tests/test_layers.py`` holds the import order)."""
