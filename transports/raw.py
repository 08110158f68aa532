"""`raw`: the direct path, argv ``["bash", "-c", R]``. No added boundary.

On another final shell (``raw@dash``) it is ``["dash", "-c", R]``: what ``subprocess.run(R,
shell=True)``, Node's ``child_process.exec(R)`` and a Dockerfile's ``RUN R`` do on Debian.
"""

from __future__ import annotations

from .base import Delivery, check_command, run_program
from .sandbox import Sandbox
from .shells import DEFAULT, Shell


class Raw:
    name = "raw"
    boundary = ""

    def __init__(self, shell: Shell = DEFAULT) -> None:
        self.shell = shell

    def on(self, shell: Shell) -> "Raw":
        return Raw(shell)

    async def deliver(self, command: str, sandbox: Sandbox) -> Delivery:
        if (why := check_command(command)) is not None:
            return Delivery(received=None, execution=None, transport_error=why)
        return await run_program(sandbox, self.shell.argv("-c", command), received=command)
