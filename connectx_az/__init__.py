"""AlphaZero for Kaggle ConnectX, in tiers that are its folders (README "Layout"; ``tests/test_layers.py``).

``engine`` and ``agent`` are pasted into ``submission.py``; ``testsets``, ``training``, ``evaluation``,
``tools`` and ``cli`` follow, with small support modules below them all."""
