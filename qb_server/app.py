"""Building and serving the QuoteBench MCP server.

``build_app`` checks every option and returns a :class:`QBServer` (the session
table plus its ``MCPServer``); ``build_server`` returns only the ``MCPServer``
for in-process use (``Client(build_server(...))``); ``serve`` runs it over
stdio or streamable HTTP until the client or a signal stops it, and then ends
every open session, so each sandbox's final verdict is recorded.

How a request finds its sandbox is described in :mod:`qb_server.sessions`.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from mcp.server.mcpserver import MCPServer

from transports.results.record import Record
from transports.sandbox import Limits

from .config import (
    DEFAULT_IDLE_S, DEFAULT_RECLAIM_S, DEFAULT_TASK, HOST_GRACE_S, ServerConfig, check_idle, check_record, check_timeout, check_tool_name, resolve_task,
    resolve_transport,
)
from .sessions import Serving, SessionKey, SessionManager, key_for
from .tools import make_mcp
from .worker import one_line


class QBServer:
    """One configured server: options, the transport, the session table and the MCP surface."""

    def __init__(self, config: ServerConfig, serving: Serving = "inproc") -> None:
        check_tool_name(config.tool_name)
        check_idle(config.idle_timeout_s)
        check_idle(config.reclaim_idle_s, "--reclaim-idle")
        self.transport = resolve_transport(config.transport)
        self.task = resolve_task(config.task)
        check_record(config.record)
        self.config = config
        self.serving: Serving = serving
        self.sessions = SessionManager(config, self.transport, self.task)
        self.mcp: MCPServer = make_mcp(self)

    def key_for(self, request_context: Any) -> SessionKey:
        """The request's session key; a legacy connection's end is hooked to close its session."""
        key, connection = key_for(request_context, self.serving)
        if connection is not None:
            connection.exit_stack.push_async_callback(self._disconnected, key)
        return key

    async def _disconnected(self, key: SessionKey) -> None:
        """A legacy connection ended: by its client (``disconnected``), or because the server is stopping."""
        stopping = self.sessions.stopping or self.sessions.closing
        await self.sessions.close(key, "shutdown" if stopping else "disconnected")

    async def run_command(self, command: str, sandbox: str) -> Record:
        """Run one command in the session named ``sandbox`` (as the ``_meta`` id would), without MCP.

        For a driver living in the same process; over MCP, a client calls the shell tool and, with
        ``control``, reads the record from the result's ``_meta`` or from ``qb_last_record``.
        """
        async with self.sessions.use(SessionKey.meta(sandbox)) as s:
            return await self.sessions.run(s, command)

    async def end_session(self, sandbox: str, reason: str = "ended by client") -> Record | None:
        return await self.sessions.close(SessionKey.meta(sandbox), reason)

    async def aclose(self, reason: str = "shutdown") -> None:
        """End every session (recording its final verdict) and close the record file."""
        if reason == "shutdown":
            self.sessions.stopping = True
        await self.sessions.close_all(reason)
        self.sessions.close_writer()

    async def sweeper(self, every_s: float | None = None) -> None:
        """Close idle sessions even when no request arrives to trigger the lazy sweep.

        Nothing a session does may end this task: a failed sweep is one line on stderr, and the next
        one comes as usual (a dead sweeper would leave idle sandboxes forever, or, raising, end the server)."""
        every = every_s or min(60.0, self.config.idle_timeout_s / 2)
        while True:
            await anyio.sleep(every)
            try:
                await self.sessions.sweep()
            except Exception as e:  # noqa: BLE001
                print(f"quotebench serve: the idle sweep failed: {one_line(e)}", file=sys.stderr)


def build_app(transport: str = "raw", task: str = DEFAULT_TASK, *, tool_name: str = "bash",
              control: bool = False, record: str | Path | None = None, idle_timeout: float = DEFAULT_IDLE_S,
              limits: Limits | None = None, run_id: str | None = None, serving: Serving = "inproc",
              host_grace: float = HOST_GRACE_S, host_budget: int | None = None,
              reclaim_idle: float = DEFAULT_RECLAIM_S) -> QBServer:
    """Check the options (a bad one is a one-line ``ValueError``) and build the server.

    transport: registry name (composed names allowed); task: task id; tool_name: the shell tool's
    name; control: add the ``qb_`` tools; record: JSONL path every call and session end is appended to;
    idle_timeout: seconds after which an unused session is ended; limits: sandbox limits; host_grace:
    seconds a call's host work may take beyond the command's time limit before it is abandoned as a
    harness error (see :mod:`qb_server.worker`); host_budget: bytes all sandboxes together may ask of the
    host (:mod:`qb_server.budget`; None: none, for a caller that bounds its sessions itself); reclaim_idle:
    seconds after which an idle session may be ended to make room for a new one (least recently used first).
    """
    config = ServerConfig(transport=transport, task=task, tool_name=tool_name, control=control, record=record,
                          idle_timeout_s=idle_timeout, limits=limits or Limits(), host_grace_s=host_grace,
                          host_budget=host_budget, reclaim_idle_s=reclaim_idle)
    if run_id:
        config.run_id = run_id
    return QBServer(config, serving)


def build_server(transport: str = "raw", task: str = DEFAULT_TASK, *, tool_name: str = "bash",
                 control: bool = False, record: str | Path | None = None,
                 idle_timeout: float = DEFAULT_IDLE_S, limits: Limits | None = None) -> MCPServer:
    """The ``MCPServer`` alone, for ``Client(server)`` in-process; its :class:`QBServer` is ``.quotebench``."""
    app = build_app(transport, task, tool_name=tool_name, control=control, record=record,
                    idle_timeout=idle_timeout, limits=limits)
    app.mcp.quotebench = app  # type: ignore[attr-defined]
    return app.mcp


def serve(transport: str = "raw", task: str = DEFAULT_TASK, http: str | None = None, tool_name: str = "bash",
          control: bool = False, record: str | Path | None = None, allow_remote: bool = False,
          token: str | None = None, idle_timeout: float = DEFAULT_IDLE_S, timeout: float | None = None,
          host_budget: int | None = None, reclaim_idle: float = DEFAULT_RECLAIM_S) -> None:
    """Serve until stopped: stdio by default, streamable HTTP on ``http="HOST:PORT"`` (path ``/mcp``).

    HTTP listens on loopback only, unless ``allow_remote`` and a bearer ``token`` are both given;
    with a token every request must carry ``Authorization: Bearer <token>``. ``timeout``: one command's
    wall-clock limit in seconds (default: the sandbox's, 10); ``host_budget``, ``reclaim_idle``: see
    :func:`build_app`. Every
    option is checked (``ValueError`` with a one-line message) before anything is served.
    """
    from .budget import default_budget
    from .http import check_bind, serve_http

    bind = check_bind(http, allow_remote, token) if http is not None else None
    limits = Limits(timeout_s=check_timeout(timeout)) if timeout is not None else None
    app = build_app(transport, task, tool_name=tool_name, control=control, record=record,
                    idle_timeout=idle_timeout, limits=limits, serving="http" if bind else "stdio",
                    host_budget=host_budget or default_budget(), reclaim_idle=reclaim_idle)
    if bind is None:
        anyio.run(_serve_stdio, app)
    else:
        anyio.run(serve_http, app, bind, token)


async def _serve_stdio(app: QBServer) -> None:
    """Run until stdin closes or SIGTERM/SIGINT arrives, then end the sessions cleanly."""
    async def stop_on_signal(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            task_status.started()
            async for _ in signals:
                app.sessions.stopping = True
                # The SDK reads stdin in a worker thread that no cancellation can interrupt, so the
                # serving task would never finish: end the sessions (a running call completes and is
                # recorded first), then leave. The records are already fsynced.
                await app.aclose("shutdown")
                atexit._run_exitfuncs()  # e.g. the nested transport's shim directory; os._exit skips them
                sys.stderr.flush()
                os._exit(0)

    reason = "shutdown"
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(stop_on_signal)
            print(f"quotebench serve: MCP over stdio (transport {app.config.transport}, task {app.task.id})",
                  file=sys.stderr)
            tg.start_soon(app.sweeper)
            await app.mcp.run_stdio_async()
            reason = "disconnected"  # stdin closed: the one client has gone
            tg.cancel_scope.cancel()
    finally:
        await app.aclose(reason)
