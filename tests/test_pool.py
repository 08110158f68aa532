"""Sandboxes built ahead (transports.sandbox.pool) and their launchers started ahead (transports.sandbox.ahead):
a record that takes one is the record it would have been without, and no sandbox serves two records."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from tasks.load import get_task
from transports.execute import execute
from transports.registry import get
from transports.sandbox import Sandbox, pool

BWRAP = pytest.mark.needs("bwrap")
TASK = "file-write/control"
# what a command can see of its own start: environment, ids, capabilities, limits, cgroup, descriptors, parent
PROBE = ("env | sort; id; echo pid=$$ ppid=$PPID; ulimit -a; grep -E '^(Cap|NoNewPrivs|Seccomp|Sig(Ign|Blk))' "
         "/proc/self/status; sed 's/run-[0-9]*/R/; s/sandbox-[0-9]*/S/' /proc/self/cgroup; ls /proc/self/fd; "
         "ls /proc/1/fd | wc -l; pwd; ls -A; trap")


async def _run(box: Sandbox, command: str, transport: str = "raw", stdin: bytes | None = None):
    if stdin is None:
        return await get(transport).deliver(command, box)
    return await box.run(["bash", "-c", command], stdin=stdin)


def _pair(command: str, transport: str = "raw", stdin: bytes | None = None):
    """The same command in a sandbox whose launcher was started ahead and in one that starts its own."""
    async def go():
        out = []
        for ahead in (True, False):
            with Sandbox.create(get_task(TASK)) as box:
                if ahead:
                    assert box.start_ahead()
                    waiting = box.waiting[0]
                out.append(await _run(box, command, transport, stdin))
                if ahead:
                    out.append(waiting)
        return out
    return anyio.run(go)


@BWRAP
def test_a_command_run_by_a_launcher_started_ahead_sees_exactly_what_its_own_launcher_would_give_it() -> None:
    early, waiting, own = _pair(PROBE)
    assert waiting.used
    ex_a, ex_b = early.execution, own.execution
    assert (ex_a.exit_code, ex_a.stdout.text, ex_a.stderr.text) == (ex_b.exit_code, ex_b.stdout.text, ex_b.stderr.text)
    assert "pid=2 ppid=1" in ex_a.stdout.text and "uid=65534" in ex_a.stdout.text
    assert early.received == own.received == PROBE
    # the kernel's record: the command's first program first, with the environment bwrap gives it
    first_a, first_b = ex_a.trace.execs[0], ex_b.trace.execs[0]
    assert (first_a.argv, first_a.env, first_a.exe) == (first_b.argv, first_b.env, first_b.exe)
    assert sorted(e.argv[0] for e in ex_a.trace.execs) == sorted(e.argv[0] for e in ex_b.trace.execs)  # a pipe: any order


@BWRAP
def test_a_launcher_started_ahead_passes_the_runs_input_and_a_nested_paste_is_judged_the_same() -> None:
    early, waiting, own = _pair("read a; read b; echo \"$b-$a\"", stdin=b"one\ntwo\n")
    assert waiting.used and early.stdout.text == own.stdout.text == "two-one\n"
    cmd = "echo 'it''s' \"$HOME\""
    early, waiting, own = _pair(cmd, transport="nested")
    assert waiting.used
    assert (early.received, early.received_note, early.split) == (own.received, own.received_note, own.split)
    assert early.execution.stdout.text == own.execution.stdout.text


@BWRAP
def test_a_run_with_its_own_binds_or_an_argument_over_64_kib_starts_its_own_launcher() -> None:
    long = "echo " + "x" * 70_000 + " | wc -c"
    early, waiting, own = _pair(long)
    assert not waiting.used and early.execution.stdout.text == own.execution.stdout.text == "70001\n"
    early, waiting, own = _pair("echo hi > out.txt; cat out.txt", transport="tempscript")  # a host-written file
    assert not waiting.used and early.received == own.received and early.execution.stdout.text == "hi\n"


async def _with_killed_launcher(run):
    """``run(box)`` in a sandbox whose launcher started ahead was killed while it waited."""
    with Sandbox.create(get_task(TASK)) as box:
        assert box.start_ahead()
        waiting = box.waiting[0]
        waiting.tracer.kill_all()
        waiting.tracer.main_exited.wait(10)
        return await run(box), waiting


async def _stream(*chunks: bytes):
    for c in chunks:
        await anyio.sleep(0.01)
        yield c


@BWRAP
def test_a_launcher_killed_while_it_waits_is_replaced_by_the_runs_own() -> None:
    """Also for a streamed input: nothing is taken from it before the command's exec, so the run's own
    launcher gets it whole."""
    ex, waiting = anyio.run(_with_killed_launcher, lambda box: box.run(["bash", "-c", "cat; echo"],
                                                                       stdin=_stream(b"first ", b"second")))
    assert not waiting.used and ex.stdout.text == "first second\n" and ex.exit_code == 0
    d, waiting = anyio.run(_with_killed_launcher, lambda box: get("raw").deliver("echo alive", box))
    assert not waiting.used and d.execution.stdout.text == "alive\n" and d.received == "echo alive"


@BWRAP
def test_consecutive_records_never_share_a_sandbox() -> None:
    async def go():
        task = get_task(TASK)
        first = await execute(task, "raw", "echo mine > planted; ls -A; echo $$ > /tmp/t; pwd -P")
        for _ in range(200):  # the next one is built meanwhile
            if pool.idle("raw"):
                break
            time.sleep(0.05)
        assert pool.idle("raw")
        second = await execute(task, "raw", "ls -A; cat /tmp/t 2>&1; find /sandbox/meta /sandbox/home -mindepth 1 | wc -l")
        return first, second
    first, second = anyio.run(go)
    assert "planted" in first.stdout.text
    assert "planted" not in second.stdout.text and "No such file" in second.stdout.text
    assert second.stdout.text.splitlines()[-1] == "0"  # its meta/ and home/ are as empty as a fresh sandbox's


def test_the_pool_is_off_with_qb_no_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QB_NO_POOL", "1")
    assert pool.take(get_task(TASK), None, "raw") is None


@BWRAP
def test_a_process_that_exits_leaves_no_sandbox_built_ahead() -> None:
    code = ("import anyio\nfrom tasks.load import get_task\nfrom transports.execute import execute\n"
            "import os\nprint(os.getpid(), flush=True)\n"
            "async def go():\n    for _ in range(3):\n        await execute(get_task('file-write/control'), 'raw', 'true')\n"
            "anyio.run(go)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert done.returncode == 0, done.stderr
    pid = done.stdout.split()[0]
    import tempfile
    left = [p for base in {tempfile.gettempdir(), "/tmp"} for p in Path(base).glob(f"qb-sandbox-{pid}-*")]
    assert left == []
    procs = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if f"qb-sandbox-{pid}-".encode() in Path(f"/proc/{p}/cmdline").read_bytes():
                    procs.append(p)
            except OSError:
                pass
    assert procs == []


def _wait_idle(transport: str) -> None:
    for _ in range(200):
        if pool.idle(transport):
            return
        time.sleep(0.05)


def _next_has_launcher(transport: str) -> bool:
    """Whether the sandbox the pool builds next for ``transport`` comes with a launcher started ahead."""
    _wait_idle(transport)
    box = pool.take(get_task(TASK), None, transport)
    assert box is not None
    with box:
        return bool(box.waiting)


def _pooled_record(transport: str, command: str):
    """A record of ``command`` in a sandbox the pool built ahead (with its launcher, if the transport has one)."""
    task = get_task(TASK)
    anyio.run(lambda: execute(task, transport, "true"))  # asks the pool for the next one
    _wait_idle(transport)
    return anyio.run(lambda: execute(task, transport, command))


@BWRAP
def test_only_a_transport_that_wants_its_own_launcher_loses_the_launchers_started_ahead() -> None:
    """A record that passes its launcher by for its own reasons (an argument file too long) leaves its transport's
    next sandboxes with one; a transport whose runs want other binds (tempscript's host-written file) gets none."""
    assert _pooled_record("raw", "echo " + "x" * 70_000 + " | wc -c").stdout.text == "70001\n"
    _next_has_launcher("raw")  # built while that record ran
    assert _next_has_launcher("raw")
    assert _pooled_record("tempscript", "echo 'hello world' > out.txt").verdict.passed
    _next_has_launcher("tempscript")  # built while that record ran, before its launcher was passed by
    assert not _next_has_launcher("tempscript")
    assert _next_has_launcher("raw")


@BWRAP
def test_drain_waits_for_the_builds_asked_before_it_not_for_a_campaign_still_taking() -> None:
    """Records of three transports keep taking (each take asks for the next build) while drain() runs: it
    waits for what was asked before it and returns, rather than for a moment when nothing is pending."""
    import threading

    stop, task = threading.Event(), get_task(TASK)

    def taker(transport: str) -> None:
        while not stop.is_set():
            box = pool.take(task, None, transport)
            if box is not None:
                box.close()
            time.sleep(0.003)

    threads = [threading.Thread(target=taker, args=(t,)) for t in ("raw", "nested", "json-naive")]
    for t in threads:
        t.start()
    try:
        time.sleep(0.3)
        began = time.monotonic()
        pool.drain(60)
        took = time.monotonic() - began
    finally:
        stop.set()
        for t in threads:
            t.join()
    pool.drain(60)
    assert took < 30, f"drain waited {took:.1f} s: for builds asked after it began"
