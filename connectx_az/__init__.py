"""AlphaZero for Kaggle ConnectX, in tiers that are its folders (README "Layout"; ``tests/test_layers.py`` holds them).

``engine`` and ``agent`` are pasted into ``submission.py`` (numpy and the standard library); ``testsets``
holds the Pons sets; ``training`` trains (torch); ``evaluation`` grades and plays (no torch); ``tools`` writes
files and releases; ``cli`` parses and prints.  ``files``, ``paths``, ``extras``, ``errors`` and ``cards`` are
small support modules below them all.
"""
