"""Sessions: which sandbox a request belongs to, and when that sandbox ends.

Why keying is explicit
    mcp 2.x clients default to the stateless 2026-07-28 protocol: every request
    is self-contained, arrives on a fresh ``Connection`` and carries no session
    id. "The connection" therefore identifies nobody, and keying a sandbox on it
    would give every call a new sandbox (or, keyed on nothing, one sandbox shared
    by all clients). A sandbox is keyed on the first of these that the request has:

    1. ``_meta["quotebench/sandbox"]`` - an id the client chooses and sends with
       each request. Works on every transport and protocol version; the client
       must make it unguessable if several clients share a server.
    2. the stdio process - a stdio server has exactly one client, so all its
       requests share one session (key ``stdio``).
    3. a handshake-era (legacy) connection - ``Client(..., mode="legacy")``: over
       streamable HTTP that is the ``mcp-session-id``; in-process it is the
       connection object. When the connection ends (HTTP DELETE, the SDK's idle
       timeout, the in-process client leaving) its sandbox is closed at once.
    4. nothing - a stateless request without the ``_meta`` id is a session of
       its own: a fresh sandbox for that one call, closed right after it.

Ends
    A session ends when its connection ends (3), when it is idle for longer
    than the idle limit, when a control tool ends it, or when the server stops;
    an anonymous one (4) after its call. Ending validates the final state,
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
"""

from __future__ import annotations

import hashlib
import re
import sys
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Literal

import anyio
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CLIENT_INFO_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from tasks.schema import Task
from tasks.validate import Verdict, validate
from transports.base import Delivery, Transport
from transports.execute import build_record, verdict_for
from transports.record import ConfigInfo, Record
from transports.sandbox import Sandbox
from transports.store import JsonlWriter

from .config import MAX_SESSIONS, ServerConfig

META_KEY = "quotebench/sandbox"
"""The ``_meta`` key a client sets to name its sandbox."""

SESSION_END = "session-end"
Kind = Literal["meta", "stdio", "http", "connection", "anonymous"]
Serving = Literal["stdio", "http", "inproc"]
_SAFE = re.compile(r"^[A-Za-z0-9_.-]{1,48}$")


class SessionError(ToolError):
    """A request that cannot be given a session (a malformed ``_meta`` id, too many sessions).

    A ``ToolError``, so wherever it is raised the client gets a tool error with this message."""


@dataclass(frozen=True)
class SessionKey:
    """``id`` keys the session table; ``label`` is short and safe to put into record ids."""

    id: str
    label: str
    kind: Kind

    @classmethod
    def meta(cls, value: str) -> "SessionKey":
        label = value if _SAFE.match(value) else "h" + hashlib.sha256(value.encode()).hexdigest()[:12]
        return cls(f"meta:{value}", f"meta-{label}", "meta")

    @classmethod
    def anonymous(cls) -> "SessionKey":
        u = uuid.uuid4().hex[:12]
        return cls(f"anon:{u}", f"anon-{u}", "anonymous")


STDIO_KEY = SessionKey("stdio", "stdio", "stdio")


def _connection(rc: Any) -> Any:
    """The request's ``Connection``. mcp 2.3 has no public accessor yet (its ``Context.connection``
    is not wired), so this reads the session's private attribute and copes with its absence."""
    return getattr(getattr(rc, "session", None), "_connection", None)


def key_for(rc: Any, serving: Serving) -> tuple[SessionKey, Any]:
    """The session key of a request, and the legacy connection whose end should close it (or None)."""
    meta: Mapping[str, Any] = rc.meta or {}
    if META_KEY in meta:
        value = meta[META_KEY]
        if not isinstance(value, str) or not 1 <= len(value) <= 256:
            raise SessionError(f"_meta['{META_KEY}'] must be a string of 1 to 256 characters")
        return SessionKey.meta(value), None
    if serving == "stdio":
        return STDIO_KEY, None
    if rc.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        conn = _connection(rc)
        if conn is not None and getattr(conn, "state", None) is not None:
            key = conn.state.get("quotebench/key")
            if key is None:
                sid = getattr(conn, "session_id", None)
                u = uuid.uuid4().hex
                key = (SessionKey(f"http:{sid}", f"http-{sid[:12]}", "http") if sid
                       else SessionKey(f"conn:{u}", f"conn-{u[:12]}", "connection"))
                conn.state["quotebench/key"] = key
                return key, conn
            return key, None
        sid = getattr(getattr(rc, "request", None), "headers", {}).get("mcp-session-id")
        if sid:
            return SessionKey(f"http:{sid}", f"http-{sid[:12]}", "http"), None
    return SessionKey.anonymous(), None


def client_name(rc: Any) -> str:
    """The client's self-declared name (handshake params, or the 2026 envelope), for the record's config."""
    params = getattr(getattr(rc, "session", None), "client_params", None)
    info = getattr(params, "client_info", None)
    if info is not None and getattr(info, "name", None):
        return str(info.name)
    env = (rc.meta or {}).get(CLIENT_INFO_META_KEY)
    if isinstance(env, Mapping) and env.get("name"):
        return str(env["name"])
    return "unknown"


class Session:
    """One client's sandbox and what happened in it. Touch it only inside ``SessionManager.use``."""

    def __init__(self, key: SessionKey, task: Task) -> None:
        self.key = key
        self.uid = uuid.uuid4().hex[:8]
        """Sets this session's record ids apart from those of any other session with the same key."""
        self.task = task
        self.sandbox: Sandbox | None = None
        self.lock = anyio.Lock()
        self.calls = 0
        self.ends = 0
        self.last_record: Record | None = None
        self.last_used = time.monotonic()
        self.closed = False
        self.client = "unknown"


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
        self.sessions: dict[str, Session] = {}
        self.writer = JsonlWriter(config.record) if config.record else None
        self._versions = {"mcp": _mcp_version()}
        self._warned_anonymous = False
        self.closing = False

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
            session.sandbox = await anyio.to_thread.run_sync(Sandbox.create, session.task, self.config.limits)
        return session.sandbox

    # -- what the tools do (all called inside ``use``) ---------------------------

    async def run(self, session: Session, command: str) -> Record:
        """One command through the transport in the session's sandbox, judged and durably recorded.

        Shielded: a client that cancels (or disconnects) after the command started must not leave a
        changed sandbox without its record; the sandbox's time limit bounds the wait.
        """
        box = await self.ensure_sandbox(session)
        with anyio.CancelScope(shield=True):
            delivery = await self.transport.deliver(command, box)
            verdict = await anyio.to_thread.run_sync(verdict_for, session.task, box.workdir, delivery)
            session.calls += 1
            record = build_record(
                session.task, self.transport.name, command, delivery, verdict,
                reply=command, run_id=self.config.run_id,
                reply_id=f"mcp-{session.key.label}-{session.uid}-{session.calls}",
                config=ConfigInfo(provider="mcp", model=session.client), contract="native",
                extra_versions=self._versions,
            )
            await self._write(record)
            session.last_record = record
        return record

    async def verdict(self, session: Session) -> Verdict:
        box = await self.ensure_sandbox(session)
        return await anyio.to_thread.run_sync(validate, session.task, box.workdir)

    async def reset(self, session: Session, task: Task | None = None) -> None:
        """End the current sandbox (recorded) and start the next one fresh, possibly of another task."""
        await self._end(session, "reset")
        if task is not None:
            session.task = task
        await self.ensure_sandbox(session)

    async def _end(self, session: Session, reason: str) -> Record | None:
        """Judge, record and delete the sandbox; None when the session never had one."""
        box, session.sandbox = session.sandbox, None
        if box is None:
            return None
        try:
            verdict = await anyio.to_thread.run_sync(validate, session.task, box.workdir)
            session.ends += 1
            suffix = SESSION_END if session.ends == 1 else f"{SESSION_END}-{session.ends}"
            record = build_record(
                session.task, self.transport.name, None, Delivery(received=None, execution=None), verdict,
                reply="", run_id=self.config.run_id,
                reply_id=f"mcp-{session.key.label}-{session.uid}-{suffix}",
                config=ConfigInfo(provider="mcp", model=session.client), contract="native",
                extra_versions=self._versions, error=f"{SESSION_END}: {reason}",
            )
            await self._write(record)
            return record
        finally:
            await anyio.to_thread.run_sync(box.close)

    async def _write(self, record: Record) -> None:
        """Durable (fsynced) before the tool answers, so a killed server loses no answered call."""
        if self.writer is not None:
            await anyio.to_thread.run_sync(self.writer.write, record)

    # -- ends ------------------------------------------------------------------

    async def close(self, key: SessionKey, reason: str) -> Record | None:
        """End a session: waits for its running call, then judges and records its final state."""
        session = self.sessions.pop(key.id, None)
        if session is None:
            return None
        with anyio.CancelScope(shield=True):
            async with session.lock:
                if session.closed:
                    return None
                session.closed = True
                return await self._end(session, reason)

    async def sweep(self) -> None:
        """Close sessions idle for longer than the limit (a busy one is never idle)."""
        limit = self.config.idle_timeout_s
        now = time.monotonic()
        for session in list(self.sessions.values()):
            if now - session.last_used > limit and not session.lock.locked():
                await self.close(session.key, "idle")

    async def close_all(self, reason: str = "shutdown") -> None:
        """End every session; from now on no request gets one (so none is left unrecorded)."""
        self.closing = True
        with anyio.CancelScope(shield=True):
            for session in list(self.sessions.values()):
                await self.close(session.key, reason)

    def close_writer(self) -> None:
        if self.writer is not None:
            self.writer.close()
