"""The command line: ``main`` (the parser and the errors) and one module per command group, each with its parser.

The top tier: it imports the tiers below it only inside the functions that run a command.
"""
