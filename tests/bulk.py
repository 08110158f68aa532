"""Many executions at once, for the tests that hold a transport to raw over every reference solution."""

from __future__ import annotations

import anyio

from transports.execute import execute
from transports.sandbox import Limits

LIMITS = Limits(timeout_s=5)


def many(transport: str, commands: list) -> list:
    """Each (task, command) on ``transport``, four at a time (independent sandboxes; most of a run is waiting)."""
    out: list = [None] * len(commands)
    limiter = anyio.CapacityLimiter(4)

    async def one(k: int, task, command: str) -> None:
        async with limiter:
            out[k] = await execute(task, transport, command, limits=LIMITS)

    async def all_of() -> None:
        async with anyio.create_task_group() as tg:
            for k, (task, command) in enumerate(commands):
                tg.start_soon(one, k, task, command)
    anyio.run(all_of)
    return out
