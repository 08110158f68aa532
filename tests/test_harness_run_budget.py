"""The budgets of a harness run: turns (one Claude Code run) and tokens (the proxy alone); a provider that
refuses is an error, not a model failure (one Claude Code run)."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from qb_client.campaign.harness_proxy import Answer, Budget, RecordingProxy, Request
from qb_client.campaign.harness_wire import render
from qb_client.cli import main


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.mark.needs("bwrap", "python3", "claude-code")
def test_the_turn_budget_ends_the_run(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(sys, "argv", ["quotebench", "run", "--harness", "claude-code", "--model", "courier", "--tasks",
                                      "json-edit/control", "--out", str(tmp_path / "o"), "--max-turns", "2",
                                      "--wall", "60", "--json"])
    with pytest.raises(SystemExit):
        main()
    out = capsys.readouterr().out
    (r,) = lines(tmp_path / "o" / "results.jsonl")
    assert r["agent"]["stop"] == "turns" and r["agent"]["budget"]["max_turns"] == 2
    assert not r["verdict"]["passed"]  # the repair (turn 2) never came: the slip was the last command
    assert [s["exit_code"] for s in r["steps"]] == [0, 1]
    ex = [e for e in lines(tmp_path / "o" / "exchanges.jsonl") if e["kind"] == "loop"]
    assert [e["synthetic"] for e in sorted(ex, key=lambda e: e["index"])] == [None, None, "turns"]
    row = json.loads(out)["rows"][0]
    assert (row["n"], row["passed"], row["exit_zero_wrong"], row["failing_with_shell"]) == (1, 0, 0, 1)


class Costly:
    """An upstream whose every answer costs 60 tokens (one tool call)."""

    model = "m"

    async def answer(self, request: Request) -> Answer:
        body, ctype = render("anthropic", False, "m", ["true"], "", request.index)
        doc = json.loads(body)
        doc["usage"].update(input_tokens=50, output_tokens=10)

        async def once() -> Any:
            yield json.dumps(doc).encode()
        return Answer(200, ctype, once())


def test_the_token_budget_ends_the_run() -> None:
    async def main_() -> list[str | None]:
        proxy = RecordingProxy(Costly(), Budget(max_turns=10, max_tokens=100))
        body = json.dumps({"messages": [], "tools": [{"name": "Bash"}]}).encode()
        async with proxy.serving() as d:
            for _ in range(4):
                reader, writer = await asyncio.open_unix_connection(str(d / "proxy.sock"))
                writer.write(b"POST /v1/messages HTTP/1.1\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
                             % (len(body), body))
                await writer.drain()
                await asyncio.wait_for(reader.read(), 10)
                writer.close()
        assert proxy.stop == "tokens" and proxy.tokens == 120
        return [e.synthetic for e in sorted(proxy.exchanges, key=lambda e: e.index)]

    assert asyncio.run(main_()) == [None, None, "tokens", "tokens"]  # 60, 120 >= 100: the third is the proxy's


class Refusing(BaseHTTPRequestHandler):
    """A provider that refuses every request (a model it does not have: Claude Code does not retry a 400; it
    retries a 401 until its time runs out, measured)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *a: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("content-length") or 0))
        data = b'{"type":"error","error":{"type":"invalid_request_error","message":"no such model: m"}}'
        self.send_response(400)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.mark.needs("bwrap", "python3", "claude-code")
def test_a_provider_failure_is_an_error_not_a_model_failure(tmp_path: Path, capsys, monkeypatch) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-qb-wrong")
    monkeypatch.setattr(sys, "argv", ["quotebench", "run", "--harness", "claude-code", "--model", "anthropic:m",
                                      "--base-url", f"http://127.0.0.1:{server.server_address[1]}", "--tasks",
                                      "file-write/control", "--out", str(tmp_path / "o"), "--wall", "30"])
    try:
        with pytest.raises(SystemExit) as ended:
            main()
    finally:
        server.shutdown()
    (r,) = lines(tmp_path / "o" / "results.jsonl")
    assert ended.value.code == 1 and r["error"] == "provider: turn 0: HTTP 400", r["error"]
    assert r["steps"] == [] and r["agent"]["turns"] == 0 and r["limit_hit"] is None  # it gave up, no time ran out
    assert "provider: turn 0: HTTP 400" in capsys.readouterr().err


def test_a_stream_is_passed_through_as_it_arrives() -> None:
    """The harness gets the first event while the upstream still holds the rest (it waits for the harness)."""
    got_first = asyncio.Event()

    class Stream:
        model = "m"

        async def answer(self, request: Request) -> Answer:
            async def chunks() -> Any:
                yield b'event: message_start\ndata: {"type": "message_start"}\n\n'
                await asyncio.wait_for(got_first.wait(), 10)  # the rest only once the harness has the first
                yield b'event: message_stop\ndata: {"type": "message_stop"}\n\n'
            return Answer(200, "text/event-stream", chunks())

    async def main_() -> bytes:
        proxy = RecordingProxy(Stream(), Budget())
        body = json.dumps({"messages": [], "tools": [{"name": "Bash"}], "stream": True}).encode()
        async with proxy.serving() as d:
            reader, writer = await asyncio.open_unix_connection(str(d / "proxy.sock"))
            writer.write(b"POST /v1/messages HTTP/1.1\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
                         % (len(body), body))
            await writer.drain()
            seen = b""
            while b"message_start" not in seen:
                seen += await asyncio.wait_for(reader.read(4096), 10)
            got_first.set()
            seen += await asyncio.wait_for(reader.read(), 10)
            writer.close()
        (ex,) = proxy.exchanges
        assert ex.response.count("event: ") == 2 and ex.content_type == "text/event-stream"
        return seen

    seen = asyncio.run(main_())
    assert b"transfer-encoding: chunked" in seen and seen.endswith(b"0\r\n\r\n") and b"message_stop" in seen
