"""The command line: ``main`` and one module a command group; tiers below are imported only when a command runs."""
