"""The shell tool of the native contract, as an Inspect tool whose calls go through our transports.

The model sees what an agent plugged into ``quotebench serve`` sees: one tool,
``bash``, one string field ``command``, with the server's own description
(:mod:`qb_server.tools`), so the native contract says nothing about quoting
here either. Calling it runs the command through a transport in a fresh
sandbox of the sample's task by our execute machinery and answers with the
text the server would send.

Why an in-process tool rather than our MCP server through Inspect's
``mcp_server_stdio``: the stdio route starts one ``quotebench serve`` process
per transport (about a second of imports each), adds an MCP round trip per
call (~2.3 ms) and needs the ``qb_`` controls to switch each session to its
sample's task, for the same record in the end. The QuoteBench solver never lets
Inspect run the call anyway (one step, no second turn): the scorer replays it on
every transport. The tool is real for solvers that do loop.
"""

from __future__ import annotations

from inspect_ai.tool import Tool, ToolDef, ToolParam, ToolParams

from qb_server.observation import COMMAND_DESCRIPTION, SHELL_DESCRIPTION, render
from tasks.load import get_task
from transports.execute import execute

TOOL_NAME = "bash"


def shell_tool(task_id: str, transport: str) -> Tool:
    """``bash`` for one sample: each call in a fresh sandbox of ``task_id``, through ``transport``."""
    task = get_task(task_id)

    async def run(command: str) -> str:
        record = await execute(task, transport, command, contract="native")
        return render(record)[0]

    params = ToolParams(properties={"command": ToolParam(type="string", description=COMMAND_DESCRIPTION)},
                        required=["command"])
    return ToolDef(run, name=TOOL_NAME, description=SHELL_DESCRIPTION, parameters=params).as_tool()
