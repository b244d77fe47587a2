"""What writes files or releases: the builder, the book builder, the labeller, ``compare`` and the speed benchmarks.

The top tier below ``cli``: it may import every tier below it (engine, agent, testsets, training,
evaluation), which never import it.  ``tests/test_layers.py`` holds the order.
"""
