"""What clients see: the shell tool, the task prompt and resource, and the optional ``qb_`` controls.

The shell tool has the shape of the providers' native shell tools (one string
field ``command``) and a description that says nothing about quoting or about
the path the command takes: the native contract measures what a model does
when told nothing beyond that. The controls exist for harnesses and are off by
default, so an agent under test sees exactly one tool.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Protocol

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from tasks.load import UnknownTaskError, get_task
from tasks.schema import Task
from transports.lint import LintError, lint

from .config import ServerConfig
from .guard import said
from .keys import Serving
from .observation import COMMAND_DESCRIPTION, RECORD_META, SHELL_DESCRIPTION, render
from .sessions import SessionKey, SessionManager, client_name

TASK_URI = "quotebench://task"


def _json_result(obj: Any) -> CallToolResult:
    data = obj.model_dump(mode="json") if hasattr(obj, "model_dump") else obj
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(data, ensure_ascii=False))],
                          structured_content=data)


def _clean_schema() -> dict[str, Any]:
    """The input schema providers' shell tools have, without pydantic's generated titles."""
    return {
        "type": "object",
        "properties": {"command": {"type": "string", "description": COMMAND_DESCRIPTION}},
        "required": ["command"],
    }


class ToolHost(Protocol):
    """What the MCP surface needs of the server it is built for (:class:`qb_server.server.QBServer` is one).

    Said here, by the module that needs it, so that the server can build its surface without this module
    importing the server back."""

    config: ServerConfig
    serving: Serving
    sessions: SessionManager
    task: Task

    def key_for(self, request_context: Any) -> SessionKey: ...


def make_mcp(app: ToolHost) -> MCPServer:
    """The MCPServer of one :class:`~qb_server.server.QBServer`; every handler goes through ``app``."""
    sessions = app.sessions

    async def key(ctx: Context) -> SessionKey:
        return app.key_for(ctx.request_context)  # SessionError is a ToolError: the client sees why

    async def shell(command: Annotated[str, Field(description=COMMAND_DESCRIPTION)], ctx: Context) -> CallToolResult:
        k = await key(ctx)
        if app.serving == "inproc":
            await sessions.sweep()  # served over stdio or HTTP, the sweeper task does this off the request path
        try:
            async with sessions.use(k) as s:
                s.client = client_name(ctx.request_context)
                record = await sessions.run(s, command)  # a harness failure comes back as its record
        finally:
            if k.kind == "anonymous":
                await sessions.close(k, "one-call")
        text, structured, is_error = render(record)
        if record.guard is not None and (line := said(record.guard)) is not None:
            text = f"{line}\n{text}"
            structured["guard"] = record.guard.action
        meta = {RECORD_META: record.model_dump(mode="json")} if app.config.control else None
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured,
                              is_error=is_error, _meta=meta)

    shell.__name__ = app.config.tool_name  # names the argument model in validation errors ("bashArguments")
    tool = Tool.from_function(
        shell, name=app.config.tool_name, description=SHELL_DESCRIPTION,
        annotations=ToolAnnotations(title="Shell", read_only_hint=False, destructive_hint=True,
                                    open_world_hint=False),
    )
    tool.parameters = _clean_schema()
    mcp = MCPServer(
        "quotebench", version=_version(), tools=[tool], log_level="WARNING",
        warn_on_duplicate_tools=False,
    )

    @mcp.prompt(name="task", description="The instruction of this session's task.")
    async def task_prompt(ctx: Context) -> str:
        s = sessions.lookup(await key(ctx))
        return (s.task if s is not None else app.task).instruction

    @mcp.resource(TASK_URI, name="task", description="The instruction of the server's task.",
                  mime_type="text/plain")
    def task_resource() -> str:
        return app.task.instruction

    if app.config.lint_tool:
        _add_lint(mcp, app.config.transport)
    if app.config.control:
        _add_controls(mcp, app, key)
    return mcp


LINT_DESCRIPTION = ("Predict, without running it, what a command path does to a shell command: whether it arrives "
                    "changed, the exact text the final shell would receive, the spans the path reinterprets and a "
                    "safe text that arrives intact. transport: a path name (nested, ssh, docker-sh, make, ...); "
                    "default: this server's.")


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _add_lint(mcp: MCPServer, served: str) -> None:
    """The ``lint`` tool (:mod:`transports.lint`): pure, stateless, the same transport names as ``serve``."""

    @mcp.tool(name="lint", description=LINT_DESCRIPTION,
              annotations=ToolAnnotations(title="Lint", read_only_hint=True, destructive_hint=False,
                                          open_world_hint=False))
    async def lint_tool(command: str, transport: str | None = None) -> CallToolResult:
        for name, text in (("command", command), ("transport", transport or "")):
            if not text.isascii() and not _utf8(text):  # the reply could not carry it back: say so instead
                raise ToolError(f"the {name} holds a lone surrogate (not Unicode text): no shell argument can "
                                "carry it")
        try:
            result = await anyio.to_thread.run_sync(lint, command, transport or served)
        except LintError as e:
            raise ToolError(str(e)) from None
        return _json_result(result.to_json())


def _add_controls(mcp: MCPServer, app: ToolHost, key: Any) -> None:
    """``qb_`` tools for harnesses: choose or reset the task, judge the state, fetch the last record."""
    sessions = app.sessions

    async def identified(ctx: Context) -> SessionKey:
        k = await key(ctx)
        if k.kind == "anonymous":
            raise ToolError("control tools need a session identity: use stdio, the legacy protocol mode, "
                            "or send _meta['quotebench/sandbox']")
        return k

    def info(s: Any) -> dict[str, Any]:
        return {"session": s.key.label, "task_id": s.task.id, "instruction": s.task.instruction,
                "calls": s.calls}

    @mcp.tool(name="qb_select_task", description="Switch this session to a task, in a fresh sandbox of its fixture.")
    async def qb_select_task(task_id: str, ctx: Context) -> CallToolResult:
        try:
            task = get_task(task_id)
        except UnknownTaskError as e:
            raise ToolError(str(e)) from None
        async with sessions.use(await identified(ctx)) as s:
            await sessions.reset(s, task)
            return _json_result(info(s))

    @mcp.tool(name="qb_reset", description="Give this session a fresh sandbox of its task (the old one is judged, recorded, deleted).")
    async def qb_reset(ctx: Context) -> CallToolResult:
        async with sessions.use(await identified(ctx)) as s:
            await sessions.reset(s)
            return _json_result(info(s))

    @mcp.tool(name="qb_verdict", description="The validator's verdict on the current state of this session's sandbox.")
    async def qb_verdict(ctx: Context) -> CallToolResult:
        async with sessions.use(await identified(ctx)) as s:
            verdict = await sessions.verdict(s)
            return _json_result({**info(s), "verdict": verdict.model_dump(mode="json")})

    @mcp.tool(name="qb_last_record", description="The record (JSON) of this session's last shell call.")
    async def qb_last_record(ctx: Context) -> CallToolResult:
        async with sessions.use(await identified(ctx)) as s:
            if s.last_record is None:
                raise ToolError("this session has made no shell call yet")
            return _json_result(s.last_record)

    @mcp.tool(name="qb_end_session", description="End this session: judge and record its final state, delete its sandbox.")
    async def qb_end_session(ctx: Context) -> CallToolResult:
        record = await sessions.close(await identified(ctx), "ended by client")
        if record is None:
            raise ToolError("this session has no sandbox to end")
        return _json_result(record)


def _version() -> str:
    from transports.results.record import versions

    return versions().get("quotebench", "")
