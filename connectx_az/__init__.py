"""AlphaZero for Kaggle ConnectX, in four layers (README "Layout"; ``tests/test_layers.py`` checks the imports).

``engine`` and ``agent`` are pasted into ``submission.py`` (numpy and the standard library);
``training`` trains (torch); ``evaluation`` measures; ``cli`` parses and prints.  ``files``,
``extras`` and ``cards`` are small support modules any layer may use.
"""
