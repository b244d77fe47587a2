"""What writes files or releases: the builder, the book builder, the labeller, ``compare`` and the benchmarks.

The top tier below ``cli``: it may import every tier below it, none of which imports it (``tests/test_layers.py``)."""
