"""What engines read, as data and pure functions: flag tables and argv parsers.

Nothing here imports an engine; the tests hold each table to the engine's own parser.
"""
