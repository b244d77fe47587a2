"""Training: the network, self-play, the replay window, proven labels, the generation loop, export.

The torch side of the project (``network``, ``train``, ``export`` import torch; ``config``,
``selfplay``, ``gumbel``, ``replay``, ``solved`` and ``workers`` load without it, so settings
and labels work where torch is missing).  Import rule: ``engine``, ``agent``, ``evaluation``
(the Pons grading a run records) and the top-level support modules; never ``cli``.  This
``__init__`` imports nothing, so ``from connectx_az.training import config`` stays torch-free.
"""
