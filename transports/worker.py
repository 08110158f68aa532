"""A worker process: ``python -m transports.worker`` runs :func:`transports.execute.execute` for its parent, one
execution at a time, so that a campaign's host-side work spreads over processes instead of one interpreter.

Why processes
    A record's host-side work (the event loop, the tracer thread answering each exec stop, the verdict, the
    record) holds Python's GIL: one process runs it on about one core whatever ``--jobs`` says. A campaign
    (:mod:`qb_client.campaign.workers`) starts ``--jobs`` of these and hands each execution to an idle one.

Protocol (the parent is the only peer: stdin and stdout are pipes it holds)
    * Frames to the worker: an 8-byte big-endian length, then a pickle. The first is the parent's settings
      (:func:`settings`), each later one ``(task, transport, command, limits, fields)``: the parent's own
      objects, so a suite file changed on disk meanwhile changes nothing here.
    * Lines from the worker: ``R`` and the record's JSON (ASCII: a lone surrogate as its escape), or ``E``
      and a one-line error, per execution, in order. The record is rebuilt by the parent from JSON
      (pydantic, validated), never unpickled: the worker runs hostile commands, and what it sends back is
      data.
    * stdout is the protocol only: anything else this process prints goes to stderr (descriptor 1 is made
      a copy of 2), which the parent forwards.

Lifetime
    The worker lets ``SIGINT`` pass (the terminal sends it to the whole process group; the parent decides) and
    ends when its stdin ends: the parent closed it, or the parent died. It finishes the execution at hand
    first; its exit handlers then close what it built (sandboxes built ahead, ssh endpoints), as any
    process does. ``SIGTERM`` (the parent cancelled the execution at hand) ends the run as a cancelled run
    ends, then the process. A worker killed outright leaves what a killed process leaves, swept by the next
    one.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import struct
import sys
from pathlib import Path
from typing import Any, BinaryIO

HEADER = struct.Struct(">Q")
MAX_FRAME = 1 << 30


def settings() -> dict[str, Any]:
    """The process-wide settings an execution depends on, as the CLI left them in this process: the active
    suite, the userland, the default memory and disk caps, the ssh target."""
    from tasks.load import active_directory
    from transports.sandbox import Limits, default_userland
    from transports.ssh.target import configured

    lim = Limits()
    return {"suite": str(active_directory()), "userland": default_userland(), "memory": lim.memory,
            "disk": lim.disk, "ssh": configured()}


def _apply(given: dict[str, Any]) -> None:
    from tasks.load import FAMILIES_DIR, use_suite
    from transports.sandbox import set_default_limits, set_default_userland
    from transports.ssh import target

    suite = Path(given["suite"])
    use_suite(None if suite == FAMILIES_DIR else suite)
    set_default_userland(given["userland"])
    set_default_limits(memory=given["memory"], disk=given["disk"])
    target.use(given["ssh"])


def frame(obj: object) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


def _read(src: BinaryIO, n: int) -> bytes | None:
    """``n`` bytes, or None at the end of stdin (a buffered read returns fewer only there)."""
    data = src.read(n)
    return data if len(data) == n else None


def _read_frame(src: BinaryIO) -> Any:
    """The next frame's object, or None at the end of stdin."""
    head = _read(src, HEADER.size)
    if head is None:
        return None
    (size,) = HEADER.unpack(head)
    if size > MAX_FRAME:
        raise ValueError(f"a frame of {size} bytes")
    data = _read(src, size)
    return None if data is None else pickle.loads(data)  # from the parent, which started this process


async def _serve(src: BinaryIO, out: BinaryIO) -> None:
    import anyio

    from transports.execute import execute

    while True:
        job = await anyio.to_thread.run_sync(_read_frame, src)
        if job is None:
            return
        task, transport, command, limits, fields = job
        try:
            record = await execute(task, transport, command, limits=limits, **fields)
            # ASCII JSON: a lone surrogate (a reply that was not UTF-8) travels as its \udcXX escape
            line = b"R" + json.dumps(record.model_dump(mode="json"), ensure_ascii=True).encode("ascii")
        except Exception as e:
            line = b"E" + f"{type(e).__name__}: {e}".replace("\n", " ").encode("utf-8", "replace")
        out.write(line + b"\n")
        out.flush()


def _end(*_: object) -> None:
    """SIGTERM (the parent gave up the execution at hand): the run is ended as a cancelled one is, and the
    exit handlers close what this process built."""
    raise SystemExit(143)


def main() -> None:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # the terminal's Ctrl-C reaches the whole process group; the parent decides. Caught, not ignored: an
    # ignored signal stays ignored in every program a run execs, and a command would not see its own SIGINT
    signal.signal(signal.SIGINT, lambda *_: None)
    signal.signal(signal.SIGTERM, _end)
    src = sys.stdin.buffer
    given = _read_frame(src)
    if given is None:
        return
    _apply(given)
    import anyio

    anyio.run(_serve, src, out)


if __name__ == "__main__":
    main()
