"""The end of a run: nothing of it outlives it, and nothing of the host leaks.

However a run ends (its main program, its time limit, an output cap, a cancellation from outside, the harness
SIGKILLed), no process of it keeps running (untraced clones, double forks, nested pid namespaces, pid hoppers
included), no tracer thread or descriptor of the harness is left, and the end-of-run kill list holds only live
processes of the run, so the kill never reaches a host process that reused a pid.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import anyio
import pytest
from bounded import bounded
from probes import STORM, run_each, traced

from tasks.load import get_task
from transports.sandbox import Limits, Sandbox, exectrace, pool, reaper

pytestmark = pytest.mark.anyio
BWRAP = pytest.mark.needs("bwrap")

TASK = get_task("file-write/control")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _no_idle_sandboxes() -> None:
    """Sandboxes that earlier tests of this worker left built ahead hold waiting launchers (a tracer thread,
    descriptors); they are the pool's, not a leak of the runs here, so they are closed first."""
    pool.drain(30)


def _tracers() -> list[threading.Thread]:
    """Tracer threads still running (one that has just signalled its end is given a second to return)."""
    left = [t for t in threading.enumerate() if t.name == "qb-tracer"]
    for t in left:
        t.join(1.0)
    return [t for t in left if t.is_alive()]


def _members(box: Sandbox) -> list[str]:
    """The pids in the sandbox's cgroup subtree, as the host sees them (zombies are not members)."""
    found: list[str] = []
    if box.cgroup is None or "pids" not in box.cgroup.dirs:
        return found
    top = box.cgroup.dirs["pids"]
    for d in [top, *[p for p in top.iterdir() if p.is_dir()]]:
        try:
            found += (d / "cgroup.procs").read_text().split()
        except OSError:
            pass
    return found


def _fds() -> int:
    """This process's descriptors once the cleanup thread is idle (its scandir holds one while it works)."""
    assert reaper.drain(30)
    return len(os.listdir("/proc/self/fd"))


@BWRAP
async def test_a_cancelled_run_leaves_no_process_thread_or_descriptor() -> None:
    """A run cancelled from outside (a client gone, a session finished) while a
    background job keeps writing: the loop's finally kills (watch() had not ended), watch() still ends and
    joins the tracer; afterwards nothing of the run writes any more, no tracer thread is left, no
    descriptor is leaked, and the next run of the sandbox is clean."""
    with Sandbox.create(TASK, Limits(timeout_s=20)) as box:
        await box.run(["bash", "-c", "true"])  # warm: anyio's worker threads, the reaper, cached lookups
        base_fds = _fds()
        began = time.monotonic()
        with anyio.move_on_after(1.0) as scope:
            await box.run(["bash", "-c", "(while :; do date +%s%N > alive; sleep 0.02; done) & "
                                         "echo started; sleep 30"])
        assert scope.cancelled_caught
        assert not _members(box), "run() returned before every process of it was gone"
        assert time.monotonic() - began < 10, "the cancelled run went on to its time limit (20 s)"
        alive = box.workdir / "alive"
        assert alive.exists()
        before = alive.read_text()
        await anyio.sleep(0.5)
        assert alive.read_text() == before, "a job of the cancelled run is still writing"
        assert not _tracers()
        assert _fds() == base_fds
        nxt = await box.run(["bash", "-c", "echo next"])
    assert nxt.stdout.text == "next\n" and nxt.limit_hit is None and not nxt.timed_out


@BWRAP
async def test_a_run_cancelled_before_its_watch_starts_is_still_finished() -> None:
    """A run whose scope is already cancelled when it starts: the launcher is started
    (shielded), but watch() never runs (its task is cancelled at its first checkpoint), so ``ended`` is never
    set and the loop's finally blocks must kill, join and close everything themselves."""
    with Sandbox.create(TASK, Limits(timeout_s=20)) as box:
        await box.run(["bash", "-c", "true"])
        base_fds = _fds()
        began = time.monotonic()
        with anyio.CancelScope() as scope:
            scope.cancel()
            await box.run(["bash", "-c", "(while :; do date +%s%N > alive; sleep 0.02; done) & sleep 30"])
        assert not _members(box), "run() returned before every process of it was gone"
        assert time.monotonic() - began < 10, "the cancelled run went on to its time limit (20 s)"
        await anyio.sleep(0.3)
        alive = box.workdir / "alive"
        before = alive.read_text() if alive.exists() else None
        await anyio.sleep(0.3)
        assert (alive.read_text() if alive.exists() else None) == before, "a job of the cancelled run still runs"
        assert not _tracers()
        assert _fds() == base_fds
        nxt = await box.run(["bash", "-c", "echo next"])
    assert nxt.stdout.text == "next\n" and nxt.limit_hit is None


@BWRAP
async def test_runs_ended_every_way_leak_no_descriptor_nor_tracer_thread() -> None:
    """Runs ended by their main program, by a background job releasing the output,
    by the time limit, by the output drain cap, and by a job whose output goes elsewhere: after each, no
    tracer thread is alive (watch() joined it before the run returned) and the harness has the same
    descriptors as before."""
    commands = [
        ("echo a", None),
        ("(sleep 0.3; echo late) & echo early", None),
        ("sleep 30", "time"),
        ("yes", "output"),
        ("(sleep 30 >/dev/null 2>&1 &) ; echo bg", None),
    ]
    with Sandbox.create(TASK, Limits(timeout_s=1.0, output_cap=1000, drain_cap=200_000)) as box:
        await box.run(["bash", "-c", "true"])
        base_fds = _fds()
        hits = []
        for command, _ in commands:
            ex = await box.run(["bash", "-c", command])
            hits.append(ex.limit_hit)
            assert not _tracers(), command
            assert _fds() == base_fds, command
    assert hits == [hit for _, hit in commands]


@BWRAP
async def test_a_run_whose_member_dies_slowly_is_over_only_when_it_is_gone() -> None:
    """The run's traced member holds 300 MiB when the run ends; the run returns only
    once the tracer saw every traced process exit (watch() joins it), so nothing of the run is alive when
    ``run`` returns and the output written before the end is all there."""
    hold = ("python3 -c 'import os, sys, time\nb = bytearray(300 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
            "print(\"pid\", os.getpid(), flush=True)\ntime.sleep(60)' & sleep 1.5; echo main-done")
    with Sandbox.create(TASK, Limits(timeout_s=1.0)) as box:
        ex = await box.run(["bash", "-c", hold])
        assert ex.timed_out and ex.limit_hit == "time"
        assert "pid" in ex.stdout.text
        left = _members(box)  # at the moment run() returned
    assert not left, f"processes of the run outlived it: {left}"


HOPPER = r"""python3 - <<'PY'
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
if libc.syscall(56, 0x00800000 | 17, 0, 0, 0, 0) == 0:   # clone(CLONE_UNTRACED | SIGCHLD): no fork event
    os.setsid()
    end, n = time.monotonic() + 4, 0
    while time.monotonic() < end:          # each generation forks and exits: a pid hopper (ends by itself)
        if os.fork():
            os._exit(0)
        n += 1
        if n % 20 == 0:
            open("alive", "w").write(str(n))
    os._exit(0)
time.sleep(0.3)
PY
echo parent"""


@BWRAP
@pytest.mark.needs("pids-cgroup")
async def test_an_untraced_pid_hopper_does_not_outlive_a_run_without_namespaces() -> None:
    """Without bwrap (``isolation: none``, ``--allow-no-isolation``) nothing but the run's cgroup holds an
    untraced child (clone with CLONE_UNTRACED). A child that forks and exits in a loop is gone from
    ``cgroup.procs`` by the time its pid is killed: each kill pass (one read of cgroup.procs, one SIGKILL
    each) misses the next generation. The end of the run leaves nothing of it running: one pass (watch()'s)
    plus the removal's is enough, as the kernel fails a fork whose parent has a fatal signal pending."""
    with Sandbox.create(TASK, Limits(timeout_s=10), isolation="none") as box:
        ex = await box.run(["bash", "-c", HOPPER])
        assert reaper.drain(30)  # the run group's removal (one more kill pass) is done too
        alive = box.workdir / "alive"
        first = alive.read_text() if alive.exists() else None
        await anyio.sleep(0.3)
        second = alive.read_text() if alive.exists() else None
    assert ex.stdout.text == "parent\n", ex
    assert first is not None, "the hopper never ran: nothing was tested"
    assert first == second, "a process of the run still runs after it ended and its group was removed"


UNTRACED_WRITER = r"""python3 - <<'PY'
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
if libc.syscall(56, 0x00800000 | 17, 0, 0, 0, 0) == 0:   # clone(CLONE_UNTRACED | SIGCHLD): no fork event
    os.setsid()
    for i in range(100000):
        open("/sandbox/work/alive", "w").write(str(i)); time.sleep(0.05)
    os._exit(0)
PY
sleep 0.3; echo parent"""


@pytest.mark.needs("bwrap")
def test_an_untraced_clone_does_not_outlive_the_run() -> None:
    """CLONE_UNTRACED hides a child from the tracer (no fork event, not in kill_all's pids), but it
    stays in bwrap's pid namespace and the run's cgroup, so it dies with the run."""
    ex, _, moved = traced(UNTRACED_WRITER)
    assert ex.stdout.text.strip() == "parent" and not moved


TOKEN = "qbr27tok"  # in the command line of every process an attack leaves running


def leftovers() -> list[int]:
    """Host processes whose command line carries TOKEN (killed here, so a failure leaves nothing)."""
    found = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if TOKEN.encode() in Path(f"/proc/{p}/cmdline").read_bytes():
                    found.append(int(p))
            except OSError:
                pass
    for pid in found:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    return found


UNTRACED = textwrap.dedent(r"""
    python3 - <<'PY' &
    import ctypes, os, time
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(56, 0x00800000 | 17, 0, 0, 0, 0) == 0:   # clone(CLONE_UNTRACED | SIGCHLD)
        os.setsid()
        if os.fork():
            os._exit(0)
        os.execvp("sh", ["sh", "-c", "while :; do date +%s%N > /sandbox/work/FILE; sleep 0.05; done; : TOKEN"])
    time.sleep(0.2)
    PY
    """).replace("TOKEN", TOKEN)


NESTED = ("unshare -Urpf sh -c 'setsid sh -c \"while :; do date +%s%N > /sandbox/work/v; sleep 0.05; done; "
          f": {TOKEN}\" & sleep 0.2' &")


@BWRAP
def test_untraced_double_fork_and_nested_pid_namespace_die_with_the_run() -> None:
    """A bwrap run's end kills no cgroup: killing bwrap's init (zap_pid_ns_processes) ends a CLONE_UNTRACED
    setsid double fork and a nested user+pid namespace's processes."""
    async def go():
        with Sandbox.create(None, Limits(timeout_s=5)) as box:
            ex = await box.run(["bash", "-c", UNTRACED.replace("FILE", "u") + NESTED + "\nsleep 0.5; echo x"])
            files = [box.workdir / "u", box.workdir / "v"]
            before = [f.read_text() if f.exists() else None for f in files]
            await anyio.sleep(0.5)
            return ex, before, [f.read_text() if f.exists() else None for f in files]
    ex, before, after = bounded(lambda: anyio.run(go), 60)
    assert ex.exit_code == 0 and ex.stdout.text == "x\n" and None not in before
    assert before == after and leftovers() == []


HARNESS_KILLED = textwrap.dedent("""
    import anyio, os, signal, threading, time
    from transports.sandbox import Limits, Sandbox
    async def go():
        box = Sandbox.create(None, Limits(timeout_s=20))
        print(box.workdir, flush=True)
        def kill_once_both_write():  # the command's processes are running: then the harness dies
            for _ in range(400):
                if all((box.workdir / n).exists() for n in "uv"):
                    break
                time.sleep(0.05)
            os.kill(os.getpid(), signal.SIGKILL)
        threading.Thread(target=kill_once_both_write, daemon=True).start()
        await box.run(["bash", "-c", CMD])
    anyio.run(go)
    """)


@BWRAP
def test_a_harness_sigkilled_mid_run_takes_untraced_and_nested_processes_along() -> None:
    """Without --die-with-parent, PTRACE_O_EXITKILL kills bwrap's init with the harness, and the namespace's
    end takes the untraced and nested-namespace processes (no sweep needed)."""
    cmd = UNTRACED.replace("FILE", "u") + NESTED + "\nsleep 30"
    code = f"CMD = {cmd!r}\n" + HARNESS_KILLED
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    workdir = Path(done.stdout.split()[0])
    # read through descriptors opened now: another process's first sandbox sweeps what a dead harness left
    # (its root included), and a writer still alive would go on writing these same files (date's > truncates)
    fds = [os.open(workdir / n, os.O_RDONLY) for n in "uv"]
    try:
        time.sleep(0.5)
        before = [os.pread(fd, 100, 0) for fd in fds]
        time.sleep(0.5)
        after = [os.pread(fd, 100, 0) for fd in fds]
    finally:
        for fd in fds:
            os.close(fd)
    assert all(before) and leftovers() == [] and before == after


@BWRAP
def test_the_end_of_run_kill_list_holds_only_live_processes_of_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """At kill_all every pid in the list is alive and in the run's pid namespace (or is the launcher):
    a pid the kernel could give to a host process is never there (children exiting before their parent's fork
    event, fork events lost with a SIGKILLed forker, thread execs)."""
    host_ns = os.readlink("/proc/self/ns/pid")
    bad: list[tuple[int, str]] = []
    seen: list[int] = []
    real = exectrace.Tracer.kill_all

    def checked(self: exectrace.Tracer) -> None:
        with self._lock:
            alive = set(self._alive)
        seen.append(len(alive))
        unreadable = []
        for pid in alive:
            try:
                ns = os.readlink(f"/proc/{pid}/ns/pid")
            except OSError:
                unreadable.append(pid)
                continue
            if ns == host_ns and (self.proc is None or pid != self.proc.pid):
                bad.append((pid, "host"))
        # a process that exited a moment ago (bwrap's monitor leaves as the command's first program does) is a
        # zombie until the tracer reads its exit, and its number is held until then: legitimate while its exit
        # is on its way; a pid still listed once the tracer had time to read every exit is a stale one
        deadline = time.monotonic() + 2
        while unreadable and time.monotonic() < deadline:
            time.sleep(0.05)
            with self._lock:
                unreadable = [pid for pid in unreadable if pid in self._alive]
        bad.extend((pid, "gone") for pid in unreadable)
        real(self)
    monkeypatch.setattr(exectrace.Tracer, "kill_all", checked)
    [(ex, _)] = run_each([STORM], timeout=10)
    assert ex.stdout.text == "done\n" and not ex.timed_out
    assert bad == [] and seen and seen[0] >= 2  # init and the sleep were there to be killed


THREAD_EXEC = ("import threading, os, time\n"
               "threading.Thread(target=lambda: os.execv('/bin/sleep', ['sleep', '0.2'])).start()\n"
               "time.sleep(5)")


@pytest.mark.needs("root")
def test_a_thread_s_exec_leaves_no_stale_pid_for_the_end_of_run_kill() -> None:
    """A thread's execve takes over its process's pid and the thread's own tid vanishes unreported: the tracer
    drops it at the exec event, so the end of the run never SIGKILLs a host process that reused the number."""
    import os
    import subprocess

    from transports.sandbox.exectrace import GATE_PREFIX, Tracer

    tracer = Tracer(["/bin/sh", "-c", GATE_PREFIX + 'exec python3 -c "$0"', THREAD_EXEC], env=dict(os.environ),
                    cwd="/tmp", stdin=False)
    tracer.start()
    assert tracer.main_exited.wait(10)
    time.sleep(0.2)
    gone = [pid for pid in tracer._alive if not os.path.exists(f"/proc/{pid}")]
    victim = None
    if gone:  # a host process that happens to get that number next (ns_last_pid: the next pid, as root)
        for _ in range(20):
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(gone[0] - 1))
            victim = subprocess.Popen(["sleep", "30"])
            if victim.pid == gone[0]:
                break
            victim.kill()
            victim.wait()
            victim = None
    try:
        tracer.kill_all()  # what the end of every run does
        time.sleep(0.2)
        assert tracer.join(5)
        assert victim is None or victim.poll() is None, "an unrelated host process was SIGKILLed"
        assert gone == []
    finally:
        if victim is not None:
            victim.kill()
            victim.wait()
