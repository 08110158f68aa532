"""`tempscript`: R written to a file outside the working directory, run as ``bash FILE``.

The other fix: no second parse of the text at all.
"""

from __future__ import annotations

from .base import Delivery, check_command
from .sandbox import Sandbox
from .shells import DEFAULT, Shell


class Tempscript:
    name = "tempscript"
    boundary = "written to a script file, run as bash FILE (the fix: no damage expected)"

    def __init__(self, shell: Shell = DEFAULT) -> None:
        self.shell = shell

    def on(self, shell: Shell) -> "Tempscript":
        return Tempscript(shell)

    async def deliver(self, command: str, sandbox: Sandbox) -> Delivery:
        if (why := check_command(command)) is not None:
            return Delivery(received=None, execution=None, transport_error=why)
        script = sandbox.write_file("script.sh", command.encode("utf-8"))  # read-only to the command
        execution = await sandbox.run(self.shell.argv(script))
        # the file bash was started on held exactly R; reading it back afterwards would let the
        # program rewrite (or delete) its own "received"
        return Delivery(received=command, execution=execution)
