"""One command, one transport, one fresh sandbox: task -> sandbox -> transport -> shell -> validator -> record.

This is the single execution path shared by ``quotebench exec``, replay,
campaigns and the MCP server, so every record is made the same way.

Host work off the loop
    Several executions share one event loop (``replay --concurrency N``, a campaign's
    workers), and that loop also times their commands. So the host-side steps that
    can take long run in worker threads: building the sandbox (the fixture, perhaps a
    git repository, the tmpfs), and the verdict (the validator reads a tree the command
    made). A path's own parsing is off the loop too (the gha paths' YAML:
    :mod:`transports.paths.yaml_worker`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from tasks.schema import Task
from tasks.validate import CheckResult, Verdict, validate

from .base import Delivery, Transport
from .components import missing, needs_of
from .results.record import ConfigInfo, Output, Record, Timing, Usage, new_id, reply_id_for, versions
from .registry import get, shell_of
from .sandbox import Limits, Sandbox, default_userland
from .sandbox import pool
from .sandbox.phases import mark


HARNESS = "harness"
"""Prefix of a record's ``error`` when the harness, not the path, failed (``harness: ...``): out of every rate."""


async def deliver(transport: Transport, command: str, box: Sandbox) -> Delivery:
    """``transport.deliver``, unless a component it needs is missing (:func:`transports.components.missing`):
    then nothing runs and the delivery carries a harness error. Every execution goes through here."""
    if all(c.optional or c.quick for c in needs_of(transport)):
        why = missing(transport)  # lookups only (PATH, imported modules): not worth a thread hop on every execution
    else:
        why = await anyio.to_thread.run_sync(missing, transport)
    if why is not None:
        return Delivery(received=None, execution=None, harness_error=why)
    return await transport.deliver(command, box)


def verdict_for(task: Task, workdir: Path, delivery: Delivery) -> Verdict:
    """The verdict, never an exception: whatever a hostile final state makes the validator raise
    becomes a failed "harness" check naming it in one line, so the record is still written."""
    if delivery.harness_error is not None:
        return Verdict.failed(HARNESS, delivery.harness_error)
    if delivery.execution is None:
        return Verdict.failed("transport", delivery.transport_error or "nothing ran")
    try:
        return validate(task, workdir)
    except Exception as e:  # noqa: BLE001 - recorded, not raised
        first = (str(e).splitlines() or [""])[0]
        return Verdict.failed("harness", f"{type(e).__name__}: {first}")


def build_record(task: Task, transport_name: str, command: str | None, delivery: Delivery, verdict: Verdict, *,
                 reply: str | None = None, run_id: str | None = None, reply_id: str | None = None,
                 config: ConfigInfo | None = None, contract: str = "raw", draw: int = 0,
                 usage: Usage | None = None, generate_ms: float | None = None,
                 extra_versions: dict[str, str] | None = None, error: str | None = None,
                 userland: str | None = None) -> Record:
    ex = delivery.execution
    reply_text = reply if reply is not None else (command or "")
    return Record(
        run_id=run_id or new_id(),
        reply_id=reply_id or reply_id_for(task.id, reply_text),
        config=config or ConfigInfo(),
        contract=contract,
        transport=transport_name,
        shell=shell_of(transport_name), suite=task.suite, userland=userland or default_userland(),
        task_id=task.id, family=task.family, tier=task.tier, draw=draw,
        reply=reply_text, command=command, received=delivery.received, received_note=delivery.received_note,
        damaged=delivery.harness_error is None and (delivery.received != command or delivery.split),
        exit_code=ex.exit_code if ex else None,
        stdout=Output(text=ex.stdout.text, truncated=ex.stdout.truncated) if ex else Output(),
        stderr=Output(text=ex.stderr.text, truncated=ex.stderr.truncated) if ex else Output(),
        timed_out=ex.timed_out if ex else False,
        transport_error=delivery.transport_error,
        verdict=verdict,
        usage=usage or Usage(),
        timing=Timing(generate_ms=generate_ms, exec_ms=round(ex.exec_ms, 3) if ex else None),
        versions={**versions(), **(extra_versions or {})},
        isolation=ex.isolation if ex else None,
        limit_hit=ex.limit_hit if ex else None,
        limits_applied=ex.limits_applied if ex else None,
        error=error or (f"{HARNESS}: {delivery.harness_error}" if delivery.harness_error is not None else None),
        **_harness_fields(delivery),
    )


def _harness_fields(delivery: Delivery) -> dict[str, Any]:
    """A real agent harness route's record fields (absent, so old stores and other transports are unchanged)."""
    h = delivery.harness
    if h is None:
        return {}
    return {"harness": h.name, "harness_version": h.version, "wrapper": h.wrapper, "harness_log": h.log}


async def execute(task: Task, transport: Transport | str, command: str, *, limits: Limits | None = None,
                  **record_fields: Any) -> Record:
    """Run ``command`` through ``transport`` in a fresh sandbox of ``task`` and judge the final state."""
    t = get(transport) if isinstance(transport, str) else transport
    with await _create(task, limits, t) as box:
        mark("create: thread hop back")
        held = list(box.waiting)
        delivery = await deliver(t, command, box)
        mark("transport: after the run (received)")
        pool.ran(box, t.name, held)
        verdict = await anyio.to_thread.run_sync(verdict_for, task, box.workdir, delivery)
        mark("verdict (validate, thread hops)")
    record = build_record(task, t.name, command, delivery, verdict, userland=box.userland, **record_fields)
    mark("record: build")
    return record


async def _create(task: Task, limits: Limits | None, transport: Transport | None = None) -> Sandbox:
    """``Sandbox.create`` in a worker thread: a fixture with a git repository takes long enough to delay
    the clocks of the other runs on this loop. Given the ``transport`` of a one-command record, a sandbox
    built ahead for it (:mod:`transports.sandbox.pool`) where one is ready, with the launchers its delivery's
    runs start (the transport's ``launches``, if it names them) started ahead."""
    def build() -> Sandbox:
        found = None
        if transport is not None:
            found = pool.take(task, limits, transport.name, getattr(transport, "launches", None))
        return found or Sandbox.create(task, limits)
    return await anyio.to_thread.run_sync(build)


@asynccontextmanager
async def chain(task: Task, transport: Transport | str, *, limits: Limits | None = None,
                **record_fields: Any) -> AsyncIterator[Callable[[str], Awaitable[Record]]]:
    """One fresh sandbox of ``task`` for several commands in turn (the multi-turn arm, a shell call's
    commands): each call of the yielded function runs one command through ``transport`` in it and returns
    its record, judged on the state after it. The sandbox ends when the block does."""
    t = get(transport) if isinstance(transport, str) else transport
    with await _create(task, limits) as box:
        async def run(command: str) -> Record:
            delivery = await deliver(t, command, box)
            verdict = await anyio.to_thread.run_sync(verdict_for, task, box.workdir, delivery)
            return build_record(task, t.name, command, delivery, verdict, userland=box.userland, **record_fields)

        yield run


def no_command_record(task: Task, transport_name: str, reason: str, **record_fields: Any) -> Record:
    """A failing record for a reply from which no command could be extracted (nothing runs)."""
    delivery = Delivery(received=None, execution=None, transport_error=None)
    verdict = Verdict(passed=False, checks=[CheckResult(check="command", ok=False, detail=reason)])
    return build_record(task, transport_name, None, delivery, verdict, **record_fields)
