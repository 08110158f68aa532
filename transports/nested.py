"""`nested`: R pasted between double quotes, unescaped: ``bash -c "R"``.

The double-quoted parser boundary of ``ssh host "R"``, ``docker exec c sh -c "R"``
and CI runners. Inside double quotes ``$``, backticks, ``\\`` and ``"`` stay active.
"""

from .capture import InnerShell


def wrap(shell: str, command: str) -> str:
    return shell + ' -c "' + command + '"'


Nested = InnerShell("nested", 'pasted unescaped into bash -c "R" (double-quote boundary)', wrap)
