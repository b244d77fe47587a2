"""Training: the network, self-play, the replay window, the label format, the generation loop, runs, export.

The torch side of the project (``network``, ``train``, ``export`` import torch; ``config``,
``selfplay``, ``replay``, ``labels`` and ``workers`` load without it, so settings
and labels work where torch is missing).  Import rule: the tiers below it (``engine``, ``agent``,
``testsets``: the Pons grading a run records) and the top-level support modules; never
``evaluation``, ``tools`` or ``cli``.  This ``__init__`` imports nothing, so ``from
connectx_az.training import config`` stays torch-free.
"""
