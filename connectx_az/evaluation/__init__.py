"""Evaluation: Pons grading, running a file the way Kaggle does, players, arenas, duels, benchmarks, reports.

Measures what ``engine``, ``agent`` and ``training`` make.  Import rule: ``engine``, ``agent`` and
the top-level support modules at module level; ``training`` only inside a function that needs it
(e.g. to load a checkpoint or export a model), so grading a built file or an ONNX model never
imports torch.  ``bench_probes/`` holds the programs the benchmarks run in fresh interpreters.
"""
