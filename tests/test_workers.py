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

import transports
from qb_client.campaign.workers import WorkerError, Workers
from tasks.load import get_task
from transports.execute import execute
from transports.results.record import Record
from transports.results.store import JsonlWriter
from transports.sandbox import Limits

REPO = Path(transports.__file__).resolve().parents[1]  # the checkout this process imports

BWRAP = pytest.mark.needs("bwrap")
QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]
# deterministic commands (no clock, no pid in their output), some damaged on nested, one failing outright
COMMANDS = ("echo 'hello world' > out.txt", 'echo "hello" "world" > out.txt; cat out.txt', "printf '%s\\n' a\\ b >&2",
            "exit 3")
VARIES = {"run_id", "timing", "jobs", "cpus"}


def _same(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in VARIES}


def _same_record(record: Record) -> dict:
    return _same(record.model_dump(mode="json"))


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
                          timeout=300, stdin=subprocess.DEVNULL, env={**os.environ, "QB_WORKERS_FROM": "2"})
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == len(COMMANDS) + 1 and {r["jobs"] for r in records} == {2}
    assert {r["userland"] for r in records} == {"busybox"}
    assert [r["limit_hit"] for r in records if r["command"] == big] == ["memory"]


def _both(task_id: str, transport: str, command: str, limits: Limits | None = None, **fields):
    """The record made in this process and the one made in a worker, for the same execution."""
    task = get_task(task_id)

    async def go():
        here = await execute(task, transport, command, limits=limits or Limits(), **fields)
        async with Workers.start(1) as workers:
            try:
                there = await workers.execute(task, transport, command, limits=limits or Limits(), **fields)
            except WorkerError as e:
                there = e
        return here, there
    return anyio.run(go)


@BWRAP
def test_a_reply_with_a_lone_surrogate_gets_the_same_record_in_a_worker() -> None:
    here, there = _both("file-write/control", "raw", "echo 'hello world' > out.txt", draw=1,
                        reply="```sh\necho 'hello world' > out.txt\n``` \udcff")
    assert here.verdict.passed
    assert not isinstance(there, Exception), f"the worker failed where this process recorded: {there}"
    assert _same_record(there) == _same_record(here)


def test_a_command_with_a_lone_surrogate_gets_the_same_refusal_record_in_a_worker() -> None:
    here, there = _both("file-write/control", "raw", "echo 'hello \udcff' > out.txt", draw=1)
    assert here.transport_error  # refused before anything runs, in this process
    assert not isinstance(there, Exception), f"the worker failed where this process recorded: {there}"
    assert _same_record(there) == _same_record(here)


@BWRAP
def test_a_command_sees_the_same_sigint_disposition_in_a_worker() -> None:
    command = "grep SigIgn /proc/self/status > out.txt; sh -c 'kill -INT $$; echo survived' >> out.txt; echo $? >> out.txt"
    here, there = _both("file-write/control", "raw", command, draw=1)
    assert not isinstance(there, Exception), there
    assert there.stdout.text == here.stdout.text
    assert _same_record(there) == _same_record(here)


@BWRAP
def test_a_cancelled_execution_in_a_worker_ends_promptly() -> None:
    task = get_task("file-write/control")

    async def go():
        async with Workers.start(1) as workers:
            began = time.monotonic()
            with anyio.move_on_after(1.5):
                await workers.execute(task, "raw", "sleep 20", limits=Limits(timeout_s=25))
            return time.monotonic() - began
    took = anyio.run(go)
    assert took < 8, f"a cancellation took {took:.1f} s to take effect (the command's own timeout: 25 s)"


@BWRAP
def test_a_worker_runs_where_the_parent_imports_its_code_from(tmp_path: Path) -> None:
    parent = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        import anyio
        from qb_client.campaign.workers import Workers
        from tasks.load import get_task
        from transports.sandbox import Limits
        async def go():
            async with Workers.start(1) as w:
                r = await w.execute(get_task("file-write/control"), "raw", "echo 'hello world' > out.txt",
                                    limits=Limits())
                print("PASSED" if r.verdict.passed else "FAILED")
        anyio.run(go)
        """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", parent], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0 and "PASSED" in done.stdout, done.stderr[-2000:]


@BWRAP
def test_a_command_cannot_write_into_or_read_from_the_worker_protocol() -> None:
    task = get_task("file-write/control")
    hostile = ("for fd in 0 1 2 3 4 5 6 7 8 9; do printf 'R{}\\nE forged\\n' >&$fd; done 2>/dev/null; "
               "for p in /proc/[0-9]*/fd/[0-9]*; do printf 'R{}\\n' > $p; done 2>/dev/null; "
               "timeout 1 cat /proc/[0-9]*/fd/0 > /dev/null 2>&1; exit 0")

    async def go():
        async with Workers.start(1) as workers:
            first = await workers.execute(task, "raw", hostile, limits=Limits(timeout_s=5), draw=1)
            second = await workers.execute(task, "raw", "echo 'hello world' > out.txt", limits=Limits(), draw=2)
            third = await workers.execute(task, "raw", "exit 3", limits=Limits(), draw=3)
        return first, second, third
    first, second, third = anyio.run(go)
    assert first.command == hostile and second.draw == 2 and third.draw == 3
    assert second.verdict.passed and third.exit_code == 3


@BWRAP
def test_a_record_rebuilt_from_worker_json_writes_the_same_results_line(tmp_path: Path) -> None:
    task = get_task("file-write/control")
    commands = ("printf 'caf\\xc3\\xa9 \\xe2\\x80\\xa8 \\x00 \\xff\\n'; echo 'hello world' > out.txt",
                "printf '%s\\n' 0.1 1e308 >&2; exit 1")

    async def go():
        return [await execute(task, t, c, limits=Limits(), draw=1, generate_ms=0.1 + 0.2,
                              reply="r\u2028\U0001f600") for c in commands for t in ("raw", "nested")]
    records = anyio.run(go)
    for r in records:
        rebuilt = Record.model_validate(json.loads(json.dumps(r.model_dump(mode="json"), ensure_ascii=True)))
        a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
        for path, rec in ((a, r), (b, rebuilt)):
            path.unlink(missing_ok=True)
            with JsonlWriter(path, follow=False) as w:
                w.write(rec)
        assert a.read_bytes() == b.read_bytes()
