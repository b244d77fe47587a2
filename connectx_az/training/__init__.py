"""Training (torch): the network, self-play, replay, labels, the generation loop, runs, export.

``config``, ``selfplay``, ``replay``, ``labels`` and ``workers`` load without torch, and this ``__init__``
imports nothing, so settings and labels work where torch is missing.  Imports ``engine``, ``agent``,
``testsets`` and the top-level modules; never ``evaluation``, ``tools`` or ``cli``."""
