"""`shlex-sh`: ``subprocess.run(shlex.split(f'sh -c "{R}"'))``: Python's shlex, then argv, no shell.

The route: docker-py callers (``container.exec_run(f'sh -c "{cmd}"')`` splits the string
with ``shlex.split``) and InterCode-style harnesses build the command as text and split it
with Python's ``shlex`` in POSIX mode, then exec the argument vector directly. Inside double
quotes shlex honours only ``\\"`` and ``\\\\`` as escapes and expands nothing: ``$``, backticks
and ``!`` pass through to the final ``sh`` (dash), where bash's own outer parse would have
expanded them. A quote that does not close is a ``ValueError`` (a transport error: nothing runs).
Words past the program become ``$0``, ``$1``, ... of the final shell.

The fix, ``shlex-sh-safe``: ``shlex.split("sh -c " + shlex.quote(R))``, which gives back R.
"""

from __future__ import annotations

import shlex

from ..base import Delivery, check_command, run_program
from ..capture import received_from
from ..sandbox import Sandbox
from ..shells import SH
from .route import Route


class ShlexSh(Route):
    source = ("Python shlex docs (POSIX mode: only \\\\ and \\\" escape inside double quotes); "
              "docker-py exec_run splits string commands with shlex.split")
    component = "Python's shlex.split, then dash as sh, exec'd without a shell"

    def __init__(self, safe: bool = False) -> None:
        super().__init__("shlex-sh", safe, SH, fix="quoted with shlex.quote, split with shlex.split, then sh -c (the fix)",
                         boundary="pasted into sh -c \"R\", split by Python's shlex (its double-quote rules, no "
                                  "expansion), then exec'd: dash runs the program word")

    def argv(self, command: str) -> list[str]:
        text = ("sh -c " + shlex.quote(command)) if self.safe else ('sh -c "' + command + '"')
        return shlex.split(text)

    async def deliver(self, command: str, sandbox: Sandbox) -> Delivery:
        if (why := check_command(command)) is not None:
            return Delivery(received=None, execution=None, transport_error=why)
        try:
            argv = self.argv(command)
        except ValueError as e:
            return Delivery(received=None, execution=None, transport_error=f"{self.name}: shlex.split: {e}")
        received = received_from([a.encode("utf-8", "surrogateescape") for a in argv])
        return await run_program(sandbox, argv, received=received)
