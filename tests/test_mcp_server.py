"""The MCP tool server through the real mcp client: in-process, over stdio and over streamable HTTP.

Servers over stdio and HTTP are subprocesses (``python -m qb_server``), each
with its own TMPDIR so its sandboxes, even those a SIGKILL leaves behind, stay
inside the test's temporary directory. HTTP servers bind port 0 and announce
the real port on stderr, so no test races for a port.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from qb_server.app import build_app, build_server, serve
from qb_server.sessions import META_KEY
from transports.sandbox import Limits

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[1]
WRITE = 'echo "hello world" > out.txt'


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _env(tmp_path: Path) -> dict[str, str]:
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)}


def _stdio(tmp_path: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "qb_server", *args],
                                 env=_env(tmp_path), cwd=str(ROOT))


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _calls(path: Path) -> list[dict[str, Any]]:
    return [r for r in _lines(path) if not (r.get("error") or "").startswith("session-end")]


def _ends(path: Path) -> list[dict[str, Any]]:
    return [r for r in _lines(path) if (r.get("error") or "").startswith("session-end")]


def _meta(sandbox: str) -> dict[str, str]:
    return {META_KEY: sandbox}


class HttpServer:
    """``python -m qb_server --http 127.0.0.1:0``; the URL is read from its stderr banner."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "qb_server", "--http", "127.0.0.1:0", *args],
            env=_env(tmp_path), cwd=str(ROOT), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        self.stderr: list[str] = []
        found: queue.Queue[str] = queue.Queue()

        def drain() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.stderr.append(line)
                if m := re.search(r"MCP on (http://\S+)", line):
                    found.put(m.group(1))

        threading.Thread(target=drain, daemon=True).start()
        try:
            self.url = found.get(timeout=20)
        except queue.Empty:
            self.proc.kill()
            raise AssertionError(f"server did not start: {''.join(self.stderr)}") from None

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=20)


@pytest.fixture
def http_servers(tmp_path: Path) -> Iterator[list[HttpServer]]:
    started: list[HttpServer] = []
    yield started
    for s in started:  # a server a failed test left running ends its sessions (and unmounts) before it goes
        try:
            s.stop(signal.SIGTERM)
        except subprocess.TimeoutExpired:
            s.stop(signal.SIGKILL)


# ---------------------------------------------------------------- surface


async def test_agent_sees_one_bash_tool_and_the_task() -> None:
    server = build_server()
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
        assert [t.name for t in tools] == ["bash"]
        assert tools[0].input_schema == {
            "type": "object", "properties": {"command": {"type": "string", "description": "The command to run."}},
            "required": ["command"],
        }
        assert "quot" not in (tools[0].description or "").lower()
        prompt = await client.get_prompt("task")
        assert prompt.messages[0].content.text.startswith("Create the file `out.txt`")
        resource = await client.read_resource("quotebench://task")
        assert resource.contents[0].text == prompt.messages[0].content.text
    await server.quotebench.aclose()


async def test_tool_name_option_and_control_tools() -> None:
    app = build_app(tool_name="shell", control=True)
    async with Client(app.mcp) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names[0] == "shell" and "bash" not in names
        assert {"qb_select_task", "qb_reset", "qb_verdict", "qb_last_record", "qb_end_session"} <= set(names)
        assert all(n == "shell" or n.startswith("qb_") for n in names)
    await app.aclose()


def test_bad_options_fail_before_serving(tmp_path: Path) -> None:
    for kwargs, text in [
        ({"transport": "bogus"}, "unknown transport 'bogus'"),
        ({"task": "no/such"}, "unknown task 'no/such'"),
        ({"tool_name": "qb_shell"}, "reserved"),
        ({"http": "0.0.0.0:8765"}, "not a loopback address"),
        ({"http": "127.0.0.1:8765", "allow_remote": True}, "needs a bearer token"),
        ({"http": "nonsense"}, "expected HOST:PORT"),
        ({"record": str(tmp_path)}, f"--record {tmp_path}: is a directory"),
    ]:
        with pytest.raises(ValueError, match=re.escape(text)) as info:
            serve(**kwargs)
        assert "\n" not in str(info.value)
    proc = subprocess.run([sys.executable, "-m", "qb_server", "--transport", "bogus"], env=_env(tmp_path),
                          cwd=str(ROOT), capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().count("\n") == 0 and "unknown transport 'bogus'" in proc.stderr


# ---------------------------------------------------------------- raw vs nested


@pytest.mark.parametrize("transport, passes", [("raw", True), ("nested", False)])
async def test_stdio_raw_keeps_the_file_nested_does_not(tmp_path: Path, transport: str, passes: bool) -> None:
    record = tmp_path / "r.jsonl"
    params = _stdio(tmp_path, "--transport", transport, "--control", "--record", str(record))
    async with Client(params) as client:
        first = await client.call_tool("bash", {"command": WRITE})
        assert not first.is_error
        read = await client.call_tool("bash", {"command": "cat out.txt"})
        assert (read.structured_content["stdout"] == "hello world\n") is passes
        assert read.is_error is not passes  # cat fails when the file is missing
        verdict = await client.call_tool("qb_verdict", {})
        assert verdict.structured_content["verdict"]["passed"] is passes
        last = await client.call_tool("qb_last_record", {})
        assert last.structured_content["command"] == "cat out.txt"
    calls = _calls(record)
    assert [c["command"] for c in calls] == [WRITE, "cat out.txt"]
    assert all(c["contract"] == "native" and c["transport"] == transport for c in calls)
    assert calls[0]["received"] == (WRITE if passes else "echo hello")
    assert calls[0]["damaged"] is not passes
    ends = _ends(record)  # stdin closed: the session's final state is judged and recorded
    assert len(ends) == 1 and ends[0]["verdict"]["passed"] is passes and ends[0]["command"] is None
    assert ends[0]["reply_id"].endswith("session-end") and ends[0]["error"] == "session-end: disconnected"
    assert list((tmp_path / "tmp").iterdir()) == []  # the sandbox was deleted


async def test_in_process_raw_and_nested_differ() -> None:
    outs = {}
    for transport in ("raw", "nested"):
        server = build_server(transport)
        async with Client(server) as client:
            await client.call_tool("bash", {"command": WRITE}, meta=_meta("s"))
            r = await client.call_tool("bash", {"command": "cat out.txt"}, meta=_meta("s"))
            outs[transport] = (r.is_error, r.structured_content["stdout"])
        await server.quotebench.aclose()
    assert outs == {"raw": (False, "hello world\n"), "nested": (True, "")}


# ---------------------------------------------------------------- sessions


async def test_bad_arguments_are_tool_errors_over_stdio(tmp_path: Path) -> None:
    async with Client(_stdio(tmp_path)) as client:
        for args in ({}, {"command": 3}, {"command": ["ls"]}, {"command": None}):
            r = await client.call_tool("bash", args)
            assert r.is_error and "command" in r.content[0].text
        r = await client.call_tool("bash", {"command": "echo still here"})
        assert not r.is_error and r.structured_content["stdout"] == "still here\n"


async def test_files_persist_within_a_session_and_exit_code_is_reported(tmp_path: Path) -> None:
    async with Client(_stdio(tmp_path)) as client:
        await client.call_tool("bash", {"command": "mkdir d && printf 'a\\n' > d/f"})
        await client.call_tool("bash", {"command": "printf 'b\\n' >> d/f"})
        r = await client.call_tool("bash", {"command": "cat d/f; exit 3"})
        assert r.is_error and r.structured_content["exit_code"] == 3
        assert r.structured_content["stdout"] == "a\nb\n"
        assert r.content[0].text.startswith("exit code: 3\nstdout:\na\nb")


async def _isolated_pair(make_client: Any, metas: tuple[dict | None, dict | None]) -> list[str]:
    """Two sessions at once: each writes its name, waits until the other has written, reads back."""
    wrote = [anyio.Event(), anyio.Event()]
    seen: list[str] = ["", ""]

    async def one(i: int) -> None:
        async with make_client() as client:
            await client.call_tool("bash", {"command": f"printf '%s' client{i} > mine.txt"}, meta=metas[i])
            wrote[i].set()
            await wrote[1 - i].wait()
            r = await client.call_tool("bash", {"command": "cat mine.txt; echo; ls -A"}, meta=metas[i])
            seen[i] = r.structured_content["stdout"]

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(one, 0)
            tg.start_soon(one, 1)
    return seen


async def test_concurrent_http_sessions_are_isolated(tmp_path: Path, http_servers: list[HttpServer]) -> None:
    record = tmp_path / "r.jsonl"
    server = HttpServer(tmp_path, "--record", str(record))
    http_servers.append(server)
    expected = ["client0\nmine.txt\n", "client1\nmine.txt\n"]
    # legacy protocol mode: keyed on each client's mcp-session-id
    assert await _isolated_pair(lambda: Client(server.url, mode="legacy"), (None, None)) == expected
    # default (stateless) mode: keyed on the sandbox id each client sends in _meta
    assert await _isolated_pair(lambda: Client(server.url), (_meta("a"), _meta("b"))) == expected
    # each legacy client's DELETE ended its session at once; the _meta sessions end with the server
    assert sorted(e["error"] for e in _ends(record)) == ["session-end: disconnected"] * 2
    assert server.stop() == 0
    assert sorted(e["error"] for e in _ends(record)) == (["session-end: disconnected"] * 2
                                                         + ["session-end: shutdown"] * 2)
    assert len(_calls(record)) == 8
    sessions = sorted({c["reply_id"].rsplit("-", 1)[0] for c in _calls(record)})
    assert [x[:9] for x in sessions] == ["mcp-http-", "mcp-http-", "mcp-meta-", "mcp-meta-"]  # mcp-session-id, _meta
    assert list((tmp_path / "tmp").iterdir()) == []


async def test_stateless_requests_without_an_id_get_one_call_sandboxes() -> None:
    app = build_app(control=True)
    async with Client(app.mcp) as client:  # default mode: no session id, no _meta id
        await client.call_tool("bash", {"command": WRITE})
        r = await client.call_tool("bash", {"command": "ls -A"})
        assert r.structured_content["stdout"] == ""
        r = await client.call_tool("qb_verdict", {})
        assert r.is_error and "session identity" in r.content[0].text
    assert app.sessions.sessions == {}
    await app.aclose()


async def test_timeout_and_undeliverable_commands_are_tool_errors() -> None:
    app = build_app("json-naive", limits=Limits(timeout_s=0.3))
    async with Client(app.mcp) as client:
        r = await client.call_tool("bash", {"command": "sleep 5"}, meta=_meta("t"))
        assert r.is_error and r.structured_content["timed_out"] and r.content[0].text.startswith("timed out")
        r = await client.call_tool("bash", {"command": 'echo "hi"'}, meta=_meta("t"))  # the naive JSON breaks
        assert r.is_error and r.content[0].text.startswith("error: the JSON document does not parse")
        assert "json-naive" not in r.content[0].text  # the model is not told which path it is on
    await app.aclose()


async def test_a_call_the_client_abandons_still_completes_and_is_recorded(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"
    app = build_app(record=record)
    async with Client(app.mcp, mode="legacy") as client:
        with pytest.raises(TimeoutError), anyio.fail_after(0.2):
            await client.call_tool("bash", {"command": "sleep 0.5; echo done > f"})
        r = await client.call_tool("bash", {"command": "cat f"})
        assert r.structured_content["stdout"] == "done\n"
    assert [c["command"] for c in _calls(record)] == ["sleep 0.5; echo done > f", "cat f"]
    await app.aclose()


async def test_malformed_sandbox_id_is_a_tool_error() -> None:
    app = build_app()
    async with Client(app.mcp) as client:
        for bad in (7, "", "x" * 300):
            r = await client.call_tool("bash", {"command": "true"}, meta={META_KEY: bad})
            assert r.is_error and META_KEY in r.content[0].text
    await app.aclose()


async def test_stdio_sigterm_ends_the_session_cleanly(tmp_path: Path) -> None:
    record, pidfile = tmp_path / "r.jsonl", tmp_path / "pid"
    params = StdioServerParameters(  # exec keeps the shell's pid, so the test knows whom to signal
        command="sh", args=["-c", f'echo $$ > {pidfile}; exec "{sys.executable}" -m qb_server --transport nested --record {record}'],
        env=_env(tmp_path), cwd=str(ROOT))
    async with Client(params) as client:
        await client.call_tool("bash", {"command": WRITE})
        os.kill(int(pidfile.read_text()), signal.SIGTERM)
        with anyio.fail_after(10):
            while not _ends(record):
                await anyio.sleep(0.02)
    assert [e["error"] for e in _ends(record)] == ["session-end: shutdown"]
    assert not _ends(record)[0]["verdict"]["passed"] and len(_calls(record)) == 1
    assert list((tmp_path / "tmp").iterdir()) == []  # sandbox and the nested transport's shim removed


async def test_legacy_in_process_connection_is_a_session_and_its_end_is_recorded(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"
    app = build_app(record=record)
    async with Client(app.mcp, mode="legacy") as client:
        await client.call_tool("bash", {"command": WRITE})
        r = await client.call_tool("bash", {"command": "cat out.txt"})
        assert r.structured_content["stdout"] == "hello world\n"
    ends = _ends(record)
    assert len(ends) == 1 and ends[0]["verdict"]["passed"] and ends[0]["error"] == "session-end: disconnected"
    assert app.sessions.sessions == {}
    await app.aclose()


async def test_control_tools_select_reset_and_records(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"
    app = build_app(control=True, record=record)
    meta = _meta("harness-1")
    async with Client(app.mcp) as client:
        r = await client.call_tool("bash", {"command": WRITE}, meta=meta)
        assert r.meta["quotebench/record"]["verdict"]["passed"]
        r = await client.call_tool("qb_select_task", {"task_id": "file-write/h1"}, meta=meta)
        assert r.structured_content["task_id"] == "file-write/h1"
        prompt = await client.get_prompt("task", meta=meta)
        assert "motd.txt" in prompt.messages[0].content.text
        r = await client.call_tool("bash", {"command": "ls -A"}, meta=meta)
        assert r.structured_content["stdout"] == ""  # a fresh sandbox of the new task
        r = await client.call_tool("qb_select_task", {"task_id": "nope/x"}, meta=meta)
        assert r.is_error and "unknown task" in r.content[0].text
        r = await client.call_tool("qb_end_session", {}, meta=meta)
        assert r.structured_content["task_id"] == "file-write/h1" and not r.structured_content["verdict"]["passed"]
    recs = _lines(record)
    assert [(x["task_id"], x["command"], x["error"]) for x in recs] == [
        ("file-write/control", WRITE, None),
        ("file-write/control", None, "session-end: reset"),
        ("file-write/h1", "ls -A", None),
        ("file-write/h1", None, "session-end: ended by client"),
    ]
    assert recs[1]["verdict"]["passed"]
    await app.aclose()


async def test_reply_ids_never_repeat_across_sessions_that_reuse_a_meta_id(tmp_path: Path) -> None:
    from qb_client.report import load_records

    record = tmp_path / "r.jsonl"
    for _ in range(2):  # a second server run appends to the same file
        app = build_app(control=True, record=record)
        async with Client(app.mcp) as client:
            for command in (WRITE, "echo wrong > out.txt"):  # two sessions, one _meta id
                await client.call_tool("bash", {"command": command}, meta=_meta("harness-1"))
                await client.call_tool("qb_end_session", {}, meta=_meta("harness-1"))
        await app.aclose()
    recs = _lines(record)
    ids = [x["reply_id"] for x in recs]
    assert len(recs) == 8 and len(set(ids)) == 8
    assert all(re.fullmatch(r"mcp-meta-harness-1-[0-9a-f]{8}-(1|session-end)", i) for i in ids)
    assert len({i.rsplit("-", 2)[0] if i.endswith("session-end") else i.rsplit("-", 1)[0] for i in ids}) == 4
    # the report keeps the four sessions' calls apart (same task, draw 0)
    warnings: list[str] = []
    calls = load_records([record], warn=warnings.append)
    assert [c["command"] for c in calls] == [WRITE, "echo wrong > out.txt"] * 2
    assert not any("duplicate" in w for w in warnings)


async def test_run_command_in_process_returns_the_record() -> None:
    app = build_app("nested")
    rec = await app.run_command(WRITE, sandbox="driver")
    assert rec.contract == "native" and rec.transport == "nested" and rec.received == "echo hello"
    assert rec.damaged and not rec.verdict.passed and rec.stdout.text == "hello\n"
    end = await app.end_session("driver")
    assert end is not None and end.error == "session-end: ended by client"
    await app.aclose()


async def test_idle_sessions_are_ended(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"
    app = build_app(record=record, idle_timeout=0.2)
    async with Client(app.mcp) as client:
        await client.call_tool("bash", {"command": WRITE}, meta=_meta("a"))
        await anyio.sleep(0.3)
        await client.call_tool("bash", {"command": "true"}, meta=_meta("b"))  # sweeps on arrival
    ends = _ends(record)
    assert [e["error"] for e in ends] == ["session-end: idle"]
    assert re.fullmatch(r"mcp-meta-a-[0-9a-f]{8}-session-end", ends[0]["reply_id"])
    await app.aclose()


# ---------------------------------------------------------------- HTTP auth, kill


async def test_bearer_token_is_required_when_given(tmp_path: Path, http_servers: list[HttpServer]) -> None:
    server = HttpServer(tmp_path, "--token", "s3cret")
    http_servers.append(server)
    async with httpx2.AsyncClient() as raw:
        resp = await raw.post(server.url, json={})
        assert resp.status_code == 401
    auth = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"})
    async with Client(streamable_http_client(server.url, http_client=auth)) as client:
        r = await client.call_tool("bash", {"command": "echo ok"})
        assert r.structured_content["stdout"] == "ok\n"


async def test_sigkill_loses_no_recorded_call_and_the_next_start_notes_unfinished_sessions(
        tmp_path: Path, http_servers: list[HttpServer]) -> None:
    record = tmp_path / "r.jsonl"
    server = HttpServer(tmp_path, "--record", str(record), "--control")
    http_servers.append(server)
    n = 12
    async with Client(server.url) as client:
        for i in range(n):
            r = await client.call_tool("bash", {"command": f"echo {i} >> log.txt"}, meta=_meta("k"))
            assert not r.is_error
        await client.call_tool("bash", {"command": "true"}, meta=_meta("done"))
        await client.call_tool("qb_end_session", {}, meta=_meta("done"))
        await client.call_tool("bash", {"command": "true"}, meta=_meta("reset"))
        await client.call_tool("qb_reset", {}, meta=_meta("reset"))
        await client.call_tool("bash", {"command": "true"}, meta=_meta("reset"))
        assert server.stop(signal.SIGKILL) == -signal.SIGKILL
    calls = [c for c in _lines(record) if c["reply_id"].startswith("mcp-meta-k-")]
    uid = calls[0]["reply_id"].split("-")[3]  # every line parses; nothing torn, nothing missing
    assert re.fullmatch(r"[0-9a-f]{8}", uid)
    assert [c["reply_id"] for c in calls] == [f"mcp-meta-k-{uid}-{i + 1}" for i in range(n)]
    assert [c["command"] for c in calls] == [f"echo {i} >> log.txt" for i in range(n)]
    assert [e["error"] for e in _ends(record)] == ["session-end: ended by client", "session-end: reset"]

    # the next start on the same file notes, once, each session with calls after its last end
    again = HttpServer(tmp_path, "--record", str(record))
    http_servers.append(again)
    unfinished = "session-end: unfinished: the server stopped without ending it"
    noted = [e for e in _ends(record) if e["error"] == unfinished]
    assert sorted(e["reply_id"] for e in noted) == [  # the reset session's second end
        f"mcp-meta-k-{uid}-session-end", f"mcp-meta-reset-{_uid(record, 'reset')}-session-end-2"]
    k_end = next(e for e in noted if e["reply_id"].startswith("mcp-meta-k-"))
    assert k_end["reply_id"] == f"mcp-meta-k-{uid}-session-end" and k_end["run_id"] == calls[0]["run_id"]
    assert (k_end["command"], k_end["received"], k_end["verdict"]["passed"]) == (None, None, False)
    assert any("2 session(s) in" in line and "never ended" in line for line in again.stderr)
    async with Client(again.url) as client:  # its first sandbox also sweeps the killed server's leftovers
        r = await client.call_tool("bash", {"command": "echo fine"}, meta=_meta("live"))
        assert r.structured_content["stdout"] == "fine\n"
        # a server starting while this one serves must not take its open session for an unfinished one
        third = HttpServer(tmp_path, "--record", str(record))
        http_servers.append(third)
        assert third.stop() == 0
    assert again.stop() == 0
    last = HttpServer(tmp_path, "--record", str(record))
    http_servers.append(last)
    assert last.stop() == 0
    assert [e["error"] for e in _ends(record)].count(unfinished) == 2  # noted once, never again
    assert [e["error"] for e in _ends(record) if e["reply_id"].startswith("mcp-meta-live-")] == [
        "session-end: shutdown"]
    assert list((tmp_path / "tmp").iterdir()) == []


def _uid(record: Path, label: str) -> str:
    return next(c["reply_id"].split("-")[3] for c in _lines(record) if c["reply_id"].startswith(f"mcp-meta-{label}-"))


async def test_a_shutdown_is_recorded_as_a_shutdown(tmp_path: Path, http_servers: list[HttpServer]) -> None:
    """SIGTERM while a legacy client is still connected: its session ends by shutdown, not by disconnect."""
    record = tmp_path / "r.jsonl"
    server = HttpServer(tmp_path, "--record", str(record))
    http_servers.append(server)
    with anyio.fail_after(60):
        async with Client(server.url, mode="legacy") as client:
            await client.call_tool("bash", {"command": WRITE})
            await client.call_tool("bash", {"command": WRITE}, meta=_meta("m"))
            assert await anyio.to_thread.run_sync(server.stop) == 0
    assert sorted(e["error"] for e in _ends(record)) == ["session-end: shutdown"] * 2


def test_record_needs_an_existing_directory(tmp_path: Path) -> None:
    """The output-file rule: nothing is created on the way to --record; a FIFO is refused, never opened."""
    missing = tmp_path / "no" / "such" / "r.jsonl"
    with pytest.raises(ValueError) as info:
        serve(record=str(missing))
    assert str(info.value) == f"--record {missing}: the directory {missing.parent} does not exist (create it first)"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="is not a regular file"):
        serve(record=str(fifo))
    for path in (str(missing), "/qb-no-such-dir-c1/r.jsonl"):
        proc = subprocess.run([sys.executable, "-m", "qb_server", "--record", path], env=_env(tmp_path),
                              cwd=str(ROOT), capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.count("\n") == 1 and "does not exist (create it first)" in proc.stderr
    assert not (tmp_path / "no").exists() and not Path("/qb-no-such-dir-c1").exists()


def test_python_m_qb_server_refuses_to_serve_without_isolation(tmp_path: Path) -> None:
    env = {**_env(tmp_path), "QB_NO_BWRAP": "1"}
    run = lambda *a: subprocess.run([sys.executable, "-m", "qb_server", *a], env=env, cwd=str(ROOT),  # noqa: E731
                                    capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    proc = run()
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("quotebench serve: serve refuses to run without isolation: QB_NO_BWRAP is set")
    proc = run("--allow-no-isolation", "--transport", "bogus")  # opted out: on to the next check
    assert proc.returncode == 2 and "unknown transport 'bogus'" in proc.stderr


# -- python -m qb_server takes the same environment axes as `quotebench serve` ----------------------

@pytest.mark.anyio
@pytest.mark.needs("bwrap", "busybox")
async def test_module_server_takes_suite_and_userland(tmp_path: Path) -> None:
    """Records say which suite and userland they were measured on; without the options the module server
    could only serve the public suite on GNU, and its records would claim so."""
    from tasks.generate import write

    suite_dir = tmp_path / "held-out"
    suite_id = write("module-server", suite_dir)
    record = tmp_path / "r.jsonl"
    args = ("--suite", str(suite_dir), "--userland", "busybox", "--record", str(record))
    async with Client(_stdio(tmp_path, *args)) as client:
        r = await client.call_tool("bash", {"command": "ls --help 2>&1 | head -1"}, meta=_meta("s"))
        assert "BusyBox" in r.structured_content["stdout"], r.structured_content
    calls = _calls(record)
    assert [(c["suite"], c["userland"]) for c in calls] == [(suite_id, "busybox")]


@pytest.mark.parametrize(("args", "message"), [
    (("--suite", "/nonexistent-suite"), "quotebench serve: --suite /nonexistent-suite: not a directory"),
    (("--userland", "bsd"), "quotebench serve: --userland: unknown userland 'bsd'"),
    (("--host-budget", "1M"), "quotebench serve: --host-budget 1M cannot hold one sandbox (1G of --disk)"),
    (("--disk", "lots"), "quotebench serve: --disk: 'lots' is not a size"),
])
def test_module_server_bad_environment_options_are_one_line(tmp_path: Path, args: tuple[str, ...],
                                                            message: str) -> None:
    done = subprocess.run([sys.executable, "-m", "qb_server", *args], env=_env(tmp_path), cwd=str(ROOT),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(message) and done.stderr.count("\n") == 1, done.stderr
