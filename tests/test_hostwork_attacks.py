"""One run never changes another's verdict or timing.

Each test is an attack, run through the real parts (the sandbox, the
ssh transport with its embedded server, ``python -m qb_server`` over streamable HTTP with the
real MCP client). Nothing of ours is mocked, and no assertion is on a duration: the tests
assert on what was recorded (the innocent run is not ``timed_out`` and passes, the fourth
client gets a sandbox, a record's fields are capped, ``limit_hit`` names the limit).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from bounded import bounded
from mcp import Client
from probes import STORM
from test_mcp_server import HttpServer, _calls, _ends, _meta, http_servers  # noqa: F401

from tasks.load import get_task
from transports.execute import execute
from transports.paths.gha import MAX_YAML
from transports.sandbox import Limits, Sandbox

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap")]

MiB = 1 << 20
HOLD = "import time; b = b'x' * ({mib} << 20); time.sleep({s}); print('held')"
"""A program that really uses ``mib`` MiB (the bytes are written) for ``s`` seconds, then says so."""
FORKS = ("import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            time.sleep(5)\n"
         "            os._exit(0)\n        n += 1\nexcept OSError:\n    print('refused after', n)\n")
"""Forks until the kernel refuses, then exits at once: no retry loop, so the run ends long before its time limit."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# ---------------------------------------------------------------- 1. host work off the loop


def slow_yaml_reply() -> str:
    """A gha-run reply whose workflow is just under the size cap and that PyYAML's pure-Python loader
    takes seconds to parse (a flow sequence of 87000 empty ``?`` keys); it parses, and its run is a list."""
    return "[" + "? ," * ((MAX_YAML - 300) // 3 - 2) + "a]"


async def test_a_slow_yaml_reply_does_not_time_out_the_run_beside_it() -> None:
    """replay --concurrency 2 in miniature: the innocent run starts, then the hostile reply's workflow is
    parsed while it runs. Parsed on the event loop, it froze the innocent run's clock past its limit."""
    task = get_task("file-write/control")
    records: dict[str, Any] = {}

    async def innocent() -> None:
        records["innocent"] = await execute(task, "gha-run", "sleep 1; echo hello world > out.txt",
                                            limits=Limits(timeout_s=2.5))

    async def hostile() -> None:
        await anyio.sleep(0.5)  # the innocent command is running by now; the parse takes 4 s on an idle core
        records["hostile"] = await execute(task, "gha-run", slow_yaml_reply(), limits=Limits(timeout_s=2.5))

    async with anyio.create_task_group() as tg:
        tg.start_soon(innocent)
        tg.start_soon(hostile)
    good = records["innocent"]
    assert not good.timed_out and good.limit_hit is None and good.exit_code == 0, good
    assert good.verdict.passed
    assert records["hostile"].transport_error == "gha-run: the step's run is not a string"


async def test_a_yaml_parse_over_its_bound_is_a_transport_error_not_a_stall() -> None:
    """The parse runs in a process of its own, killed at its bound: a one-line transport error."""
    from transports.paths import yaml_worker

    step, note = await yaml_worker.parse_first_step(
        "on: push\njobs:\n  qb:\n    steps:\n      - run: " + slow_yaml_reply() + "\n", bound_s=0.01)
    assert step is None and note.startswith("YAML: the parse did not finish within")


async def test_the_run_clock_is_the_run_s_own_not_the_loop_s() -> None:
    """A loop stalled for longer than the limit must not make a quick command look timed out: the run's
    clock and end are kept by a thread of the run (transports/sandbox/process.py), not by the loop."""
    async def stall() -> None:
        await anyio.sleep(0.1)
        time.sleep(1.5)  # the loop is held: nothing of it runs

    with Sandbox.create(None, Limits(timeout_s=1.0)) as box:
        async with anyio.create_task_group() as tg:
            tg.start_soon(stall)
            ex = await box.run(["bash", "-c", "sleep 0.3; exit 3"])
    assert not ex.timed_out and ex.exit_code == 3


async def test_the_run_clock_kills_a_command_that_overruns_while_the_loop_is_held() -> None:
    async def stall() -> None:
        await anyio.sleep(0.1)
        time.sleep(1.5)

    with Sandbox.create(None, Limits(timeout_s=0.3)) as box:
        async with anyio.create_task_group() as tg:
            tg.start_soon(stall)
            ex = await box.run(["bash", "-c", "echo started; sleep 30"])
    assert ex.timed_out and ex.limit_hit == "time" and ex.stdout.text == "started\n"


# ---------------------------------------------------------------- 2. one cgroup per sandbox


@pytest.mark.needs("memory-cgroup")
async def test_concurrent_runs_of_one_sandbox_share_one_memory_cap() -> None:
    """Three runs of one sandbox, 150 MiB each, under a 256 MiB cap: not all three can hold theirs."""
    with Sandbox.create(None, Limits(memory=256 * MiB, timeout_s=20)) as box:
        results: list[Any] = []

        async def one() -> None:
            results.append(await box.run(["python3", "-c", HOLD.format(mib=150, s=3)]))

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(one)
    held = [r for r in results if r.stdout.text == "held\n"]
    assert len(held) < 3, [(r.exit_code, r.limit_hit) for r in results]
    assert any(r.limit_hit == "memory" for r in results)


@pytest.mark.needs("memory-cgroup", "openssh")
async def test_ssh_remote_runs_of_one_sandbox_share_its_memory_cap() -> None:
    """Three ssh sessions at once from one reply: each remote run was capped alone (3 x the cap in all)."""
    hold = HOLD.format(mib=150, s=3).replace("'", '\\"')
    command = 'true" & ' + " & ".join([f"ssh qb-remote \"python3 -c '{hold}'\""] * 3) + ' & wait; echo "done'
    task = get_task("file-write/control")
    record = await execute(task, "ssh", command, limits=Limits(memory=256 * MiB, timeout_s=20))
    assert record.stdout.text.count("held\n") < 3, record.stdout.text
    assert record.stdout.text.endswith("done\n")


@pytest.mark.needs("pids-cgroup")
async def test_a_hit_process_cap_is_recorded_as_processes() -> None:
    with Sandbox.create(None, Limits(processes=20, timeout_s=20)) as box:
        ex = await box.run(["python3", "-c", FORKS])
    assert ex.stdout.text.startswith("refused after") and not ex.timed_out
    assert ex.limit_hit == "processes"


@pytest.mark.needs("pids-cgroup")
async def test_a_refused_fork_is_counted_once_while_its_run_group_is_removed() -> None:
    """Every run counts the sandbox's refused forks before and after (the whole subtree plus the tally of removed
    run groups). The removal of the last run's group, queued on the cleanup thread, moves the group's count to
    the tally first and runs its rmdir retries outside the count's lock, so the next run's count (on the event
    loop) does not wait on it. A count taken at any moment meanwhile sees the refused
    forks once: never twice (walk and tally), never not at all. The group's last member holds 400 MiB, so it
    takes a while to die and the rmdir retries meanwhile."""
    import threading

    from transports.sandbox import cgroups

    with Sandbox.create(None, Limits(processes=20, timeout_s=20)) as box:
        run = cgroups.child(box.cgroup)
        assert run is not None and box.cgroup is not None
        hold = "b = bytearray(400 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('holding', flush=True)\ntime.sleep(60)"
        proc = subprocess.Popen(["/bin/sh", "-c", 'for g in $0; do echo 0 > "$g/tasks"; done; exec "$@"',
                                 run.joined(), sys.executable, "-c", FORKS + hold], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().startswith("refused after")
            assert proc.stdout.readline() == "holding\n"
            before = cgroups.pid_limit_hits(box.cgroup)
            remover = threading.Thread(target=cgroups.remove, args=(run,))
            remover.start()
            seen = set()
            while remover.is_alive():
                seen.add(cgroups.pid_limit_hits(box.cgroup))
            remover.join()
            seen.add(cgroups.pid_limit_hits(box.cgroup))
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()
        assert not run.exists()
    assert before > 0 and seen == {before}, (before, seen)


# ---------------------------------------------------------------- 3. serve


def _server(tmp_path: Path, servers: list[HttpServer], *args: str) -> tuple[HttpServer, Path]:
    record = tmp_path / "r.jsonl"
    server = HttpServer(tmp_path, "--transport", "raw", "--control", "--record", str(record), *args)
    servers.append(server)
    return server, record


async def _call(client: Client, command: str, sandbox: str) -> Any:
    with anyio.fail_after(60):
        return await client.call_tool("bash", {"command": command}, meta=_meta(sandbox))


@pytest.mark.needs("disk-cap")
async def test_idle_sessions_cannot_hold_the_host_budget(tmp_path: Path, http_servers: list[HttpServer]) -> None:
    """A budget for three sandboxes, three clients that call once and go quiet: a fourth still gets one,
    and the least recently used idle session is ended (judged and recorded) to make room."""
    server, record = _server(tmp_path, http_servers, "--disk", "16M", "--memory", "16M", "--host-budget", "64M",
                             "--reclaim-idle", "1")
    async with Client(server.url) as client:
        for name in ("idle-a", "idle-b", "idle-c"):
            r = await _call(client, "echo hello world > out.txt", name)
            assert not r.is_error, r.content[0].text
        await anyio.sleep(1.5)  # all three are now idle for longer than --reclaim-idle
        r = await _call(client, "echo hello world > out.txt", "newcomer")
        assert not r.is_error, r.content[0].text
    ends = {re.match(r"mcp-meta-(.+)-[0-9a-f]{8}-session-end", e["reply_id"]).group(1): e for e in _ends(record)}
    assert set(ends) == {"idle-a"}  # only the least recently used one
    assert ends["idle-a"]["error"] == "session-end: reclaimed" and ends["idle-a"]["verdict"]["passed"]
    assert server.stop() == 0


async def test_a_reply_of_megabytes_makes_a_record_of_the_cap(tmp_path: Path,
                                                              http_servers: list[HttpServer]) -> None:
    """A 3 MiB command was stored twice (reply and command) in full, on every call."""
    from transports.results.record import FIELD_CAP

    server, record = _server(tmp_path, http_servers)
    command = "echo " + "x" * (3 * MiB)
    async with Client(server.url) as client:
        await _call(client, command, "big")
    assert server.stop() == 0
    [call] = _calls(record)
    assert len(json.dumps(call)) < 4 * FIELD_CAP
    for name in ("reply", "command"):
        assert len(call[name]) <= FIELD_CAP and command.startswith(call[name])
    assert call["truncated"] == ["reply", "command"]


@pytest.mark.needs("pids-cgroup")
async def test_serve_records_a_hit_process_cap(tmp_path: Path, http_servers: list[HttpServer]) -> None:
    server, record = _server(tmp_path, http_servers)
    async with Client(server.url) as client:
        r = await _call(client, "python3 -c '" + FORKS.replace("'", '"') + "'", "forks")
    assert r.structured_content["stdout"].startswith("refused after"), r.content[0].text
    assert server.stop() == 0
    [call] = _calls(record)
    assert call["limit_hit"] == "processes" and not call["timed_out"]


def test_a_hostile_neighbour_leaves_an_innocent_run_s_record_intact() -> None:
    """Beside a run that storms forks (forkers SIGKILLed mid-fork) and SIGKILLs everything it sees,
    an innocent run in its own sandbox keeps its output, status and first program, in time."""
    async def one(cmd: str, out: dict, key: str) -> None:
        with Sandbox.create(None, Limits(timeout_s=10)) as box:
            out[key] = await box.run(["bash", "-c", cmd])

    async def go():
        out: dict = {}
        async with anyio.create_task_group() as tg:
            tg.start_soon(one, STORM.replace("echo done", "kill -9 -1"), out, "bad")
            tg.start_soon(one, "sleep 0.5; echo innocent; exit 5", out, "good")
        return out
    out = bounded(lambda: anyio.run(go), 80)
    good = out["good"]
    assert good.exit_code == 5 and good.stdout.text == "innocent\n" and not good.timed_out
    assert [e.argv[0] for e in good.trace.execs] == [b"bash", b"sleep"] and good.limit_hit is None
