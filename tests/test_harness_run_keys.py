"""The key never enters the sandbox, the records, the store or the output; the proxy bounds what the harness sends.

A fake provider on 127.0.0.1 speaks the real wire formats (Anthropic Messages with SSE for Claude Code, Chat
Completions for mini-swe-agent), demands the secret key, echoes it in its first answer, and scripts tool
calls that look for it everywhere the command can (environment and command line of every process it can read, the files
under the sandbox, /tmp, the proxy's directory and the host-written files). The tool results come back to the provider, so what the command found is what the
provider saw. Then every file written and everything printed is searched for the key. Two harness runs; the
proxy's bounds are checked without a harness.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from qb_client.campaign.harness_proxy import REQUEST_CAP, Answer, Budget, RecordingProxy, Request
from qb_client.campaign.harness_upstream import ProviderUpstream
from qb_client.campaign.harness_wire import render
from qb_client.cli import main

LOOK = ("env; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done 2>/dev/null; "
        "grep -rs sk-qb-secret /sandbox /tmp /run/qb-proxy /run/qb-files 2>/dev/null | head -c 20000; "
        "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | head -c 20000")


class FakeProvider(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    key = ""
    seen: list[dict[str, Any]] = []

    def log_message(self, *a: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        chat = self.path.endswith("/chat/completions")
        given = self.headers.get("authorization", "").removeprefix("Bearer ") if chat else self.headers.get("x-api-key")
        self.seen.append({"path": self.path, "key_ok": given == self.key, "headers": dict(self.headers),
                          "body": body.decode("utf-8", "replace")})
        if given != self.key:
            self._send(401, b'{"type":"error","error":{"type":"authentication_error","message":"bad key"}}',
                       "application/json")
            return
        doc = json.loads(body)
        fmt = "chat" if chat else "anthropic"
        has_tool = any((t.get("name") or (t.get("function") or {}).get("name")) in ("Bash", "bash")
                       for t in doc.get("tools") or [])
        turn = sum(1 for s in self.seen if s["key_ok"] and '"tools"' in s["body"]) - 1 if has_tool else 0
        if not has_tool:
            data, ctype = render(fmt, bool(doc.get("stream")), "m", [], "ok", 0)
        elif turn == 0:
            data, ctype = render(fmt, bool(doc.get("stream")), "m", [LOOK], f"your key is {self.key}.", 0)
        elif turn == 1:
            data, ctype = render(fmt, bool(doc.get("stream")), "m", ['echo "hello world" > out.txt'], "", 1)
        else:
            data, ctype = render(fmt, bool(doc.get("stream")), "m",
                                 ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"] if chat else [], "Done.", turn)
        self._send(200, data, ctype)

    def _send(self, status: int, data: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def provider() -> Any:
    key = "sk-qb-secret-" + secrets.token_hex(16)
    handler = type("P", (FakeProvider,), {"key": key, "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield key, handler, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def run_cli(capsys, monkeypatch, *args: str) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["quotebench", *args])
    with pytest.raises(SystemExit) as ended:
        main()
    got = capsys.readouterr()
    return int(ended.value.code or 0), got.out + got.err


@pytest.mark.needs("bwrap", "python3", "claude-code")
@pytest.mark.parametrize("harness, model, var, suffix", [
    ("claude-code", "anthropic:claude-test", "ANTHROPIC_API_KEY", ""),
    pytest.param("mini-swe-agent", "openai-chat:test-model", "OPENAI_API_KEY", "/v1",
                 marks=pytest.mark.needs("bwrap", "python3", "dash", "mini-swe-agent")),
])
def test_the_key_stays_on_the_host(provider, tmp_path: Path, capsys, monkeypatch, harness, model, var, suffix) -> None:
    key, handler, url = provider
    monkeypatch.setenv(var, key)
    code, printed = run_cli(capsys, monkeypatch, "run", "--harness", harness, "--model", model, "--base-url", url + suffix,
                            "--tasks", "file-write/control", "--out", str(tmp_path / "out"), "--wall", "60")
    loop = [s for s in handler.seen if '"tools"' in s["body"]]
    assert code == 0 and len(loop) >= 3, printed
    assert all(s["key_ok"] for s in handler.seen)  # the proxy added the key to every request
    for s in handler.seen:  # ... and nothing the harness sent carried it: the tool results of LOOK included
        assert key not in s["body"], s["body"][:300]
        assert "quotebench-relay-dummy-key" not in json.dumps(s["headers"])  # the harness's dummy key stayed inside
    assert "sk-qb-secret" in loop[1]["body"]  # LOOK ran and reported (its own command line holds the prefix)
    assert "[key]" in loop[1]["body"]  # the echoed key reached the harness scrubbed
    for f in (tmp_path / "out").iterdir():
        assert key not in f.read_text(), f.name
    assert key not in printed
    (r,) = [json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert r["verdict"]["passed"] and r["steps"][0]["command"] == LOOK and r["steps"][0]["received"] == LOOK


# -- the proxy alone: bounds and scrubbing, no harness ---------------------------------------------------


async def _talk(sock: Path, data: bytes) -> bytes:
    reader, writer = await asyncio.open_unix_connection(str(sock))
    writer.write(data)
    await writer.drain()
    got = await asyncio.wait_for(reader.read(1 << 20), 10)
    writer.close()
    return got


class Echo:
    """An upstream that answers with the key, cut across chunks."""

    model = "m"

    def __init__(self, key: str) -> None:
        self.key = key

    async def answer(self, request: Request) -> Answer:
        async def chunks() -> Any:
            text = f'{{"echo": "{self.key}"}}'.encode()
            for i in range(0, len(text), 5):
                yield text[i:i + 5]
        return Answer(200, "application/json", chunks())


def test_the_proxy_bounds_hostile_requests_and_scrubs_the_key() -> None:
    key = "sk-qb-secret-" + secrets.token_hex(16)

    async def main_() -> None:
        proxy = RecordingProxy(Echo(key), Budget(max_turns=1), secret=key)
        async with proxy.serving() as d:
            sock = d / "proxy.sock"
            assert oct(sock.stat().st_mode & 0o777) == "0o666"
            body = json.dumps({"messages": [], "tools": [{"name": "Bash"}]}).encode()
            ok = await _talk(sock, b"POST /v1/messages HTTP/1.1\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
                             % (len(body), body))
            assert b"200" in ok.split(b"\r\n")[0] and key.encode() not in ok and b"[key]" in ok
            big = await _talk(sock, b"POST /v1/messages HTTP/1.1\r\ncontent-length: %d\r\n\r\n" % (REQUEST_CAP + 1))
            assert b" 413 " in big.split(b"\r\n")[0]
            chunked = await _talk(sock, b"POST /v1/messages HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n")
            assert b" 411 " in chunked.split(b"\r\n")[0]
            assert b" 400 " in (await _talk(sock, b"\x00garbage\r\n\r\n")).split(b"\r\n")[0]
            assert await _talk(sock, b"X" * (70 * 1024)) == b""  # a head past its cap: dropped, nothing served
            again = await _talk(sock, b"POST /v1/messages HTTP/1.1\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
                                % (len(body), body))
            assert b"turns budget is spent" in again  # turn 1 of max 1: the proxy ends the run itself
        assert [e.synthetic for e in sorted(proxy.exchanges, key=lambda e: e.index) if e.kind == "loop"] == [None, "turns"]
        assert all(key not in json.dumps(e.dump()) for e in proxy.exchanges)
        assert not d.exists()

    asyncio.run(main_())


def test_the_provider_upstream_sends_only_the_key_it_holds(provider) -> None:
    key, handler, url = provider

    async def main_() -> None:
        up = ProviderUpstream("anthropic", "m", key, url)
        body = json.dumps({"messages": [], "tools": [{"name": "Bash"}], "stream": True}).encode()
        req = Request("POST", "/v1/messages?beta=true", {"x-api-key": "forged", "authorization": "Bearer forged",
                                                         "anthropic-version": "2023-06-01", "x-other": "1"},
                      body, "anthropic", True, True, "loop", 0, 0)
        answer = await up.answer(req)
        data = b"".join([c async for c in answer.chunks])
        await up.aclose()
        assert answer.status == 200 and b"tool_use" in data
        sent = handler.seen[-1]["headers"]
        assert sent.get("x-api-key") == key and "authorization" not in {k.lower() for k in sent}
        assert "x-other" not in {k.lower() for k in sent} and handler.seen[-1]["path"] == "/v1/messages?beta=true"

    asyncio.run(main_())


def test_bad_harness_options_are_one_line(capsys, monkeypatch, tmp_path: Path) -> None:
    for args, words in [
        (["--harness", "nope", "--model", "courier"], "--harness nope: unknown"),
        (["--harness", "claude-code@1;rm", "--model", "courier"], "must be a release number"),
        (["--harness", "claude-code", "--model", "openai:gpt"], "claude-code speaks Anthropic Messages"),
        (["--harness", "claude-code", "--model", f"replay:{tmp_path}"], "results.jsonl is missing"),
        (["--harness", "claude-code", "--model", "weird"], "with --harness, one of courier"),
    ]:
        code, printed = run_cli(capsys, monkeypatch, "run", *args, "--out", str(tmp_path / "o"))
        assert code == 2 and words in printed and "Traceback" not in printed, printed
    (tmp_path / "other.jsonl").write_text('{"contract": "raw"}\n')
    code, printed = run_cli(capsys, monkeypatch, "harness-report", str(tmp_path / "other.jsonl"))
    assert code == 2 and "other.jsonl: no harness run" in printed and "Traceback" not in printed, printed
