"""`nested-single`: R pasted between single quotes: ``bash -c 'R'`` (grammar crossover).

Inside single quotes nothing is active, but any ``'`` in R ends the quoting.
"""

from .capture import InnerShell


def wrap(shell: str, command: str) -> str:
    return shell + " -c '" + command + "'"


NestedSingle = InnerShell("nested-single", "pasted unescaped into bash -c 'R' (single-quote boundary)", wrap)
