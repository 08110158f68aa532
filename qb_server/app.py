"""Building and serving the QuoteBench MCP server.

``build_app`` checks every option and returns a :class:`~qb_server.server.QBServer`
(the session table plus its ``MCPServer``); ``build_server`` returns only the ``MCPServer``
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

import anyio
import anyio.abc
from mcp.server.mcpserver import MCPServer

from transports.sandbox import Limits

from .config import DEFAULT_IDLE_S, DEFAULT_RECLAIM_S, DEFAULT_TASK, HOST_GRACE_S, ServerConfig, check_timeout
from .keys import Serving
from .server import QBServer


def build_app(transport: str = "raw", task: str = DEFAULT_TASK, *, tool_name: str = "bash",
              control: bool = False, record: str | Path | None = None, idle_timeout: float = DEFAULT_IDLE_S,
              limits: Limits | None = None, run_id: str | None = None, serving: Serving = "inproc",
              host_grace: float = HOST_GRACE_S, host_budget: int | None = None,
              reclaim_idle: float = DEFAULT_RECLAIM_S, guard: bool = False, lint_tool: bool = False) -> QBServer:
    """Check the options (a bad one is a one-line ``ValueError``) and build the server.

    transport: registry name (composed names allowed); task: task id; tool_name: the shell tool's
    name; control: add the ``qb_`` tools; record: JSONL path every call and session end is appended to;
    idle_timeout: seconds after which an unused session is ended; limits: sandbox limits; host_grace:
    seconds a call's host work may take beyond the command's time limit before it is abandoned as a
    harness error (see :mod:`qb_server.worker`); host_budget: bytes all sandboxes together may ask of the
    host (:mod:`qb_server.budget`; None: none, for a caller that bounds its sessions itself); reclaim_idle:
    seconds after which an idle session may be ended to make room for a new one (least recently used first);
    guard: lint each call and deliver what arrives as R (:mod:`qb_server.guard`); lint_tool: offer the ``lint``
    tool beside the shell tool.
    """
    config = ServerConfig(transport=transport, task=task, tool_name=tool_name, control=control, record=record,
                          idle_timeout_s=idle_timeout, limits=limits or Limits(), host_grace_s=host_grace,
                          host_budget=host_budget, reclaim_idle_s=reclaim_idle, guard=guard, lint_tool=lint_tool)
    if run_id:
        config.run_id = run_id
    return QBServer(config, serving)


def build_server(transport: str = "raw", task: str = DEFAULT_TASK, *, tool_name: str = "bash",
                 control: bool = False, record: str | Path | None = None,
                 idle_timeout: float = DEFAULT_IDLE_S, limits: Limits | None = None, guard: bool = False,
                 lint_tool: bool = False) -> MCPServer:
    """The ``MCPServer`` alone, for ``Client(server)`` in-process; its :class:`QBServer` is ``.quotebench``."""
    app = build_app(transport, task, tool_name=tool_name, control=control, record=record,
                    idle_timeout=idle_timeout, limits=limits, guard=guard, lint_tool=lint_tool)
    app.mcp.quotebench = app  # type: ignore[attr-defined]
    return app.mcp


def serve(transport: str = "raw", task: str = DEFAULT_TASK, http: str | None = None, tool_name: str = "bash",
          control: bool = False, record: str | Path | None = None, allow_remote: bool = False,
          token: str | None = None, idle_timeout: float = DEFAULT_IDLE_S, timeout: float | None = None,
          host_budget: int | None = None, reclaim_idle: float = DEFAULT_RECLAIM_S, guard: bool = False,
          lint_tool: bool = False) -> None:
    """Serve until stopped: stdio by default, streamable HTTP on ``http="HOST:PORT"`` (path ``/mcp``).

    HTTP listens on loopback only, unless ``allow_remote`` and a bearer ``token`` are both given;
    with a token every request must carry ``Authorization: Bearer <token>``. ``timeout``: one command's
    wall-clock limit in seconds (default: the sandbox's, 10); ``host_budget``, ``reclaim_idle``: see
    :func:`build_app`; ``guard``, ``lint_tool``: the same. Every
    option is checked (``ValueError`` with a one-line message) before anything is served.
    """
    from .budget import default_budget
    from .http import check_bind, serve_http

    bind = check_bind(http, allow_remote, token) if http is not None else None
    limits = Limits(timeout_s=check_timeout(timeout)) if timeout is not None else None
    app = build_app(transport, task, tool_name=tool_name, control=control, record=record,
                    idle_timeout=idle_timeout, limits=limits, serving="http" if bind else "stdio",
                    host_budget=host_budget or default_budget(), reclaim_idle=reclaim_idle, guard=guard,
                    lint_tool=lint_tool)
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
