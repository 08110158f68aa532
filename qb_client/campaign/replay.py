"""Fixed-reply replay: the same stored replies through every requested transport.

A transport never causes a new generation: each reply is read once from the
store and executed once per transport, in a fresh sandbox each time. Output is
append-only and keyed by (reply_id, transport), so a rerun with the same
``--out`` executes only what is missing, and a killed replay loses nothing it
had recorded.

An unexpected exception in one execution (a bug, an OS limit such as E2BIG)
never stops the others: it becomes a record whose ``error`` is ``"harness:
Type: message"`` (verdict failed, ``transport_error`` null, nothing received),
which the report counts as an error and leaves out of every rate. Such a
record does not count as done, so a rerun with the same ``--out`` tries that
pair again.

The store is read as ``run --model replay:FILE`` reads it (a missing
``contract`` is ``raw``, a missing ``draw`` 0; R is the stored ``command``, else
extracted from ``reply`` and, for native, from ``tool_calls``), by the rules of
:mod:`qb_client.replies.store`: only an unterminated last line that is not
complete JSON is a torn write (skipped with a note); any other bad line, and a
second, different reply for the same key, is refused with one line naming the
file and the line(s) before anything runs; a line repeating an earlier one
exactly is dropped with a note.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from pydantic import ValidationError

from tasks.load import UnknownTaskError, get_task
from tasks.validate import CheckResult, Verdict
from transports.base import Delivery
from transports.execute import build_record, no_command_record
from transports.results.record import ConfigInfo, Record, Usage, new_id, reply_id_for
from transports.registry import get
from transports.results.store import JsonlWriter, loads, read_jsonl

from ..console import fail
from ..replies.store import Duplicates, SuiteCheck, no_replies, store_lines, torn_warning, warn
from .jobs import cpu_count, stamped
from .limits import command_limits
from .work import describe, stored_label
from .workers import Workers, execute_with, maybe_workers

HARNESS = "harness"
"""Prefix of the ``error`` of a record whose execution raised (see the module docstring)."""


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


def _is_envelope(reply: str | None) -> bool:
    """Whether ``reply`` is already a native reply as a campaign stores it (``{"text", "tool_calls"}``)."""
    if not reply:
        return False
    try:
        value = loads(reply)
    except ValueError:
        return False
    return isinstance(value, dict) and "tool_calls" in value


def load_replies(path: Path) -> list[StoredReply]:
    from ..replies.contracts import ToolCall, UnknownContractError, check_contract, extract_command

    replies = []
    torn: list[int] = []
    dups = Duplicates(path)
    suites = SuiteCheck(path)
    for n, obj in store_lines(path, torn):
        where = f"{path}: line {n}"
        if not isinstance(obj, dict):
            fail(f"{where}: not a JSON object")
        suites.check(n, obj)
        task_id = obj.get("task_id")
        if not isinstance(task_id, str):
            fail(f"{where}: field 'task_id' is missing or not a string")
        try:
            get_task(task_id)
        except UnknownTaskError:
            fail(f"{where}: field 'task_id': unknown task '{task_id}'")
        command, reply, raw_calls = obj.get("command"), obj.get("reply"), obj.get("tool_calls")
        if command is None and reply is None and raw_calls is None:
            fail(f"{where}: needs a 'command' or a 'reply' field")
        for name, value in (("command", command), ("reply", reply)):
            if value is not None and not isinstance(value, str):
                fail(f"{where}: field '{name}' is not a string")
        contract = obj.get("contract", "raw")
        draw = obj.get("draw", 0)
        if not isinstance(contract, str):
            fail(f"{where}: field 'contract' is not a string")
        try:
            check_contract(contract)
        except UnknownContractError as e:
            fail(f"{where}: field 'contract': {e}")
        if not isinstance(draw, int) or isinstance(draw, bool):
            fail(f"{where}: field 'draw' is not an integer")
        calls: list[ToolCall] = []
        if raw_calls is not None:
            if not isinstance(raw_calls, list):
                fail(f"{where}: field 'tool_calls' is not a list")
            for k, c in enumerate(raw_calls):
                try:
                    calls.append(ToolCall.model_validate(c))
                except ValidationError as e:
                    err = e.errors()[0]
                    loc = ".".join(str(p) for p in err["loc"])
                    fail(f"{where}: field 'tool_calls.{k}{'.' + loc if loc else ''}': {err['msg']}")
        try:
            config = ConfigInfo.model_validate(obj.get("config") or {"provider": "replay", "model": path.name})
        except ValueError as e:
            fail(f"{where}: field 'config': {str(e).splitlines()[0]}")
        reason = None
        if command is None:
            # as ReplayProvider does: the text for text contracts, the first tool call for native
            command, reason = extract_command(reply or "", contract, calls)
        if contract == "native" and raw_calls is not None and not _is_envelope(reply):
            # the full reply, as a campaign records a native one: the text and the tool calls
            reply_text = json.dumps({"text": reply or "", "tool_calls": [c.model_dump(mode="json") for c in calls]},
                                    ensure_ascii=False)
        elif reply is not None:
            reply_text = reply
        else:
            reply_text = command
        own_id = obj.get("reply_id")
        if isinstance(own_id, bool) or not isinstance(own_id, (str, int, type(None))):
            fail(f"{where}: field 'reply_id' is not a string")
        own_id = str(own_id) if own_id not in (None, "") else None
        if not dups.keep(n, obj, own_id, (config.label, task_id, contract, draw)):
            continue
        suite_id = get_task(task_id).suite
        salt = f"{config.label}\0{contract}\0{draw}" + (f"\0{suite_id}" if suite_id != "public" else "")
        rid = own_id or reply_id_for(task_id, reply_text or "", salt)
        try:
            usage = Usage.model_validate(obj.get("usage") or {}) if isinstance(obj.get("usage"), dict) else Usage()
        except ValidationError as e:
            err = e.errors()[0]
            fail(f"{where}: field 'usage.{'.'.join(str(p) for p in err['loc'])}': {err['msg']}")
        timing = obj.get("timing") if isinstance(obj.get("timing"), dict) else {}
        generate_ms = timing.get("generate_ms")
        if generate_ms is not None and (isinstance(generate_ms, bool) or not isinstance(generate_ms, (int, float))):
            fail(f"{where}: field 'timing.generate_ms': not a number")
        replies.append(StoredReply(str(rid), task_id, contract, draw, config, reply_text or "", command, reason,
                                   usage, generate_ms))
    if not replies:
        fail(no_replies(path, torn))
    if torn:
        warn(torn_warning(path, torn))
    if dups.note():
        warn(dups.note())
    for note in suites.notes():
        warn(note)
    return replies


def done_keys(out: Path) -> set[tuple[str, str]]:
    """(reply_id, transport) pairs already recorded in ``out`` under the active suite and userland (a record
    made under another one settles nothing here). A torn last line is ignored (the writer removes it, saying
    so); any other bad line is :class:`StoreError`. Harness-error records are ignored too: a rerun tries them
    again."""
    if not out.exists():
        return set()
    return {(r.get("reply_id"), r.get("transport")) for r in read_jsonl(out, warn=None)
            if not is_harness_error(r) and same_axes(r)}


def same_axes(record: dict[str, Any]) -> bool:
    """Whether a record was made in the active suite and userland (``--suite``, ``--userland``)."""
    from tasks.load import suite
    from transports.sandbox import default_userland

    return (record.get("suite", "public"), record.get("userland", "gnu")) == (suite()[0].suite, default_userland())


def is_harness_error(record: dict[str, Any]) -> bool:
    return str(record.get("error") or "").startswith(f"{HARNESS}:")


def error_record(r: StoredReply, transport: str, run_id: str, extra_versions: dict[str, str],
                 exc: BaseException) -> Record:
    """The record of an execution that raised: nothing received, verdict failed, ``error`` says why."""
    what = describe(exc)
    verdict = Verdict(passed=False, checks=[CheckResult(check=HARNESS, ok=False, detail=what)])
    record = build_record(get_task(r.task_id), transport, r.command, Delivery(received=None, execution=None),
                          verdict, reply=r.reply, run_id=run_id, reply_id=r.reply_id, config=r.config,
                          contract=r.contract, draw=r.draw, usage=r.usage, generate_ms=r.generate_ms,
                          extra_versions=extra_versions, error=f"{HARNESS}: {what}")
    return record.model_copy(update={"damaged": False})  # nothing was delivered, so nothing was damaged


async def replay_one(r: StoredReply, transport: str, run_id: str, extra_versions: dict[str, str],
                     workers: Workers | None = None) -> Record:
    task = get_task(r.task_id)
    fields = dict(reply=r.reply, run_id=run_id, reply_id=r.reply_id, config=r.config, contract=r.contract,
                  draw=r.draw, usage=r.usage, generate_ms=r.generate_ms, extra_versions=extra_versions)
    if r.command is None:
        return no_command_record(task, get(transport).name, r.reason or "no command in the reply", **fields)
    return await execute_with(workers, task, transport, r.command, limits=command_limits(), **fields)


async def replay(replies: list[StoredReply], transports: list[str], out: Path, *,
                 concurrency: int | None = None, on_record: Callable[[Record], None] | None = None) -> int:
    """Execute every (reply, transport) pair missing from ``out``, ``concurrency`` at once (default: the CPU
    count); returns how many were executed now.

    Records are appended as they complete, so their order in ``out`` depends on timing: a record is found by
    its (``reply_id``, ``transport``), never by its line (docs/spec.md#concurrency)."""
    transports = list(dict.fromkeys(transports))
    done = done_keys(out)
    todo = [(r, t) for r in replies for t in transports if (r.reply_id, t) not in done]
    if not todo:
        return 0
    run_id = new_id()
    jobs = concurrency or cpu_count()
    limiter = anyio.CapacityLimiter(jobs)
    async with maybe_workers(jobs, transports, len(todo)) as workers:
        await _replay_into(out, todo, run_id, jobs, limiter, workers, on_record)
    return len(todo)


async def _replay_into(out: Path, todo: list[tuple[StoredReply, str]], run_id: str, jobs: int,
                       limiter: anyio.CapacityLimiter, workers: Workers | None,
                       on_record: Callable[[Record], None] | None) -> None:
    with JsonlWriter(out) as writer:
        async def one(r: StoredReply, t: str) -> None:
            extra = {"replay": "1"}
            async with limiter:
                try:
                    record = await replay_one(r, t, run_id, extra, workers)
                except Exception as e:  # noqa: BLE001 - one execution must never abort the replay
                    record = error_record(r, t, run_id, extra, e)
            record = stamped(record, jobs)
            await anyio.to_thread.run_sync(writer.write, record)  # fsynced: never on the loop timing the runs
            if on_record:
                on_record(record)

        async with anyio.create_task_group() as tg:
            for r, t in todo:
                tg.start_soon(one, r, t)


def summary_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The end-of-run summary: one row per config x contract x transport (never pooled across configs).

    Records with ``error`` set (the execution itself failed) are counted apart, under ``errors``, and left
    out of ``n`` and ``rate``, as the report does. ``rate`` is a fraction, null when ``n`` is 0."""
    from transports.registry import ORDER as TRANSPORT_ORDER

    from ..replies.contracts import CONTRACTS as CONTRACT_ORDER

    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in records:
        key = (stored_label(r.get("config")), str(r.get("contract")), str(r.get("transport")))
        row = rows.setdefault(key, {"config": key[0], "contract": key[1], "transport": key[2], "passed": 0, "n": 0,
                                    "rate": None, "damaged": 0, "transport_errors": 0, "errors": 0})
        if r.get("error"):
            row["errors"] += 1
            continue
        row["n"] += 1
        row["passed"] += bool(r["verdict"]["passed"])
        row["damaged"] += bool(r.get("damaged"))
        row["transport_errors"] += bool(r.get("transport_error"))
    for row in rows.values():
        row["rate"] = round(row["passed"] / row["n"], 6) if row["n"] else None
    c_rank = {c: k for k, c in enumerate(CONTRACT_ORDER)}
    t_rank = {t: k for k, t in enumerate(TRANSPORT_ORDER)}
    return sorted(rows.values(), key=lambda x: (x["config"], c_rank.get(x["contract"], len(c_rank)), x["contract"],
                                                t_rank.get(x["transport"], len(t_rank)), x["transport"]))
