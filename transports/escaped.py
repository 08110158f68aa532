"""`escaped`: the fix at the interpolation point, ``bash -c <shlex.quote(R)>``.

Same added shell as `nested`, but R is quoted for it, so the inner shell must
receive R unchanged; the property tests hold it to exactly that.
"""

import shlex

from .capture import InnerShell


def wrap(shell: str, command: str) -> str:
    return shell + " -c " + shlex.quote(command)


Escaped = InnerShell("escaped", "quoted with shlex.quote, then bash -c (the fix: no damage expected)", wrap)
