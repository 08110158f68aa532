"""The providers' own shell tools (``--native-tool builtin``) and the multi-turn wire format, through the real
anthropic and openai SDKs against the local fake server. Every fake response is built from the SDK's own
types (``anthropic.types.Message``, ``openai.types.responses.Response``) and every request we send is
validated against the SDK's own request types, so a wire-format mistake on either side fails here."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic.types as at
import openai.types.responses as ot
import pytest
from fake_llm import FakeServer, Scripted, Seen, running_fake_server
from openai.types.responses.response_function_shell_tool_call import Action
from pydantic import TypeAdapter

from qb_client.adapters.providers import GenerationRequest, RetryPolicy, make_provider
from qb_client.adapters.providers.base import Exchange, Observation
from tasks.load import get_task

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]
HOSTILE = ("printf '%s\\n' \"a'b\" $HOME `id` \\ ! % * ? [x] {a,b} ~ # ; & | < > (\n"
           "\tnext\rline é 漢 🙂 end\\")
FAST = RetryPolicy(tries=1, base_s=0.001, cap_s=0.01, jitter=0.5)
SOLUTION = get_task("file-write/control").solution


# ---------------------------------------------------------------- fake responses from the SDKs' own types


def anthropic_body(*blocks: Any, stop: str = "tool_use") -> dict[str, Any]:
    msg = at.Message(id="msg_1", type="message", role="assistant", model="claude-test", content=list(blocks),
                     stop_reason=stop, stop_sequence=None, usage=at.Usage(input_tokens=5, output_tokens=7))
    return msg.model_dump(mode="json")


def bash_use(command: str, id: str = "toolu_1") -> at.ToolUseBlock:
    return at.ToolUseBlock(id=id, type="tool_use", name="bash", input={"command": command})


def openai_body(*items: Any) -> dict[str, Any]:
    resp = ot.Response(id="resp_1", object="response", created_at=0, model="gpt-test", output=list(items),
                       parallel_tool_calls=True, tool_choice="auto", tools=[], status="completed",
                       usage=ot.ResponseUsage(input_tokens=5, output_tokens=7, total_tokens=12,
                                              input_tokens_details={"cached_tokens": 0, "cache_write_tokens": 0},
                                              output_tokens_details={"reasoning_tokens": 0}))
    return resp.model_dump(mode="json")


def shell_call(commands: list[str], call_id: str = "call_1") -> ot.ResponseFunctionShellToolCall:
    return ot.ResponseFunctionShellToolCall(id="sh_1", type="shell_call", call_id=call_id, status="completed",
                                            action=Action(commands=commands, timeout_ms=10000))


def text_item(text: str) -> ot.ResponseOutputMessage:
    return ot.ResponseOutputMessage(id="msg_1", type="message", role="assistant", status="completed",
                                    content=[ot.ResponseOutputText(type="output_text", text=text, annotations=[])])


# what we send, checked against the SDKs' request types (a missing required key or a wrong literal fails)
ANTHROPIC_MESSAGES = TypeAdapter(list[at.MessageParam])
ANTHROPIC_BASH = TypeAdapter(at.ToolBash20250124Param)
OPENAI_INPUT = TypeAdapter(ot.ResponseInputParam)
OPENAI_SHELL = TypeAdapter(ot.FunctionShellToolParam)


@pytest.fixture(scope="module")
def live() -> Iterator[FakeServer]:
    yield from running_fake_server()


@pytest.fixture
def fake(live: FakeServer, monkeypatch: pytest.MonkeyPatch) -> FakeServer:
    live.reset()
    for var in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "HTTP_PROXY", "HTTPS_PROXY",
                "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-test")
    return live


def generate(kind: str, fake: FakeServer, request: GenerationRequest):
    p = make_provider(f"{kind}:m", base_url=fake.url, retry=FAST, timeout_s=5.0)

    async def go():
        try:
            return await p.generate(request)
        finally:
            await p.aclose()

    return asyncio.run(go())


def native_request(kind: str, turns: int = 1, history: list[Exchange] | None = None) -> GenerationRequest:
    from qb_client.replies.contracts import NATIVE_TOOL
    from transports.results.record import ConfigInfo

    req = GenerationRequest.for_task(get_task("file-write/control"), "native", ConfigInfo(provider=kind, model="m"),
                                     native_tool="builtin", turns=turns)
    return req.model_copy(update={"tools": [NATIVE_TOOL], "history": history or []})


# ---------------------------------------------------------------- one-shot round trips


def test_anthropic_bash_tool_round_trip(fake: FakeServer) -> None:
    fake.queue(Scripted(body=anthropic_body(at.TextBlock(type="text", text="Running it."), bash_use(HOSTILE),
                                            bash_use("echo second", "toolu_2"))))
    gen = generate("anthropic", fake, native_request("anthropic"))
    sent = fake.seen[0].body
    assert sent["tools"] == [{"type": "bash_20250124", "name": "bash"}]
    ANTHROPIC_BASH.validate_python(sent["tools"][0])
    ext = gen.extract("native")
    assert ext.command == HOSTILE and ext.command.encode() == HOSTILE.encode() and ext.commands is None
    assert [c.id for c in gen.tool_calls] == ["toolu_1", "toolu_2"]
    assert "`bash` tool" in sent["system"]


def test_anthropic_restart_call_has_no_command(fake: FakeServer) -> None:
    restart = at.ToolUseBlock(id="toolu_1", type="tool_use", name="bash", input={"restart": True})
    fake.queue(Scripted(body=anthropic_body(restart)))
    ext = generate("anthropic", fake, native_request("anthropic")).extract("native")
    assert ext.command is None and ext.error == "tool call 'bash': arguments have no 'command' field"


def test_openai_shell_tool_round_trip_keeps_every_command(fake: FakeServer) -> None:
    fake.queue(Scripted(body=openai_body(shell_call([HOSTILE, SOLUTION]))))
    gen = generate("openai", fake, native_request("openai"))
    sent = fake.seen[0].body
    assert sent["tools"] == [{"type": "shell", "environment": {"type": "local"}}]
    OPENAI_SHELL.validate_python(sent["tools"][0])
    assert "`shell` tool" in sent["system"] if "system" in sent else "`shell` tool" in sent["instructions"]
    ext = gen.extract("native")
    assert ext.command == HOSTILE and ext.commands == [HOSTILE, SOLUTION]
    assert gen.tool_calls[0].kind == "shell_call" and gen.tool_calls[0].id == "call_1"


def test_openai_chat_has_no_builtin_tool() -> None:
    r = subprocess.run([*QB, "run", "--model", "openai-chat:m", "--base-url", "http://127.0.0.1:9/v1",
                        "--native-tool", "builtin", "--out", "/tmp/never"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "--native-tool builtin: openai-chat has no built-in shell tool" in r.stderr


# ---------------------------------------------------------------- a chain's later turns on the wire


def observation() -> Observation:
    return Observation(text="exit code: 1\nstdout: (empty)\nstderr:\nboom", is_error=True, stderr="boom\n",
                       exit_code=1)


def test_anthropic_turn_two_sends_the_tool_result(fake: FakeServer) -> None:
    fake.queue(Scripted(body=anthropic_body(bash_use(HOSTILE), bash_use("ls", "toolu_2"))),
               Scripted(body=anthropic_body(at.TextBlock(type="text", text="Done."), stop="end_turn")))
    first = generate("anthropic", fake, native_request("anthropic", turns=2))
    history = [Exchange(text=first.text, tool_calls=first.tool_calls, echo=first.echo, observations=[observation()])]
    second = generate("anthropic", fake, native_request("anthropic", turns=2, history=history))
    assert second.tool_calls == [] and second.text == "Done."
    messages = fake.seen[1].body["messages"]
    ANTHROPIC_MESSAGES.validate_python(messages)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": HOSTILE}},
                                      {"type": "tool_use", "id": "toolu_2", "name": "bash", "input": {"command": "ls"}}]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "exit code: 1\nstdout: (empty)\nstderr:\nboom",
         "is_error": True},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "not run: only the first tool call of a reply runs",
         "is_error": True}]


def test_openai_turn_two_sends_a_shell_call_output_per_command(fake: FakeServer) -> None:
    fake.queue(Scripted(body=openai_body(shell_call([HOSTILE, "ls"]))),
               Scripted(body=openai_body(text_item("Done."))))
    first = generate("openai", fake, native_request("openai", turns=2))
    ok = Observation(text="exit code: 0\nstdout:\nx\nstderr: (empty)", stdout="x\n", exit_code=0)
    history = [Exchange(text=first.text, tool_calls=first.tool_calls, echo=first.echo,
                        observations=[observation(), ok])]
    generate("openai", fake, native_request("openai", turns=2, history=history))
    items = fake.seen[1].body["input"]
    OPENAI_INPUT.validate_python(items)
    assert items[1]["type"] == "shell_call" and items[1]["action"]["commands"] == [HOSTILE, "ls"]
    assert items[2] == {"type": "shell_call_output", "call_id": "call_1", "output": [
        {"stdout": "", "stderr": "boom\n", "outcome": {"type": "exit", "exit_code": 1}},
        {"stdout": "x\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]}


# ---------------------------------------------------------------- campaigns through the CLI


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    e["ANTHROPIC_API_KEY"] = "sk-ant-test"
    e["OPENAI_API_KEY"] = "sk-openai-test"
    return e


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def test_one_shot_builtin_campaigns_record_byte_exact_commands(fake: FakeServer, tmp_path: Path) -> None:
    def responder(seen: Seen) -> Scripted:
        if seen.path.endswith("/messages"):
            return Scripted(body=anthropic_body(bash_use(HOSTILE)))
        return Scripted(body=openai_body(shell_call([HOSTILE, SOLUTION])))

    fake.responder = responder
    for kind in ("anthropic", "openai"):
        r = subprocess.run([*QB, "run", "--model", f"{kind}:m", "--base-url", fake.url, "--contracts", "native",
                            "--tasks", "file-write/control", "--transports", "raw,nested", "--out", str(tmp_path / kind)],
                           capture_output=True, text=True, timeout=300, env=env())
        assert r.returncode in (0, 1), r.stderr
        records = lines(tmp_path / kind / "results.jsonl")
        assert len(records) == 2 and all(x["command"] == HOSTILE for x in records)
        assert all(x["native_tool"] == "builtin" and x["config"]["variant"] == "builtin" for x in records)
        raw = next(x for x in records if x["transport"] == "raw")
        assert raw["received"] == HOSTILE and not raw["damaged"]
        if kind == "openai":  # both commands ran, in order, in one sandbox: the second one leaves a passing state
            assert [s["command"] for s in raw["steps"]] == [HOSTILE, SOLUTION]
            assert [s["received"] for s in raw["steps"]] == [HOSTILE, SOLUTION] and raw["verdict"]["passed"]
            assert [s["passed"] for s in raw["steps"]] == [False, True]
        else:
            assert "steps" not in raw
    assert {s.body["tools"][0]["type"] for s in fake.seen} == {"bash_20250124", "shell"}


def test_multi_turn_chain_through_the_anthropic_sdk(fake: FakeServer, tmp_path: Path) -> None:
    """Turn 1 sends a failing command, turn 2 (after seeing the tool result) the solution, turn 3 stops."""
    def responder(seen: Seen) -> Scripted:
        results = [b for m in seen.body["messages"] if isinstance(m["content"], list) for b in m["content"]
                   if b.get("type") == "tool_result"]
        if not results:
            return Scripted(body=anthropic_body(bash_use("cat missing.txt")))
        if len(results) == 1:
            return Scripted(body=anthropic_body(bash_use(SOLUTION, "toolu_2")))
        return Scripted(body=anthropic_body(at.TextBlock(type="text", text="All done."), stop="end_turn"))

    fake.responder = responder
    r = subprocess.run([*QB, "run", "--model", "anthropic:m", "--base-url", fake.url, "--contracts", "native,raw",
                        "--tasks", "file-write/control", "--transports", "raw", "--turns", "3", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300, env=env())
    assert r.returncode == 0, r.stderr
    [native] = [x for x in lines(tmp_path / "results.jsonl") if x["contract"] == "native"]
    assert native["config"]["variant"] == "builtin+turns=3" and native["native_tool"] == "builtin"
    turns = native["turns"]
    assert [t["command"] for t in turns] == ["cat missing.txt", SOLUTION, None]
    assert [t["passed"] for t in turns] == [False, True, True] and turns[-1]["stop"] == "no-tool-call"
    assert turns[0]["exit_code"] == 1 and "No such file" in turns[0]["stderr"]["text"]
    assert native["command"] == SOLUTION and native["verdict"]["passed"]
    second = next(s for s in fake.seen if s.body.get("tools") and len(s.body["messages"]) == 3)
    ANTHROPIC_MESSAGES.validate_python(second.body["messages"])
    [result] = second.body["messages"][2]["content"]
    assert result["tool_use_id"] == "toolu_1" and result["is_error"] is True
    assert result["content"].startswith("exit code: 1\nstdout: (empty)\nstderr:\n")
    assert "passed" not in json.dumps(second.body) and "verdict" not in json.dumps(second.body)
    assert collections.Counter(x["contract"] for x in lines(tmp_path / "results.jsonl")) == {"native": 1, "raw": 1}
