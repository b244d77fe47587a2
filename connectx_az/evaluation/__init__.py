"""Evaluation: grading against the Pons sets, running a file the way Kaggle does, players, arenas, duels, reports.

Measures what ``engine``, ``agent`` and ``training`` make, without ever importing ``training``:
grading a built file or an ONNX model needs onnxruntime at most, never torch.  Import rule: the
tiers below it (``engine``, ``agent``, ``testsets``) and the top-level support modules
(``tests/test_layers.py``).
"""
