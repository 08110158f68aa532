"""The MCP server's lint: the ``lint`` tool beside the shell tool, and the guarded shell tool whose traced
``received`` is R where the unguarded route would have damaged it. Real MCP clients, over stdio and in process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from qb_server.app import build_server
from test_mcp_server import ROOT, _calls, _env

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap")]
WRITE = 'echo "hello world" > out.txt'


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_lint_tool_is_offered_only_when_asked() -> None:
    plain = build_server("nested")
    async with Client(plain) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["bash"]
    await plain.quotebench.aclose()
    server = build_server("nested", lint_tool=True)
    async with Client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"bash", "lint"} and tools["lint"].annotations.read_only_hint
        found = await client.call_tool("lint", {"command": WRITE})
        assert found.structured_content["damaged"] is True
        assert found.structured_content["received"] == "echo hello"
        assert found.structured_content["safe"]["text"] == 'echo \\"hello world\\" > out.txt'
        on_raw = await client.call_tool("lint", {"command": WRITE, "transport": "raw"})
        assert on_raw.structured_content["damaged"] is False
        bad = await client.call_tool("lint", {"command": WRITE, "transport": "bogus"})
        assert bad.is_error and "unknown transport 'bogus'" in bad.content[0].text
    await server.quotebench.aclose()


async def test_the_guarded_shell_delivers_r_intact_and_says_so(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"
    params = StdioServerParameters(command=sys.executable, args=["-m", "qb_server", "--transport", "nested",
                                                                 "--guard", "--record", str(record)],
                                   env=_env(tmp_path), cwd=str(ROOT))
    async with Client(params) as client:
        first = await client.call_tool("bash", {"command": WRITE})
        assert first.content[0].text.startswith("guard: this path would have changed the command")
        read = await client.call_tool("bash", {"command": "cat out.txt"})
        assert read.structured_content["stdout"] == "hello world\n"
        assert "guard" not in read.content[0].text  # cat out.txt is intact on nested: sent as it is
    calls = _calls(record)
    assert calls[0]["command"] == WRITE and calls[0]["received"] == WRITE and calls[0]["damaged"] is False
    assert calls[0]["guard"] == {"action": "escaped", "predicted_damaged": True, "predicted_known": True,
                                 "predicted_received": "echo hello", "delivered": 'echo \\"hello world\\" > out.txt',
                                 "via": None}
    assert calls[1]["guard"]["action"] == "as-is" and calls[1]["received"] == "cat out.txt"


async def test_a_guarded_tmux_call_goes_through_the_safe_twin(tmp_path: Path, require) -> None:
    require("tmux")
    command = "echo 'a!b' > out.txt"  # history expansion: no text survives the pane's bash
    record = tmp_path / "r.jsonl"
    server = build_server("tmux", guard=True, record=record)
    async with Client(server) as client:
        result = await client.call_tool("bash", {"command": command}, meta={"quotebench/sandbox": "t"})
        assert result.content[0].text.startswith("guard: this path would have changed the command; it was sent "
                                                 "through tmux-safe")
    await server.quotebench.aclose()
    call = _calls(record)[0]
    assert call["received"] == command and call["damaged"] is False and call["transport"] == "tmux"
    assert call["guard"]["action"] == "twin" and call["guard"]["via"] == "tmux-safe"


def test_serve_help_names_guard_and_lint() -> None:
    import subprocess

    out = subprocess.run([sys.executable, "-m", "qb_server", "--help"], capture_output=True, text=True, cwd=ROOT,
                         timeout=60).stdout
    assert "--guard" in out and "--lint" in out
    assert json  # noqa: B018 - imported for the records' fields above
