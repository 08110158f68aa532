"""Sessions: which sandbox a request belongs to, and when that sandbox ends.

How a request is given its session key is in :mod:`qb_server.keys`.

Ends
    A session ends when its (legacy) connection ends, when it is idle for
    longer than the idle limit, when it is idle for at least ``--reclaim-idle``
    and a new session needs its room (``reclaimed``, least recently used first:
    see :meth:`SessionManager.reclaim`), when a control tool ends it, or when the server
    stops (then by ``shutdown``, even where the stop closes its connection); an
    anonymous one after its call. Ending validates the final state,
    records that verdict (``error="session-end: <reason>"``, ``reply_id``
    ending in ``-session-end``) and deletes the sandbox. A reset or a task
    change ends the sandbox the same way (reason ``reset``).

Record ids
    Each :class:`Session` object draws a short random ``uid`` (8 hex digits),
    and its records' ``reply_id`` is ``mcp-<label>-<uid>-<n>`` (``<n>`` counts
    its calls from 1) or ``mcp-<label>-<uid>-session-end[-<k>]``. A client that
    reuses a ``_meta`` id after ending its session, or a restarted server, gets
    a new ``uid``, so ids never repeat across sessions and the report keeps
    separate sessions apart.

Calls of one session are serialised by a lock: the sandbox is one working
directory, and the records must say in which order its state changed.

Harness failures
    The session's host work (building the sandbox, the delivery, the verdict,
    the cleanup) runs on its own worker thread, each step within a bound
    (:mod:`qb_server.worker`), so a hostile command can stall or crash only its
    own session, never the server. Any exception or overrun there becomes a
    recorded harness error of that session, one line: a call that fails is
    recorded with ``error="harness: <step>: <Type>: <message>"`` (verdict
    failed, nothing received) and its sandbox is ended at once (reason
    ``harness error``, not judged), so the next call starts fresh; an end whose
    verdict or cleanup fails still records its end, with
    ``" (harness: <step>: ...)"`` after the reason. Nothing here raises into the
    serving loop, the idle sweeper or a connection's teardown.
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import metadata

import anyio

from tasks.schema import Task
from tasks.validate import Verdict, validate
from transports.base import Delivery, Transport
from transports.execute import HARNESS, build_record, deliver, verdict_for  # HARNESS: replay's prefix too
from transports.results.record import ConfigInfo, Record, capped
from transports.sandbox import Sandbox
from transports.results.store import JsonlWriter

from .budget import UNLIMITED, HostBudget, runs_per_call
from .config import CLOSE_BOUND_S, CREATE_BOUND_S, MAX_SESSIONS, MAX_STUCK, ServerConfig
from .guard import plan as guard_plan
from .keys import META_KEY, STDIO_KEY, Kind, Serving, SessionError, SessionKey, client_name, key_for
from .unfinished import RecordLock, note_unfinished
from .session import Session
from .worker import one_line, stuck

SESSION_END = "session-end"
HARNESS_END = "harness error"
"""The end reason of a sandbox ended because the harness failed in it."""

__all__ = ["META_KEY", "STDIO_KEY", "Kind", "Serving", "SessionError", "SessionKey", "client_name",
           "key_for", "Session", "SessionManager"]


def _mcp_version() -> str:
    try:
        return metadata.version("mcp")
    except metadata.PackageNotFoundError:
        return "unknown"


class SessionManager:
    """The session table, the one place sandboxes are created, judged, recorded and closed."""

    def __init__(self, config: ServerConfig, transport: Transport, task: Task) -> None:
        self.config = config
        self.transport = transport
        self.task = task
        self.call_bound_s = config.limits.timeout_s + config.host_grace_s
        """The most one call's host work (delivery, then verdict) may take before it is abandoned."""
        self.budget = HostBudget(config.host_budget or UNLIMITED, disk=config.limits.disk,
                                 memory=config.limits.memory, runs=runs_per_call(transport),
                                 wait_s=self.call_bound_s)
        self.sessions: dict[str, Session] = {}
        self.lock: RecordLock | None = None
        self.writer: JsonlWriter | None = None
        if config.record:
            self.lock = RecordLock(config.record)
            self.writer = JsonlWriter(config.record)  # repairs a torn tail before anything is appended
            if self.lock.alone:  # no live server shares the file: sessions still open in it never ended
                note_unfinished(config.record, self.writer)
            self.lock.share()
        self._versions = {"mcp": _mcp_version()}
        self._warned_anonymous = False
        self.closing = False
        """No request gets a session any more (``close_all`` has begun)."""
        self.stopping = False
        """A shutdown was asked for: sessions ending from now on end by ``shutdown``."""

    # -- access ----------------------------------------------------------------

    def lookup(self, key: SessionKey) -> Session | None:
        return self.sessions.get(key.id)

    @asynccontextmanager
    async def use(self, key: SessionKey) -> AsyncIterator[Session]:
        """The live session of ``key``, locked; created (without a sandbox yet) on first use.

        A session closed while this request waited for its lock is replaced by a fresh one,
        so a request never runs in a sandbox that was already judged and deleted.
        """
        if key.kind == "anonymous" and not self._warned_anonymous:
            self._warned_anonymous = True
            print(f"quotebench serve: a request carried no session identity; it gets a one-call sandbox "
                  f"(send _meta['{META_KEY}'] or use the legacy protocol mode to keep files between calls)",
                  file=sys.stderr)
        while True:
            if self.closing:
                raise SessionError("the server is shutting down")
            session = self.sessions.get(key.id)
            if session is None:
                if len(self.sessions) >= MAX_SESSIONS:
                    await self.sweep()
                    while len(self.sessions) >= MAX_SESSIONS and await self.reclaim(with_sandbox=False):
                        pass
                    if len(self.sessions) >= MAX_SESSIONS:
                        raise SessionError(f"too many open sessions ({MAX_SESSIONS}); end one first")
                session = self.sessions[key.id] = Session(key, self.task)
            async with session.lock:
                if session.closed:
                    continue
                session.last_used = time.monotonic()
                try:
                    yield session
                finally:
                    session.last_used = time.monotonic()
                return

    async def ensure_sandbox(self, session: Session) -> Sandbox:
        if session.sandbox is None:
            if (n := stuck()) >= MAX_STUCK:
                raise SessionError(f"the server carries {n} blocked host operations; restart it")
            if not self.budget.fits_sandbox():
                await self.sweep()  # sessions past the idle limit give their share back first
                while not self.budget.fits_sandbox() and await self.reclaim():
                    pass
            self.budget.take_sandbox()
            try:
                session.sandbox = await session.worker().call(
                    "building the sandbox", CREATE_BOUND_S, Sandbox.create, session.task, self.config.limits)
            except BaseException:
                self.budget.give_sandbox()
                raise
        return session.sandbox

    # -- what the tools do (all called inside ``use``) ---------------------------

    async def run(self, session: Session, command: str) -> Record:
        """One command through the transport in the session's sandbox, judged and durably recorded.

        Shielded: a client that cancels (or disconnects) after the command started must not leave a
        changed sandbox without its record; the bounds of the host work end the wait. A harness failure
        is returned as its record (``error`` ``harness: ...``), never raised.
        """
        with anyio.CancelScope(shield=True):
            step = "building the sandbox"
            try:
                box = await self.ensure_sandbox(session)
                step = "the delivery"
                planned = None
                if self.config.guard:  # the lint is pure Python, but a long R is seconds of it: off this loop
                    step = "the guard's lint"
                    planned = await session.worker().call(step, self.config.host_grace_s, guard_plan, command,
                                                          self.transport, box.env())
                    step = "the delivery"
                async with self.budget.run():
                    delivery = await session.worker().call(
                        step, self.call_bound_s, deliver, planned.transport if planned else self.transport,
                        planned.text if planned else command, box)
                step = "the verdict"
                verdict = await session.worker().call(step, self.config.host_grace_s, verdict_for, session.task,
                                                       box.workdir, delivery)
            except SessionError:
                raise
            except Exception as e:  # noqa: BLE001 - whatever a hostile command provokes, the server lives on
                return await self._failed_call(session, command, f"{step}: {one_line(e)}")
            session.calls += 1
            record = self._record(session, command, delivery, verdict, f"{session.calls}")
            if planned is not None:
                record = record.model_copy(update={"guard": planned.guard})
            await self._write(record)
            session.last_record = record
        return record

    async def verdict(self, session: Session) -> Verdict:
        """The verdict on the current state; a harness failure ends the sandbox (recorded) and is a ``SessionError``."""
        with anyio.CancelScope(shield=True):
            try:
                box = await self.ensure_sandbox(session)
                return await session.worker().call("the verdict", self.config.host_grace_s, validate,
                                                   session.task, box.workdir)
            except SessionError:
                raise
            except Exception as e:  # noqa: BLE001
                what = f"the verdict: {one_line(e)}"
                await self._end(session, HARNESS_END, failure=what)
        raise SessionError(f"the tool server could not judge this sandbox ({what}); it was ended")

    async def reset(self, session: Session, task: Task | None = None) -> None:
        """End the current sandbox (recorded) and start the next one fresh, possibly of another task."""
        await self._end(session, "reset")
        if task is not None:
            session.task = task
        try:
            await self.ensure_sandbox(session)
        except SessionError:
            raise
        except Exception as e:  # noqa: BLE001
            raise SessionError(f"the tool server could not build a sandbox: {one_line(e)}") from None

    # -- records -----------------------------------------------------------------

    def _record(self, session: Session, command: str | None, delivery: Delivery, verdict: Verdict, suffix: str,
                error: str | None = None) -> Record:
        """The record of a call or an end, every stored field capped (:func:`transports.results.record.capped`)."""
        return capped(build_record(
            session.task, self.transport.name, command, delivery, verdict,
            reply=command or "", run_id=self.config.run_id,
            reply_id=f"mcp-{session.key.label}-{session.uid}-{suffix}",
            config=ConfigInfo(provider="mcp", model=session.client), contract="native",
            extra_versions=self._versions, error=error,
        ))

    async def _failed_call(self, session: Session, command: str, what: str) -> Record:
        """Record a call the harness failed, then end its sandbox: its state is unknown, the next call starts fresh."""
        session.calls += 1
        verdict = Verdict.failed(HARNESS, what)
        nothing = Delivery(received=None, execution=None)
        record = self._record(session, command, nothing, verdict, f"{session.calls}", error=f"{HARNESS}: {what}")
        record = record.model_copy(update={"damaged": False})  # nothing was delivered, so nothing was damaged
        self._note(session, f"harness error ({what}); its sandbox is ended")
        await self._write(record)
        session.last_record = record
        await self._end(session, HARNESS_END, failure=what)
        return record

    async def _end(self, session: Session, reason: str, failure: str | None = None) -> Record | None:
        """Judge, delete and record the sandbox; None when the session had none. Never raises.

        ``failure``: the harness already failed in this sandbox; it is not judged again (that could
        block or fail the same way) and the end record says so."""
        box, session.sandbox = session.sandbox, None
        if box is None:
            return None
        problems = [failure] if failure else []
        verdict: Verdict | None = None
        if failure is None:
            try:
                verdict = await session.worker().call("the final verdict", self.config.host_grace_s, validate,
                                                      session.task, box.workdir)
            except Exception as e:  # noqa: BLE001
                problems.append(f"the final verdict: {one_line(e)}")
        try:
            await session.worker().call("the cleanup", CLOSE_BOUND_S, box.close)
        except Exception as e:  # noqa: BLE001
            problems.append(f"the cleanup: {one_line(e)}")
            self._note(session, f"its sandbox {box.root} could not be removed ({one_line(e)})")
        finally:
            self.budget.give_sandbox()  # a root that could not be removed is the reaper's from now on
        if verdict is None:
            verdict = Verdict.failed(HARNESS, f"not judged: {problems[0]}")
        session.ends += 1
        suffix = SESSION_END if session.ends == 1 else f"{SESSION_END}-{session.ends}"
        error = f"{SESSION_END}: {reason}" + (f" ({HARNESS}: {'; '.join(problems)})" if problems else "")
        try:
            record = self._record(session, None, Delivery(received=None, execution=None), verdict, suffix,
                                  error=error)
        except Exception as e:  # noqa: BLE001 - e.g. a record field that does not validate
            self._note(session, f"its end ({reason}) could not be recorded: {one_line(e)}")
            return None
        await self._write(record)
        return record

    async def _write(self, record: Record) -> None:
        """Durable (fsynced) before the tool answers, so a killed server loses no answered call.

        A failing write (a full disk) is said on stderr; it does not take the session or the server down."""
        if self.writer is None:
            return
        try:
            await anyio.to_thread.run_sync(self.writer.write, record)
        except Exception as e:  # noqa: BLE001
            print(f"quotebench serve: cannot append {record.reply_id} to {self.config.record}: {one_line(e)}",
                  file=sys.stderr)

    def _note(self, session: Session, text: str) -> None:
        print(f"quotebench serve: session {session.key.label}-{session.uid}: {text}", file=sys.stderr)

    # -- ends ------------------------------------------------------------------

    async def close(self, key: SessionKey, reason: str) -> Record | None:
        """End a session: waits for its running call, then judges and records its final state. Never raises."""
        session = self.sessions.pop(key.id, None)
        if session is None:
            return None
        with anyio.CancelScope(shield=True):
            try:
                async with session.lock:
                    if session.closed:
                        return None
                    session.closed = True
                    try:
                        return await self._end(session, reason)
                    finally:
                        session.retire_worker()
            except Exception as e:  # noqa: BLE001 - a connection's teardown or the sweeper must never die of it
                self._note(session, f"could not be ended ({reason}): {one_line(e)}")
                return None

    async def sweep(self) -> None:
        """Close sessions idle for longer than the limit (a busy one is never idle). Never raises."""
        limit = self.config.idle_timeout_s
        now = time.monotonic()
        for session in list(self.sessions.values()):
            if now - session.last_used > limit and not session.lock.locked():
                await self.close(session.key, "idle")

    async def reclaim(self, *, with_sandbox: bool = True) -> bool:
        """End the least recently used session idle for at least ``reclaim_idle_s`` (reason ``reclaimed``:
        judged and recorded like any end) to make room for a new one; False when none is that idle.

        Why: the host budget and the session table are shared by every client, and an idle session holds
        its share until the idle limit (30 minutes by default), so a few quiet clients locked every other
        one out. A session in a call is never taken, nor one used within ``reclaim_idle_s``. Client
        identities are not authenticated (a client mints ``_meta`` ids at will), so a bound per client
        would not hold; this one does."""
        now = time.monotonic()
        idle = [s for s in self.sessions.values()
                if not s.lock.locked() and now - s.last_used >= self.config.reclaim_idle_s
                and (s.sandbox is not None or not with_sandbox)]
        if not idle:
            return False
        victim = min(idle, key=lambda s: s.last_used)
        self._note(victim, f"reclaimed after {now - victim.last_used:.0f} s idle to make room for a new session")
        await self.close(victim.key, "reclaimed")
        return True

    async def close_all(self, reason: str = "shutdown") -> None:
        """End every session, all at once; from now on no request gets one (so none is left unrecorded)."""
        self.closing = True
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for session in list(self.sessions.values()):
                    tg.start_soon(self.close, session.key, reason)

    def close_writer(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.lock is not None:
            self.lock.release()
