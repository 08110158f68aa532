"""The native contract's execution path: the driver as a real MCP client of ``qb_server``.

The model is handed the server's own shell tool (listed over MCP, converted by
the provider), and the first tool call is executed by calling that tool through
MCP, so a native reply takes the same path an agent plugged into QuoteBench
takes. In-process by default, one server per transport; with ``--server URL``
the driver talks streamable HTTP to a running ``quotebench serve --control``,
whose transport is whatever that server was started with.

Each execution gets its own session (a sandbox id in the request ``_meta``), is
switched to its task with ``qb_select_task``, and is ended after the call, so
no state leaks between replies.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from mcp import Client

from qb_server.app import build_app
from qb_server.server import QBServer
from qb_server.sessions import META_KEY
from qb_server.observation import RECORD_META
from transports.results.record import Record

from ..replies.contracts import ToolSpec
from .limits import command_limits


class NativeError(RuntimeError):
    """The MCP path itself failed (server unreachable, no control surface). Before a campaign starts it is
    bad input (one line, exit 2); during one, an execution that hits it is recorded as an error."""


def _leaf(e: BaseException) -> BaseException:
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e


def _one_line(e: BaseException) -> str:
    leaf = _leaf(e)
    text = " ".join(str(leaf).split())
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__


class NativeExecutor:
    """MCP clients of qb_server, one per transport, open for the life of a campaign."""

    def __init__(self, transports: list[str], server_url: str | None = None) -> None:
        self.server_url = server_url
        self.transports = transports
        self._stack = AsyncExitStack()
        self._clients: dict[str, Client] = {}
        self._apps: list[QBServer] = []
        self.tool_name = "bash"

    async def __aenter__(self) -> "NativeExecutor":
        await self._stack.__aenter__()
        try:
            if self.server_url:
                await self._connect(self.server_url)
            else:
                for t in self.transports:
                    app = build_app(transport=t, control=True, limits=command_limits())
                    self._apps.append(app)
                    self._clients[t] = await self._stack.enter_async_context(Client(app.mcp))
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def _connect(self, url: str) -> None:
        """Connect to a running server; unreachable, not MCP or without the controls is a NativeError."""
        try:
            client = await self._stack.enter_async_context(Client(url))
            names = [t.name for t in (await client.list_tools()).tools]
        except Exception as e:  # noqa: BLE001 - connection refused, not an MCP endpoint, ... (often in a group)
            raise NativeError(f"--server {url}: cannot use it as an MCP server ({_one_line(e)})") from None
        if "qb_select_task" not in names:
            raise NativeError(f"--server {url}: start it with `quotebench serve --control` "
                              "(the driver needs qb_select_task)")
        self._clients["*"] = client

    @classmethod
    async def probe(cls, server_url: str) -> None:
        """Connect and disconnect: a bad ``--server`` is found before a campaign does any work."""
        async with cls([], server_url):
            pass

    async def __aexit__(self, *exc: Any) -> None:
        await self._stack.__aexit__(*exc)
        for app in self._apps:
            await app.aclose()

    def _client(self, transport: str) -> Client:
        return self._clients.get("*") or self._clients[transport]

    async def tools(self) -> list[ToolSpec]:
        """The shell tool as the server lists it (controls hidden): what the model is given."""
        client = next(iter(self._clients.values()))
        listed = (await client.list_tools()).tools
        shell = [t for t in listed if not t.name.startswith("qb_")]
        if not shell:
            raise NativeError("the server lists no shell tool")
        self.tool_name = shell[0].name
        return [ToolSpec(name=t.name, description=t.description or "", input_schema=t.input_schema) for t in shell]

    async def execute(self, task_id: str, command: str, transport: str) -> dict[str, Any]:
        """Run ``command`` through the shell tool in a fresh session of ``task_id``; the server's record."""
        async with self.session(task_id, transport) as run:
            return await run(command)

    @asynccontextmanager
    async def session(self, task_id: str, transport: str) -> AsyncIterator[Callable[[str], Awaitable[dict[str, Any]]]]:
        """One fresh session of ``task_id`` for several commands in turn (a chain, a shell call's commands):
        each call of the yielded function runs one command through the shell tool in the session's one
        sandbox and returns the server's record, judged on the state after it. The session ends with the
        block."""
        client = self._client(transport)
        meta = {META_KEY: f"native-{uuid.uuid4().hex[:12]}"}
        selected = await client.call_tool("qb_select_task", {"task_id": task_id}, meta=meta)
        if selected.is_error:
            raise NativeError(f"qb_select_task {task_id}: {_text(selected)}")

        async def run(command: str) -> dict[str, Any]:
            result = await client.call_tool(self.tool_name, {"command": command}, meta=meta)
            record = (result.meta or {}).get(RECORD_META)
            if record is None:
                raise NativeError(f"the shell tool returned no record: {_text(result)[:200]}")
            if record.get("transport") != transport:
                raise NativeError(f"the server at {self.server_url} runs transport '{record.get('transport')}', "
                                  f"not '{transport}': start one server per transport")
            return Record.model_validate(record).model_dump(mode="json")

        try:
            yield run
        finally:
            await client.call_tool("qb_end_session", {}, meta=meta)


def _text(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content).strip()
