"""``quotebench exec``: one command through one transport, or several side by side, in a task's sandbox
or in an empty scratch directory.

Without ``--task`` nothing is judged: the record says what the final shell received, its exit code
and output (``verdict`` is null in ``--json``), which is what a newcomer trying a command on a path
wants to see. Exit status: with a task, 0 when every transport passed, else 1; without one, 0 when
a shell ran on every transport, else 1.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import anyio
import typer

from tasks.load import get_task
from tasks.schema import Fixture, Task

from .app import JSON_OPT, app
from .options import SUITE_OPT, TIMEOUT_OPT, USERLAND_OPT, apply_suite, apply_timeout, apply_userland
from ..console import fail, out, print_json
from ..records.execution import compare_table, record_view


MAX_COMMAND_FILE = 8 << 20
"""The largest ``--command-file`` read (a command over 128 KiB cannot be one program argument anyway)."""


def read_command_file(path: Path) -> str:
    """The file verbatim (no stripping); invalid UTF-8 or a NUL byte is bad input. It must be a regular file
    (a FIFO would block, ``/dev/zero`` never ends) of at most :data:`MAX_COMMAND_FILE` bytes."""
    from tasks.safefs import UnsafeRead, read_input

    try:
        data = read_input(path, MAX_COMMAND_FILE)
    except UnsafeRead as e:
        fail(str(e))
    except OSError as e:
        fail(f"{path}: cannot read: {e.strerror or e}")
    nul = data.find(b"\0")
    if nul >= 0:
        fail(f"{path}: contains a NUL byte at offset {nul}; no shell argument can carry it")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        fail(f"{path}: not valid UTF-8 (byte {e.start}: {data[e.start:e.start + 1]!r})")


def scratch_task() -> Task:
    """An empty working directory and no checks: a run that reports, never judges."""
    return Task(id="scratch", family="scratch", tier="none", operation="none", instruction="", payload={},
                fixture=Fixture(), checks=[], solution="", solution_disclosed="")


def _transport_names(transport: Optional[str], transports: Optional[str]) -> list[str]:
    from transports.registry import parse_list

    if (transport is None) == (transports is None):
        fail("give exactly one of --transport NAME, --transports A,B,C")
    return parse_list(transports if transports is not None else transport or "")


async def _run_all(task: Task, names: list[str], command: str) -> list[Any]:
    """Every transport on its own fresh sandbox, a few at a time; records in the order of ``names``."""
    from transports.execute import execute

    from ..campaign.limits import command_limits

    records: list[Any] = [None] * len(names)
    limiter = anyio.CapacityLimiter(max(1, os.cpu_count() or 1))

    async def one(k: int, name: str) -> None:
        async with limiter:
            records[k] = await execute(task, name, command, limits=command_limits())

    async with anyio.create_task_group() as tg:
        for k, name in enumerate(names):
            tg.start_soon(one, k, name)
    return records


def _json_doc(rec: Any, judged: bool) -> dict[str, Any]:
    doc = rec.model_dump(mode="json")
    if not judged:
        doc.update(task_id=None, family=None, tier=None, verdict=None)
    return doc


def _exit_status(docs: list[dict[str, Any]], judged: bool) -> int:
    if judged:
        return 0 if all(d["verdict"]["passed"] for d in docs) else 1
    return 0 if all(d["exit_code"] is not None for d in docs) else 1


@app.command("exec")
def exec_cmd(
    task: Optional[str] = typer.Option(None, "--task", help="Task id, e.g. file-write/control. Without it the "
                                       "command runs in an empty scratch directory and is not judged."),
    transport: Optional[str] = typer.Option(None, "--transport", help="Transport name (see `transports list`)."),
    transports: Optional[str] = typer.Option(None, "--transports", metavar="A,B,C",
                                             help="Several transports, compared side by side in one table."),
    command: Optional[str] = typer.Option(None, "--command", help="The command R."),
    command_file: Optional[Path] = typer.Option(None, "--command-file", help="Read R from this file, verbatim."),
    timeout: Optional[float] = TIMEOUT_OPT,
    as_json: bool = JSON_OPT,
    suite_opt: str = SUITE_OPT,
    userland: str = USERLAND_OPT,
) -> None:
    """One command through one transport (or several) in a fresh sandbox: what the final shell received,
    a character diff when it differs from R, the route's rule for the change, the exit code, the verdict."""
    apply_suite(suite_opt)
    apply_userland(userland)
    apply_timeout(timeout)
    if (command is None) == (command_file is None):
        fail("give exactly one of --command, --command-file")
    if command_file is not None:
        command = read_command_file(command_file)
    assert command is not None
    names = _transport_names(transport, transports)
    judged = task is not None
    t = get_task(task) if task is not None else scratch_task()
    records = anyio.run(_run_all, t, names, command)
    docs = [_json_doc(r, judged) for r in records]
    if as_json:
        print_json(docs[0] if transport is not None else docs)
    elif transport is not None:
        out.print(record_view(docs[0], verdict=judged))
    else:
        out.print(compare_table(docs, verdict=judged))
    raise typer.Exit(_exit_status(docs, judged))
