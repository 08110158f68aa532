"""One configured QuoteBench MCP server: its options, transport and task, the session table, and the MCP
surface (:mod:`qb_server.tools`) every handler of which goes through it.

:mod:`qb_server.app` builds one (``build_app``) and serves it over stdio; :mod:`qb_server.http` serves it
over streamable HTTP.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer

from transports.results.record import Record

from .config import ServerConfig, check_idle, check_record, check_tool_name, resolve_task, resolve_transport
from .keys import Serving, SessionKey, key_for
from .sessions import SessionManager
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
