"""Executions in worker processes (qb_client.campaign.workers, transports.worker): the record a worker makes is
the record this process makes; a worker that dies fails its one execution and is replaced; workers end with
their parent, however it ends; and the parent's settings (userland, memory cap) reach them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest

from qb_client.campaign.workers import WorkerError, Workers
from tasks.load import get_task
from transports.execute import execute
from transports.sandbox import Limits

BWRAP = pytest.mark.needs("bwrap")
QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]
# deterministic commands (no clock, no pid in their output), some damaged on nested, one failing outright
COMMANDS = ("echo 'hello world' > out.txt", 'echo "hello" "world" > out.txt; cat out.txt', "printf '%s\\n' a\\ b >&2",
            "exit 3")
VARIES = {"run_id", "timing", "jobs", "cpus"}


def _same(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in VARIES}


@BWRAP
def test_a_worker_makes_the_record_this_process_makes() -> None:
    task = get_task("file-write/control")

    async def go():
        async with Workers.start(2) as workers:
            there = [await workers.execute(task, t, c, limits=Limits(), draw=1) for c in COMMANDS
                     for t in ("raw", "nested")]
        here = [await execute(task, t, c, limits=Limits(), draw=1) for c in COMMANDS for t in ("raw", "nested")]
        return there, here
    there, here = anyio.run(go)
    assert [_same(r.model_dump(mode="json")) for r in there] == [_same(r.model_dump(mode="json")) for r in here]
    assert [r.verdict.passed for r in there] == [True, True, True, True, False, False, False, False]


@BWRAP
def test_a_worker_killed_during_an_execution_fails_only_that_one_and_is_replaced() -> None:
    task = get_task("file-write/control")

    async def go():
        async with Workers.start(1) as workers:
            [worker] = workers._all
            async def kill_soon() -> None:
                await anyio.sleep(1.0)
                worker.proc.kill()
            async with anyio.create_task_group() as tg:
                tg.start_soon(kill_soon)
                with pytest.raises(WorkerError) as caught:
                    await workers.execute(task, "raw", "sleep 8", limits=Limits(timeout_s=10))
            after = await workers.execute(task, "raw", "echo 'hello world' > out.txt", limits=Limits())
            return str(caught.value), after, [w.proc.pid for w in workers._all], worker.proc.pid
    error, after, pids, killed = anyio.run(go)
    assert "the worker process ended during this execution" in error and "\n" not in error
    assert after.verdict.passed and pids and killed not in pids


PARENT = textwrap.dedent("""
    import anyio, sys
    from qb_client.campaign.workers import Workers
    async def go():
        async with Workers.start(2) as workers:
            print(" ".join(str(w.proc.pid) for w in workers._all), flush=True)
            await anyio.sleep(60)
    anyio.run(go)
    """)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def test_workers_end_when_their_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        assert parent.stdout is not None
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
    finally:
        parent.kill()
        parent.wait()
    for _ in range(200):
        if not any(_alive(p) for p in pids):
            break
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)


@BWRAP
@pytest.mark.needs("busybox")
def test_the_parents_userland_and_memory_cap_reach_the_workers(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    big = "python3 -c 'b = bytearray(400 << 20)'"  # within the default 1 GiB, over 300M
    store.write_text("".join(json.dumps({"task_id": "file-write/control", "command": c, "draw": k}) + "\n"
                             for k, c in enumerate((*COMMANDS, big))))
    out = tmp_path / "results.jsonl"
    done = subprocess.run([*QB, "--memory", "300M", "replay", str(store), "--transports", "raw", "--userland",
                           "busybox", "--jobs", "2", "--out", str(out), "--json"], capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == len(COMMANDS) + 1 and {r["jobs"] for r in records} == {2}
    assert {r["userland"] for r in records} == {"busybox"}
    assert [r["limit_hit"] for r in records if r["command"] == big] == ["memory"]
