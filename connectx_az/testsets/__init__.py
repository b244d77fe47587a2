"""The test sets every tier grades against: Pascal Pons' sets, their loading and scoring (numpy only).

Used by training (the per-generation policy grade, which positions are in the sets) and by evaluation
alike, so neither imports the other.  ``tests/test_layers.py`` holds the import order.
"""
