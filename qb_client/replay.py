"""Fixed-reply replay: the same stored replies through every requested transport.

A transport never causes a new generation: each reply is read once from the
store and executed once per transport, in a fresh sandbox each time. Output is
append-only and keyed by (reply_id, transport), so a rerun with the same
``--out`` executes only what is missing, and a killed replay loses nothing it
had recorded.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from tasks.load import UnknownTaskError, get_task
from transports.execute import execute, no_command_record
from transports.record import ConfigInfo, Record, Usage, new_id, reply_id_for
from transports.registry import get
from transports.store import JsonlWriter, read_jsonl

from .console import fail


@dataclass
class StoredReply:
    """One line of a reply store, resolved: the command R is extracted when only the reply is stored."""

    reply_id: str
    task_id: str
    contract: str
    draw: int
    config: ConfigInfo
    reply: str
    command: str | None
    reason: str | None
    usage: Usage
    generate_ms: float | None


def _lines(path: Path) -> Iterator[tuple[int, Any]]:
    """JSON values per line; undecodable bytes survive as lone surrogates so they reach the transport check."""
    try:
        fh = open(path, "rb")
    except OSError as e:
        fail(f"{path}: cannot read: {e.strerror or e}")
    with fh:
        for n, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                yield n, json.loads(raw.decode("utf-8", errors="surrogateescape"))
            except ValueError as e:
                fail(f"{path}: line {n}: not valid JSON ({str(e).splitlines()[0]})")


def load_replies(path: Path) -> list[StoredReply]:
    from .contracts import extract_command

    replies = []
    for n, obj in _lines(path):
        where = f"{path}: line {n}"
        if not isinstance(obj, dict):
            fail(f"{where}: not a JSON object")
        task_id = obj.get("task_id")
        if not isinstance(task_id, str):
            fail(f"{where}: field 'task_id' is missing or not a string")
        try:
            get_task(task_id)
        except UnknownTaskError:
            fail(f"{where}: field 'task_id': unknown task '{task_id}'")
        command, reply = obj.get("command"), obj.get("reply")
        if command is None and reply is None:
            fail(f"{where}: needs a 'command' or a 'reply' field")
        for name, value in (("command", command), ("reply", reply)):
            if value is not None and not isinstance(value, str):
                fail(f"{where}: field '{name}' is not a string")
        contract = obj.get("contract", "raw")
        draw = obj.get("draw", 0)
        if not isinstance(contract, str):
            fail(f"{where}: field 'contract' is not a string")
        if not isinstance(draw, int):
            fail(f"{where}: field 'draw' is not an integer")
        try:
            config = ConfigInfo.model_validate(obj.get("config") or {"provider": "replay", "model": path.name})
        except ValueError as e:
            fail(f"{where}: field 'config': {str(e).splitlines()[0]}")
        reason = None
        if command is None:
            command, reason = extract_command(reply, contract)
        reply_text = reply if reply is not None else command
        rid = obj.get("reply_id") or reply_id_for(task_id, reply_text or "", f"{config.label}\0{contract}\0{draw}")
        usage = Usage.model_validate(obj.get("usage") or {}) if isinstance(obj.get("usage"), dict) else Usage()
        timing = obj.get("timing") if isinstance(obj.get("timing"), dict) else {}
        replies.append(StoredReply(str(rid), task_id, contract, draw, config, reply_text or "", command, reason,
                                   usage, timing.get("generate_ms")))
    if not replies:
        fail(f"{path}: holds no replies")
    return replies


def done_keys(out: Path) -> set[tuple[str, str]]:
    """(reply_id, transport) pairs already recorded in ``out`` (a torn last line is ignored)."""
    if not out.exists():
        return set()
    return {(r.get("reply_id"), r.get("transport")) for r in read_jsonl(out)}


async def replay_one(r: StoredReply, transport: str, run_id: str, extra_versions: dict[str, str]) -> Record:
    task = get_task(r.task_id)
    fields = dict(reply=r.reply, run_id=run_id, reply_id=r.reply_id, config=r.config, contract=r.contract,
                  draw=r.draw, usage=r.usage, generate_ms=r.generate_ms, extra_versions=extra_versions)
    if r.command is None:
        return no_command_record(task, get(transport).name, r.reason or "no command in the reply", **fields)
    return await execute(task, transport, r.command, **fields)


async def replay(replies: list[StoredReply], transports: list[str], out: Path, *,
                 concurrency: int | None = None, on_record: Callable[[Record], None] | None = None) -> int:
    """Execute every (reply, transport) pair missing from ``out``; returns how many were executed now."""
    done = done_keys(out)
    todo = [(r, t) for r in replies for t in transports if (r.reply_id, t) not in done]
    if not todo:
        return 0
    run_id = new_id()
    limiter = anyio.CapacityLimiter(concurrency or os.cpu_count() or 2)
    with JsonlWriter(out) as writer:
        async def one(r: StoredReply, t: str) -> None:
            async with limiter:
                record = await replay_one(r, t, run_id, {"replay": "1"})
            writer.write(record)
            if on_record:
                on_record(record)

        async with anyio.create_task_group() as tg:
            for r, t in todo:
                tg.start_soon(one, r, t)
    return len(todo)
