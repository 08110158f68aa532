"""Hostile commands against ``quotebench serve``: one session attacks, another keeps working.

Every test starts a real server (``python -m qb_server``, streamable HTTP or stdio)
and talks to it with the real MCP client. One session runs what a hostile
model would (a 5000-level directory tree, a FIFO where the harness reads what
the command received, a ``yes`` flood, a fork bomb) while a second session on
the same server keeps calling ``echo`` and must get the right answer, every
time, within a bound. Afterwards the server still answers, stops cleanly on
SIGTERM and has recorded an end for every session. Nothing here is mocked:
the failures are provoked by the commands themselves.

The nested transport is used because its received-capture file is the
channel the FIFO attack goes for. Commands avoid ``$``, backticks, ``\\`` and
``"`` so that the outer parse of ``bash -c "R"`` leaves them intact.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from test_mcp_server import HttpServer, _calls, _ends, _lines, _meta, _stdio, http_servers  # noqa: F401

from qb_server.app import build_app
from qb_server.sessions import SessionKey
from qb_server.observation import HARNESS_TEXT
from qb_server.worker import Overrun, Worker, stuck
from transports.sandbox import Limits

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap")]

# python3 makes the tree in well under a second; bash's own `cd` re-resolves $PWD on every level and
# needs minutes for 5000 of them on this machine, far beyond any command time limit
DEEP_TREE = "python3 -c 'import os\nfor i in range(5000): os.mkdir(chr(120)); os.chdir(chr(120))\n'; echo made"
FORK_BOMB = "bomb() { bomb | bomb & }; bomb"
FLOOD = "yes"
FIFO = "rm -f /sandbox/meta/received-1; mkfifo /sandbox/meta/received-1; echo planted"
GOOD_CALL_BOUND_S = 20.0
"""The most a plain ``echo`` of the innocent session may take while the other one attacks (2 loaded cores)."""
HOSTILE_CALL_BOUND_S = 30.0
"""The most any hostile call may take to be answered: the server's command limit (2 s here) plus its host bound."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _server(tmp_path: Path, servers: list[HttpServer], *args: str) -> tuple[HttpServer, Path]:
    record = tmp_path / "r.jsonl"
    server = HttpServer(tmp_path, "--transport", "nested", "--control", "--timeout", "2", "--record", str(record),
                        *args)
    servers.append(server)
    return server, record


class Innocent:
    """The session that does nothing wrong: ``echo ok-N`` in a loop, each answer checked and timed."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.answers: list[tuple[str, float]] = []
        self.wrong: list[str] = []

    async def run(self, stop: anyio.Event) -> None:
        async with Client(self.url) as client:
            n = 0
            while not stop.is_set() or n < 3:
                n += 1
                t = time.monotonic()
                with anyio.fail_after(GOOD_CALL_BOUND_S):
                    r = await client.call_tool("bash", {"command": f"echo ok-{n}"}, meta=_meta("innocent"))
                got = r.structured_content.get("stdout") if r.structured_content else None
                self.answers.append((str(got), time.monotonic() - t))
                if r.is_error or got != f"ok-{n}\n":
                    self.wrong.append(f"call {n}: {r.content[0].text!r}")
                await anyio.sleep(0.1)


async def _alongside(url: str, hostile: Callable[[Client], Awaitable[Any]]) -> tuple[Any, Innocent]:
    """Run ``hostile`` (with its own client) while the innocent session keeps calling; both must finish."""
    innocent = Innocent(url)
    stop = anyio.Event()
    result: list[Any] = []

    async def attack() -> None:
        try:
            async with Client(url) as client:
                result.append(await hostile(client))
        finally:
            stop.set()

    with anyio.fail_after(180):
        async with anyio.create_task_group() as tg:
            tg.start_soon(innocent.run, stop)
            tg.start_soon(attack)
    assert innocent.wrong == [], (innocent.wrong, innocent.answers)
    assert len(innocent.answers) >= 3
    return result[0], innocent


async def _call(client: Client, command: str, sandbox: str = "hostile") -> tuple[Any, float]:
    t = time.monotonic()
    with anyio.fail_after(HOSTILE_CALL_BOUND_S):
        r = await client.call_tool("bash", {"command": command}, meta=_meta(sandbox))
    return r, time.monotonic() - t


async def _still_serving(url: str) -> None:
    async with Client(url) as client:
        with anyio.fail_after(GOOD_CALL_BOUND_S):
            r = await client.call_tool("bash", {"command": "echo alive"}, meta=_meta("after"))
        assert not r.is_error and r.structured_content["stdout"] == "alive\n"


def _ended(record: Path, label: str) -> list[str]:
    return [e["error"] for e in _ends(record) if e["reply_id"].startswith(f"mcp-meta-{label}-")]


def _leftovers(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "tmp").iterdir())


# ---------------------------------------------------------------- deep trees


async def test_deep_tree_ended_by_the_client_and_by_the_idle_sweeper(tmp_path: Path, http_servers: list[HttpServer]) -> None:
    """5000 levels in the work dir, then the session ends twice: through qb_end_session, then idle."""
    server, record = _server(tmp_path, http_servers, "--idle-timeout", "3")

    async def hostile(client: Client) -> list[Any]:
        r1, _ = await _call(client, DEEP_TREE)
        with anyio.fail_after(HOSTILE_CALL_BOUND_S):
            end = await client.call_tool("qb_end_session", {}, meta=_meta("hostile"))
        r2, _ = await _call(client, DEEP_TREE)  # a fresh sandbox, left for the idle sweeper
        with anyio.fail_after(60):
            while len(_ended(record, "hostile")) < 2:
                await anyio.sleep(0.2)
        return [r1, end, r2]

    (r1, end, r2), innocent = await _alongside(server.url, hostile)
    for r in (r1, r2):
        assert r.structured_content["stdout"] == "made\n" and not r.is_error
    assert not end.is_error and end.structured_content["error"].startswith("session-end: ended by client")
    assert _ended(record, "hostile")[:2] == ["session-end: ended by client", "session-end: idle"]
    await _still_serving(server.url)  # the sweeper survived the tree, and so did the server
    assert server.proc.poll() is None
    assert server.stop() == 0
    assert _ended(record, "innocent") == ["session-end: shutdown"]
    assert _leftovers(tmp_path) == []


# ---------------------------------------------------------------- the capture channel


async def test_fifo_on_the_capture_path_stalls_no_one(tmp_path: Path, http_servers: list[HttpServer]) -> None:
    """A FIFO where the host reads what the inner shell received: that call gets a bounded answer,
    the other session is never frozen, and SIGTERM still stops the server."""
    server, record = _server(tmp_path, http_servers)

    async def hostile(client: Client) -> tuple[Any, float]:
        return await _call(client, FIFO)

    (r, took), innocent = await _alongside(server.url, hostile)
    assert took < HOSTILE_CALL_BOUND_S
    calls = [c for c in _calls(record) if c["reply_id"].startswith("mcp-meta-hostile-")]
    assert len(calls) == 1 and calls[0]["command"] == FIFO and not calls[0]["verdict"]["passed"]
    if r.is_error and r.content[0].text.startswith("error: the tool server"):
        # the host read did block: the call became a recorded harness error and the sandbox was ended
        assert calls[0]["error"].startswith("harness: ") and "\n" not in calls[0]["error"]
        assert _ended(record, "hostile") == [_ended(record, "hostile")[0]]
        assert _ended(record, "hostile")[0].startswith("session-end: harness error")
    await _still_serving(server.url)
    with anyio.fail_after(30):
        assert await anyio.to_thread.run_sync(server.stop) == 0
    assert _ended(record, "innocent") == ["session-end: shutdown"]


# ---------------------------------------------------------------- floods and bombs


@pytest.mark.parametrize("attack", [FLOOD, FORK_BOMB], ids=["yes-flood", "fork-bomb"])
async def test_floods_and_bombs_stall_no_one(tmp_path: Path, http_servers: list[HttpServer], attack: str) -> None:
    server, record = _server(tmp_path, http_servers)

    async def hostile(client: Client) -> tuple[Any, float]:
        return await _call(client, attack)

    (r, took), _ = await _alongside(server.url, hostile)
    assert took < HOSTILE_CALL_BOUND_S
    if attack == FLOOD:
        assert r.is_error and r.structured_content["stdout_truncated"]  # killed at the drain cap
    else:  # the bomb's shells hold the output, so the call lasts to its limit (as ssh would), then all of it dies
        assert r.structured_content["exit_code"] is None
    await _still_serving(server.url)
    assert server.stop() == 0
    assert sorted(_ended(record, "hostile") + _ended(record, "innocent")) == ["session-end: shutdown"] * 2
    assert all(line["error"] is None or line["error"].startswith("session-end: ") for line in _lines(record))


# ---------------------------------------------------------------- stdio


async def test_stdio_deep_tree_and_disconnect(tmp_path: Path) -> None:
    """Over stdio: a deep tree, then the client leaves; the end is judged, recorded and cleaned up."""
    record = tmp_path / "r.jsonl"
    params = _stdio(tmp_path, "--transport", "nested", "--timeout", "2", "--record", str(record))
    with anyio.fail_after(90):
        async with Client(params) as client:
            r = await client.call_tool("bash", {"command": DEEP_TREE}, meta=_meta("deep"))
            assert r.structured_content["stdout"] == "made\n"
            r = await client.call_tool("bash", {"command": "echo fine"}, meta=_meta("other"))
            assert r.structured_content["stdout"] == "fine\n"
    assert sorted(e["error"] for e in _ends(record)) == ["session-end: disconnected"] * 2
    assert _leftovers(tmp_path) == []


# ---------------------------------------------------------------- host work that fails or blocks


async def test_blocked_host_work_is_abandoned_and_the_loop_stays_free(tmp_path: Path) -> None:
    """A worker blocked for real (reading a FIFO nobody writes) is given up after its bound; meanwhile
    the serving loop keeps running, and the thread ends once the read returns."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    worker = Worker("t")
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    before = stuck()
    async with anyio.create_task_group() as tg:
        tg.start_soon(tick)
        t = time.monotonic()
        with pytest.raises(Overrun, match=r"^reading did not finish within 0.5 s \(abandoned\)$"):
            await worker.call("reading", 0.5, fifo.read_bytes)
        assert 0.5 <= time.monotonic() - t < 2
        tg.cancel_scope.cancel()
    assert ticks >= 20  # the loop ran all along (a read on it would have frozen the ticker)
    assert worker.retired and stuck() == before + 1
    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # a writer comes and goes: the read sees EOF
    with anyio.fail_after(10):
        while stuck() > before:
            await anyio.sleep(0.02)
    assert not worker.thread.is_alive()


async def test_a_call_whose_host_work_overruns_is_a_recorded_harness_error(tmp_path: Path) -> None:
    """With no grace beyond the command's limit, a command that runs into the limit overruns the
    delivery's bound: the call is a harness error, recorded in one line; the sandbox is ended and the
    next call gets a fresh one; the server answers on and shuts down cleanly."""
    record = tmp_path / "r.jsonl"
    app = build_app(record=record, control=True, limits=Limits(timeout_s=0.5), host_grace=0.0)
    async with Client(app.mcp) as client:
        await client.call_tool("qb_reset", {}, meta=_meta("h"))  # the sandbox is built before the slow call
        with anyio.fail_after(10):
            r = await client.call_tool("bash", {"command": "echo x > f; sleep 3"}, meta=_meta("h"))
        assert r.is_error and r.content[0].text == f"error: {HARNESS_TEXT}"
        assert r.structured_content == {"stdout": "", "stderr": "", "exit_code": None, "timed_out": False,
                                        "error": HARNESS_TEXT}
        last = (await client.call_tool("qb_last_record", {}, meta=_meta("h"))).structured_content
        assert last["error"] == ("harness: the delivery: Overrun: the delivery did not finish within 0.5 s "
                                 "(abandoned)")
    recs = _lines(record)
    assert [(x["command"], x["error"]) for x in recs] == [
        ("echo x > f; sleep 3", last["error"]),
        (None, "session-end: harness error (harness: the delivery: Overrun: the delivery did not finish "
               "within 0.5 s (abandoned))"),
    ]
    assert recs[0]["received"] is None and not recs[0]["damaged"] and recs[0]["verdict"] == {
        "passed": False, "checks": [{"check": "harness", "ok": False, "detail": last["error"][len("harness: "):]}]}
    assert recs[1]["verdict"]["checks"][0]["detail"].startswith("not judged: the delivery: Overrun")
    assert app.sessions.lookup(SessionKey.meta("h")).sandbox is None  # ended; the next call starts afresh
    await app.aclose()
    assert len(_lines(record)) == 2  # nothing left to end


async def test_a_sandbox_that_cannot_be_built_is_a_recorded_harness_error(tmp_path: Path) -> None:
    """The server's temp directory disappears under it (a real OSError, nothing mocked): the call is a
    recorded harness error, the server lives on, and serves again once the directory is back."""
    record = tmp_path / "r.jsonl"
    # a temp directory the sandbox's dropped uid can reach, so that the server makes its sandboxes there
    base = Path(tempfile.mkdtemp(prefix="qb-test-serve-", dir="/tmp"))
    base.chmod(0o755)
    (base / "tmp").mkdir(mode=0o755)
    params = _stdio(tmp_path, "--record", str(record))
    params.env["TMPDIR"] = str(base / "tmp")
    try:
        async with Client(params) as client:
            r = await client.call_tool("bash", {"command": "echo one"}, meta=_meta("a"))
            assert r.structured_content["stdout"] == "one\n"  # the server's temp dir is now known to it
            (base / "tmp").rename(base / "gone")
            r = await client.call_tool("bash", {"command": "echo two"}, meta=_meta("b"))
            assert r.is_error and r.content[0].text == f"error: {HARNESS_TEXT}"
            (base / "gone").rename(base / "tmp")
            r = await client.call_tool("bash", {"command": "echo three"}, meta=_meta("b"))
            assert r.structured_content["stdout"] == "three\n"
    finally:
        shutil.rmtree(base, ignore_errors=True)
    failed = [c for c in _calls(record) if c["error"]]
    assert len(failed) == 1 and failed[0]["command"] == "echo two"
    assert failed[0]["error"].startswith("harness: building the sandbox: SandboxError: cannot build the sandbox: ")
    assert "\n" not in failed[0]["error"]
    assert sorted(e["error"] for e in _ends(record)) == ["session-end: disconnected"] * 2  # b's failed sandbox never existed


# -- the host budget: many sessions must not promise the host more memory than it has -----------

BUDGET = ("--disk", "64M", "--memory", "64M", "--host-budget", "192M")
"""Room for two sandboxes (2 x 64M) and one running command (64M): (192 - 64) // 64 = 2."""


async def test_sessions_beyond_the_host_budget_are_refused_and_a_freed_share_is_reused(tmp_path: Path) -> None:
    """A client mints session ids at will; each sandbox's tmpfs root may hold --disk of host memory. The third
    sandbox does not fit: refused with one line naming the options, nothing recorded for it; ending a session
    gives its share back."""
    record = tmp_path / "r.jsonl"
    async with Client(_stdio(tmp_path, "--control", "--record", str(record), *BUDGET)) as client:
        for name in ("a", "b"):
            r = await client.call_tool("bash", {"command": f"echo {name}"}, meta=_meta(name))
            assert not r.is_error and r.structured_content["stdout"] == f"{name}\n"
        r = await client.call_tool("bash", {"command": "echo c"}, meta=_meta("c"))
        assert r.is_error
        text = r.content[0].text
        assert "host budget is full: 2 open sandboxes of 64M (--disk)" in text and "--host-budget" in text, text
        assert "\n" not in text.strip()
        r = await client.call_tool("qb_end_session", {}, meta=_meta("a"))
        assert not r.is_error
        r = await client.call_tool("bash", {"command": "echo c"}, meta=_meta("c"))
        assert not r.is_error and r.structured_content["stdout"] == "c\n"
    assert sorted(c["command"] for c in _calls(record)) == ["echo a", "echo b", "echo c"]


async def test_commands_beyond_the_host_budget_wait_for_a_running_one(tmp_path: Path) -> None:
    """Two sandboxes fit but only one running command: the second session's call waits until the first's
    command ends, so its answer comes after it (without the budget it would come seconds earlier)."""
    answered: list[str] = []
    async with Client(_stdio(tmp_path, *BUDGET)) as client:
        r = await client.call_tool("bash", {"command": "echo ready"}, meta=_meta("quick"))
        assert r.structured_content["stdout"] == "ready\n"  # both sandboxes exist before the race

        async def call(name: str, command: str) -> None:
            r = await client.call_tool("bash", {"command": command}, meta=_meta(name))
            assert not r.is_error and r.structured_content["stdout"] == f"{name}\n", r
            answered.append(name)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "slow", "sleep 3; echo slow")
                await anyio.sleep(1.0)
                tg.start_soon(call, "quick", "echo quick")
    assert answered == ["slow", "quick"]


async def test_the_banner_says_how_many_sandboxes_the_budget_holds(tmp_path: Path,
                                                                    http_servers: list[HttpServer]) -> None:
    server = HttpServer(tmp_path, *BUDGET)
    http_servers.append(server)
    banner = next(line for line in server.stderr if "MCP on" in line)
    assert banner.rstrip().endswith("at most 2 open sandboxes within the host budget 192M)"), banner


@pytest.mark.needs("openssh")
async def test_an_ssh_delivery_counts_both_of_its_runs(tmp_path: Path, http_servers: list[HttpServer]) -> None:
    """On ssh the client's run and the server's run are alive at once, each under its own memory cap: a call
    reserves 2 x 64M, so 192M holds one sandbox, not two; through middleware too."""
    from qb_server.budget import runs_per_call
    from transports.registry import get

    assert [runs_per_call(get(n)) for n in ("raw", "nested", "ssh", "ssh-safe@zsh", "json-naive+ssh")] == [1, 1, 2, 2, 2]
    server = HttpServer(tmp_path, "--transport", "ssh", *BUDGET)
    http_servers.append(server)
    banner = next(line for line in server.stderr if "MCP on" in line)
    assert banner.rstrip().endswith("at most 1 open sandboxes within the host budget 192M)"), banner
    async with Client(server.url) as client:
        r = await client.call_tool("bash", {"command": "echo one"}, meta=_meta("one"))
        assert not r.is_error and r.structured_content["stdout"] == "one\n", r
        r = await client.call_tool("bash", {"command": "echo two"}, meta=_meta("two"))
        assert r.is_error and "running commands of 128M (2 runs x --memory)" in r.content[0].text, r.content
