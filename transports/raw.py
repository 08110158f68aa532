"""`raw`: the direct path, argv ``["bash", "-c", R]``. No added boundary."""

from __future__ import annotations

from .base import Delivery, check_command, run_program
from .sandbox import Sandbox


class Raw:
    name = "raw"
    boundary = ""

    async def deliver(self, command: str, sandbox: Sandbox) -> Delivery:
        if (why := check_command(command)) is not None:
            return Delivery(received=None, execution=None, transport_error=why)
        return await run_program(sandbox, ["bash", "-c", command], received=command)
