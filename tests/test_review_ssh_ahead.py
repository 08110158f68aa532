"""Review attacks on launchers started ahead for several runs (transports.sandbox.ahead ``Launch``, ``Sandbox.waiting``,
``Ssh.launches`` and its tokens, a streamed stdin held until the command's exec). Each test fails if its attack
works; a strict xfail names a defect found in review."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import anyio
import pytest

from tasks.load import get_task
from transports.execute import execute
from transports.registry import get
from transports.sandbox import Limits, Sandbox, pool
from transports.sandbox.ahead import Launch
from transports.ssh.endpoints import ready_endpoint

pytestmark = pytest.mark.needs("bwrap", "openssh")
TASK = "file-write/control"


def _box(limits: Limits | None = None) -> Sandbox:
    return Sandbox.create(get_task(TASK), limits)


async def _ssh():
    ssh = get("ssh")
    await execute(get_task(TASK), ssh, "true")  # the endpoint is up from here on
    return ssh


def _spy(monkeypatch) -> list:
    """Every Sandbox.run of the test, on any thread (the embedded server runs on its own): (thread, execution)."""
    seen, orig = [], Sandbox.run

    async def run(self, argv, **kw):
        ex = await orig(self, argv, **kw)
        seen.append((threading.current_thread().name, ex))
        return ex
    monkeypatch.setattr(Sandbox, "run", run)
    return seen


def _first(ex) -> tuple:
    e = ex.trace.execs[0]
    return e.argv, sorted(v for v in e.env if not v.startswith(b"QB_SANDBOX="))


def test_each_ssh_run_execs_what_its_own_launcher_would_and_the_server_run_gets_no_client_side(monkeypatch) -> None:
    """The kernel-traced first exec (argv, environment) of the local side and of the server's run is the same with
    and without launchers ahead; the server's run never has the local side's bind, BASH_ENV or token."""
    seen = _spy(monkeypatch)
    probe = "grep -c qb-ssh /proc/self/mountinfo; env | grep -c -E '^(BASH_ENV|QB_SANDBOX)='; true"

    async def go():
        ssh, out = await _ssh(), []
        for ahead in (True, False):
            seen.clear()
            with _box() as box:
                assert not ahead or box.start_ahead(ssh.launches(box))
                held = list(box.waiting)
                d = await ssh.deliver(probe, box)
            out.append((d, held, {name: _first(ex) for name, ex in seen}))
        return out
    (early, held, a), (own, none, b) = anyio.run(go)
    assert len(held) == 2 and all(w.used for w in held) and none == []
    assert a == b and set(a) == {"MainThread", "qb-ssh-server"}
    assert early.execution.stdout.text == own.execution.stdout.text == "0\n0\n"


def test_a_token_made_for_a_waiting_sandbox_serves_nobody_before_its_delivery_nor_after_it_is_closed() -> None:
    """A second local ssh with another sandbox's token (the construction reaches the server: the control run
    with the sandbox's own token works) is refused while that sandbox waits, and once it is closed unused."""
    async def go():
        ssh = await _ssh()
        server = ready_endpoint(None, ssh.client_kind()).server
        out = []
        with _box() as other:
            victim = _box()
            assert victim.start_ahead(ssh.launches(victim))
            token = victim.waiting[0].env["QB_SANDBOX"]
            assert token not in server._sessions
            out.append(await ssh.deliver(f'x"; QB_SANDBOX={token} ssh qb-remote "echo stolen > stolen', other))
            victim.close()
            out.append(await ssh.deliver(f'x"; QB_SANDBOX={token} ssh qb-remote "echo stolen > stolen', other))
            out.append(await ssh.deliver('x"; ssh qb-remote "echo mine', other))
            assert not (victim.workdir / "stolen").exists() and not (other.workdir / "stolen").exists()
        return out
    before, after, control = anyio.run(go)
    for d in (before, after):
        assert "unknown sandbox token" in d.execution.stderr.text and d.execution.exit_code == 255
    assert control.execution.stdout.text == "mine\n"


def test_a_run_takes_only_the_launcher_started_for_its_own_environment_binds_and_network(tmp_path) -> None:
    src = tmp_path / "bound"
    src.mkdir()
    (src / "f").write_text("in\n")
    os.chmod(tmp_path, 0o755)
    launches = [Launch(env={"QB_X": "1"}), Launch(binds=((src, "/run/b"),)), Launch()]

    async def go():
        with _box() as box:
            assert box.start_ahead(launches)
            env1, bound, plain = held = list(box.waiting)
            assert len(held) == 3
            cmd = ["bash", "-c", "echo ${QB_X-none}; cat /run/b/f 2>/dev/null || echo nobind"]
            out = [(await box.run(cmd, env={"QB_X": "2"})).stdout.text,
                   (await box.run(cmd, network=True)).stdout.text]
            assert not any(w.used for w in held) and box.waiting.passed_by == 2
            out.append((await box.run(cmd, binds=((src, "/run/b"),))).stdout.text)
            assert bound.used and not env1.used and not plain.used
            out.append((await box.run(cmd, env={"QB_X": "1"})).stdout.text)
            out.append((await box.run(cmd)).stdout.text)
            assert env1.used and plain.used and box.waiting == []
        return out
    assert anyio.run(go) == ["2\nnobind\n", "none\nnobind\n", "none\nin\n", "1\nnobind\n", "none\nnobind\n"]


def test_a_launch_environment_runs_nothing_in_the_gate_and_the_trace_starts_at_the_command() -> None:
    async def go():
        out = []
        for ahead in (True, False):
            with _box() as box:
                (box.workdir / "rc").write_text("echo gate >> /sandbox/work/marker; /bin/true\n")
                env = {"BASH_ENV": "/sandbox/work/rc"}
                assert not ahead or box.start_ahead([Launch(env=env)])
                ex = await box.run(["cat", "marker"], env=env)
                out.append((ex.stdout.text, ex.trace.execs[0].argv[0]))
        return out
    early, own = anyio.run(go)
    assert own == ("", b"cat") and early == own


@pytest.mark.xfail(strict=True, reason="bwrap's init (the command's pid 1) shows bwrap's argv: with a launcher "
                   "started ahead the gate script, with the run's own the command (docs/sandbox.md, what a "
                   "command can tell)")
def test_the_server_runs_pid_1_command_line_is_the_same_with_a_launcher_started_ahead() -> None:
    async def go():
        ssh, out = await _ssh(), []
        for ahead in (True, False):
            with _box() as box:
                assert not ahead or box.start_ahead(ssh.launches(box))
                d = await ssh.deliver("tr '\\\\0' ' ' </proc/1/cmdline | sed 's/.*--chdir [^ ]* -- //'", box)
                out.append(d.execution.stdout.text)
        return out
    early, own = anyio.run(go)
    assert early == own


async def _chunks(data: bytes, size: int = 1 << 16, delay: float = 0.0):
    for i in range(0, len(data), size):
        if delay:
            await anyio.sleep(delay)
        yield data[i:i + size]


def test_a_long_stream_reaches_a_launcher_started_ahead_whole_and_whole_again_after_it_dies_at_release() -> None:
    data = os.urandom(3 << 20)
    want = hashlib.sha256(data).hexdigest() + "  -\n"

    async def go():
        out = []
        for kill in (None, "before", "after"):
            with _box() as box:
                assert box.start_ahead()
                w = box.waiting[0]
                release = w.tracer.release

                def killing(*a, _r=release, _k=kill, _w=w, **k):
                    if _k == "before":
                        _w.tracer.kill_all()
                        time.sleep(0.05)
                    ok = _r(*a, **k)
                    if _k == "after":
                        _w.tracer.kill_all()
                    return ok
                w.tracer.release = killing
                ex = await box.run(["sha256sum"], stdin=_chunks(data))
                out.append((w.used, ex.exit_code, ex.stdout.text))
        return out
    assert anyio.run(go) == [(True, 0, want)] * 3


def test_a_stream_the_command_never_reads_neither_hangs_the_run_nor_outlives_its_clock_nor_leaks_threads() -> None:
    async def forever():
        while True:
            await anyio.sleep(0.005)
            yield b"x" * 4096

    async def go():
        out = []
        for argv in (["bash", "-c", "echo hi"], ["bash", "-c", "exec 0<&-; sleep 30"], ["head", "-c", "3"]):
            with _box(Limits(timeout_s=2)) as box:
                assert box.start_ahead()
                t = time.monotonic()
                ex = await box.run(argv, stdin=forever())
                out.append((ex.stdout.text, ex.timed_out, time.monotonic() - t < 4))
        before = threading.active_count()
        for _ in range(8):
            with _box() as box:
                assert box.start_ahead()
                await box.run(["bash", "-c", "cat >/dev/null"], stdin=_chunks(b"abc" * 100))
        await anyio.sleep(0.5)
        return out, threading.active_count() - before
    out, grown = anyio.run(go)
    assert out == [("hi\n", False, True), ("", True, True), ("xxx", False, True)] and grown <= 1


def _descendants() -> set[int]:
    parent = {}
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            parent[int(p)] = int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            pass
    me, out = os.getpid(), set()
    for p in parent:
        q = p
        while q in parent and q > 1:
            q = parent[q]
            if q == me:
                out.add(p)
                break
    return out


def test_side_by_side_and_cancelled_ssh_deliveries_stay_in_their_sandboxes_and_leave_no_process() -> None:
    """Two deliveries at once in two sandboxes with launchers ahead, one with a second local ssh in the background,
    then one cancelled mid-run and pooled records: each write lands in its own sandbox, and once the pool is
    drained nothing of them runs on."""
    async def go():
        ssh = await _ssh()
        pool.drain()
        await anyio.sleep(0.3)
        base = _descendants()
        with _box() as a, _box() as b:
            assert a.start_ahead(ssh.launches(a)) and b.start_ahead(ssh.launches(b))
            held, res = list(a.waiting) + list(b.waiting), {}

            async def one(name, box, cmd):
                res[name] = await ssh.deliver(cmd, box)
            async with anyio.create_task_group() as tg:
                tg.start_soon(one, "A", a, 'sleep 0.3; echo A > who" & ssh qb-remote "echo A2 > who2" ; wait; '
                                           'ssh qb-remote "cat who who2')
                tg.start_soon(one, "B", b, "sleep 0.3; echo B > who; cat who")
            files = [(box.workdir / f).read_text() for box, f in ((a, "who"), (a, "who2"), (b, "who"))]
        with _box() as c:
            assert c.start_ahead(ssh.launches(c))
            with anyio.move_on_after(1.0):
                await ssh.deliver("sleep 20", c)
        for i in range(3):
            await execute(get_task(TASK), ssh, f"echo {i} > out.txt")
        pool.drain()
        await anyio.sleep(1.0)
        return res, files, held, _descendants() - base
    res, files, held, left = anyio.run(go)
    assert files == ["A\n", "A2\n", "B\n"] and all(w.used for w in held)
    assert res["A"].execution.stdout.text == "A\nA2\n" and res["B"].execution.stdout.text == "B\n"
    assert left == set()
