"""The driver of the `openai-agents` route: the OpenAI Agents SDK's local sandbox agent, built as a user of the SDK
builds it, run once on a fixed prompt against the courier.

Why a script of ours
    The Agents SDK is a library with no command line: someone has to write the program that runs an agent. This
    is that program, the smallest one a user of the SDK's local sandbox writes: a ``SandboxAgent`` with the
    ``Shell`` capability, a ``UnixLocalSandboxClient`` whose workspace is the directory it is given (the
    sandbox's working directory), an ``OpenAIResponsesModel`` on an ``AsyncOpenAI`` client whose base URL is the
    courier's (``OPENAI_BASE_URL``, set by the route's launcher) with a dummy key, tracing off, a small
    ``max_turns``. Everything else is the SDK's defaults.

How it runs
    Like the courier, a standalone file: it imports only the SDK and the standard library, is copied into the
    sandbox read-only (``sandbox.write_file``) and run by the venv's python as ``python -I -B agents_driver.py
    WORKSPACE``. It prints the agent's final output; a failure (the courier gone, the SDK refusing) is one line
    on stderr and exit status 1. It takes no part in ``received``, which the host reads from the kernel's exec
    trace.
"""

from __future__ import annotations

import asyncio
import os
import sys

from agents import OpenAIResponsesModel, RunConfig, Runner, set_tracing_disabled
from agents.sandbox import Manifest, SandboxAgent, SandboxRunConfig
from agents.sandbox.capabilities import Shell
from agents.sandbox.sandboxes import UnixLocalSandboxClient
from openai import AsyncOpenAI

PROMPT = "Run the command the task needs with the exec_command tool."
INSTRUCTIONS = "You run shell commands in the workspace with the exec_command tool."
MODEL = "gpt-courier"
MAX_TURNS = 3
"""One turn for the tool call, one for the closing text, one to spare."""
DUMMY_KEY = "quotebench-courier-dummy-key"


async def run(workspace: str) -> str:
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key=DUMMY_KEY)
    agent = SandboxAgent(name="quotebench", instructions=INSTRUCTIONS, capabilities=[Shell()],
                         model=OpenAIResponsesModel(MODEL, openai_client=client))
    config = RunConfig(sandbox=SandboxRunConfig(client=UnixLocalSandboxClient(), manifest=Manifest(root=workspace)),
                       tracing_disabled=True)
    result = await Runner.run(agent, PROMPT, run_config=config, max_turns=MAX_TURNS)
    return str(result.final_output)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: agents_driver.py WORKSPACE", file=sys.stderr)
        return 2
    try:
        print(asyncio.run(run(argv[0])))
    except Exception as e:  # noqa: BLE001 - one line for the record's stderr, never a traceback
        print(f"agents_driver: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
