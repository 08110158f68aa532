"""A hostile review of a run's host-side tail (step 16): watch() joins the tracer itself and the loop's finally
kills only when watch() did not finish; a run group's removal no longer holds the refused-fork count's lock
through its rmdir; a transport needing only programs is checked on the loop; the host layout's binds are read
once; the after-run refused-fork count is read before the group's removal is queued.

Each test asserts the SAFE outcome; an attack that works is ``xfail(strict=True)`` with its reason. Results at
review time are in each docstring (HOLDS / BROKEN, and how the code before the change, 00d8f58, did). No
assertion is on an absolute duration: the slow-removal test counts what completes during a removal it makes
slow itself, without load on the machine.

Summary: nothing the change introduced broke. Its one aim that can be tested, a count not held up by a slow
removal, HOLDS and fails on 00d8f58. BROKEN and older than the change, now fixed: a refused fork was attributed
to every run of the sandbox in progress at the time (the count was the sandbox's, not the run's).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import anyio
import pytest

from tasks.load import get_task
from transports.registry import get
from transports.sandbox import Limits, Sandbox, cgroups, reaper

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap")]

TASK = get_task("file-write/control")

# Forks until the kernel refuses (children sleep with their output elsewhere, so the run ends with its main
# program), after first starting, with clone(CLONE_UNTRACED), a child the tracer never sees that holds
# ``MIB`` MiB: the end of the run does not wait for it (tracer.join() waits for traced processes only), so
# the run group's removal, queued right after, runs while its pages are still being freed.
FORKS_THEN_HOLD = r"""python3 - >/dev/null 2>&1 <<'PY'
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
if libc.syscall(56, 0x00800000 | 17, 0, 0, 0, 0) == 0:   # clone(CLONE_UNTRACED | SIGCHLD)
    b = bytearray(MIB << 20)
    for i in range(0, len(b), 4096): b[i] = 1
    time.sleep(60)
    os._exit(0)
time.sleep(0.3)
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        n += 1
except OSError:
    open("refused", "w").write(str(n))
PY
cat refused 2>/dev/null && echo " refused" """

REFUSE = FORKS_THEN_HOLD.replace("MIB", "200")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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


# -- 1. the refused-fork count around a run group's removal ----------------------------------------------


@pytest.mark.needs("pids-cgroup")
async def test_the_run_after_one_with_refused_forks_is_not_marked_processes() -> None:
    """HOLDS (and held before): run 1's forks are refused; run 2 starts at once, while run 1's group is
    being removed on the cleanup thread (its untraced member's pages still being freed), and counts before
    and after itself: it must not see run 1's refused forks (a count that skipped the group being removed
    without its tally, or counted it twice, would say ``processes``). The sandbox's count, once every
    removal is done, is what it was right after run 1: never lost, never doubled."""
    with Sandbox.create(TASK, Limits(processes=24, timeout_s=15)) as box:
        first = await box.run(["bash", "-c", REFUSE])
        after_first = cgroups.pid_limit_hits(box.cgroup)
        second = await box.run(["bash", "-c", "true"])
        third = await box.run(["bash", "-c", "echo x"])
        assert reaper.drain(30)
        settled = cgroups.pid_limit_hits(box.cgroup)
        fourth = await box.run(["bash", "-c", "true"])
    assert first.stdout.text.endswith(" refused\n") and first.limit_hit == "processes", first
    assert (second.limit_hit, third.limit_hit, fourth.limit_hit) == (None, None, None)
    assert after_first > 0 and settled == after_first, (after_first, settled)


@pytest.mark.needs("pids-cgroup")
async def test_an_innocent_run_beside_a_refused_fork_is_not_marked_processes() -> None:
    """BROKEN before this review (and before the change too), fixed: two runs of one sandbox at once (the ssh
    transport's remote runs, a reply's concurrent runs): the innocent run forked nothing, yet its record said
    ``limit_hit: "processes"``, because each run compared the WHOLE sandbox's count before and after itself,
    so the other run's refused forks landed in its record. On cgroup v1 a run now reads its own run group's
    count (the kernel counts a refused fork in the forking task's group: ``cgroups.refused_in_run``)."""
    with Sandbox.create(TASK, Limits(processes=24, timeout_s=15)) as box:
        results: dict[str, object] = {}

        async def innocent() -> None:
            results["innocent"] = await box.run(["bash", "-c", "sleep 2; echo ok"])

        async def forker() -> None:
            await anyio.sleep(0.5)
            results["forker"] = await box.run(["bash", "-c", REFUSE.replace("200 << 20", "1 << 20")])

        async with anyio.create_task_group() as tg:
            tg.start_soon(innocent)
            tg.start_soon(forker)
    good, bad = results["innocent"], results["forker"]
    assert bad.limit_hit == "processes", bad  # type: ignore[attr-defined]
    assert good.stdout.text == "ok\n" and good.limit_hit is None, good  # type: ignore[attr-defined]


FORKS = ("import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            time.sleep(30)\n"
         "            os._exit(0)\n        n += 1\nexcept OSError:\n    print('refused after', n, flush=True)\n"
         "time.sleep(60)\n")


LATE = ("import os, sys\n"
        "def dead(pid):\n    try:\n        return open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[0] in 'ZX'\n"
        "    except OSError:\n        return True\n"
        "print('ready', flush=True)\nwhile not dead(sys.argv[2]): pass\n"
        "try:\n    open(sys.argv[1] + '/tasks', 'w').write('0')\n    print('joined', flush=True)\n"
        "except OSError:\n    print('missed', flush=True)\nimport time; time.sleep(30)\n")
"""A process that moves itself into the run group (``argv[1]``) the moment process ``argv[2]`` is dead (killed
by the removal, which has then read the group's members): a migration written from the test's own process
stalled its other threads, and a thread waiting for the death came too late."""


def _slow_removal() -> tuple[set[int], int, int, float, bool]:
    """A run group whose forks were refused is removed on another thread while this thread counts the
    sandbox's refused forks in a loop. The removal is made slow WITHOUT load on the machine: once it has
    read the group's members and killed them, a fresh process joins the group, so every rmdir retry
    fails (EBUSY) and the group is left. (Dying members that hold much memory make it slow too, but they
    keep both cores busy freeing pages, and every thread then stalls, lock or not.)
    Returns (the counts seen, the count before, how many counts completed while the removal still ran, the
    removal's duration, whether the late member did join)."""
    import subprocess
    import sys

    with Sandbox.create(None, Limits(processes=20, timeout_s=20)) as box:
        run = cgroups.child(box.cgroup)
        assert run is not None and box.cgroup is not None
        first = subprocess.Popen(["/bin/sh", "-c", 'for g in $0; do echo 0 > "$g/tasks"; done; exec "$@"',
                                  run.joined(), sys.executable, "-c", FORKS], stdout=subprocess.PIPE, text=True)
        late = subprocess.Popen([sys.executable, "-c", LATE, str(run.dirs["pids"]), str(first.pid)],
                                stdout=subprocess.PIPE, text=True)
        joined: list[float] = []

        def join_late() -> None:
            assert late.stdout is not None
            if late.stdout.readline() == "joined\n":
                joined.append(time.perf_counter())

        try:
            assert first.stdout is not None and first.stdout.readline().startswith("refused after")
            assert late.stdout is not None and late.stdout.readline() == "ready\n"
            before = cgroups.pid_limit_hits(box.cgroup)
            remover = threading.Thread(target=cgroups.remove, args=(run,))
            injector = threading.Thread(target=join_late)
            began = time.perf_counter()
            remover.start()
            injector.start()
            seen, done = set(), []
            while remover.is_alive():
                seen.add(cgroups.pid_limit_hits(box.cgroup))
                if remover.is_alive():
                    done.append(time.perf_counter())
                time.sleep(0)  # let the other threads run: a remover done with its lock ends at once
            took = time.perf_counter() - began
            remover.join()
            injector.join()
            seen.add(cgroups.pid_limit_hits(box.cgroup))
        finally:
            late.kill()
            late.wait()
            if late.stdout is not None:
                late.stdout.close()
            first.kill()
            first.wait()
            if first.stdout is not None:
                first.stdout.close()
            cgroups.remove(run)
    meanwhile = sum(t > joined[0] for t in done) if joined else 0  # counts completed while the rmdir retried
    return seen, before, meanwhile, took, bool(joined)


@pytest.mark.needs("pids-cgroup", "root")
def test_a_count_on_the_loop_is_not_held_up_by_a_slow_removal() -> None:
    """HOLDS (BROKEN before the change: the removal held the count's lock through its rmdir retries, and
    ``pid_limit_hits`` runs on the event loop twice a run): while a run group's removal retries its rmdir,
    counts of the sandbox keep completing (not one, after it), and each sees the refused forks exactly once,
    also once the group is left (its count given back)."""
    for _ in range(3):  # the late member may come after the rmdir already succeeded: then try again
        seen, before, meanwhile, took, joined = _slow_removal()
        if joined:
            break
    assert joined, "the late member never joined the group: nothing was tested"
    assert before > 0 and seen == {before}, (before, seen)
    # each count is a fraction of a millisecond of work and the removal retries for ~100 ms: held up by the
    # removal, the loop completes one count when the removal is over, not dozens while it runs
    assert meanwhile >= 10, f"only {meanwhile} counts completed during the rest of a {took * 1000:.1f} ms removal"


# -- 2. the end of a run: nothing of it outlives it, nothing of the host leaks ---------------------------


async def test_a_cancelled_run_leaves_no_process_thread_or_descriptor() -> None:
    """HOLDS (and held before): a run cancelled from outside (a client gone, a session finished) while a
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


async def test_a_run_cancelled_before_its_watch_starts_is_still_finished() -> None:
    """HOLDS (and held before): a run whose scope is already cancelled when it starts: the launcher is started
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


async def test_runs_ended_every_way_leak_no_descriptor_nor_tracer_thread() -> None:
    """HOLDS (and held before): runs ended by their main program, by a background job releasing the output,
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


async def test_a_run_whose_member_dies_slowly_is_over_only_when_it_is_gone() -> None:
    """HOLDS (and held before): the run's traced member holds 300 MiB when the run ends; the run returns only
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


# -- 3. the ssh transport: remote runs are separate runs of the same sandbox -----------------------------


@pytest.mark.needs("pids-cgroup")
async def test_ssh_a_delivery_after_one_with_refused_remote_forks_is_clean() -> None:
    """HOLDS (and held before): one sandbox (a serve session), two ssh deliveries in a row. The first's remote
    run is refused forks (recorded ``processes``); the second, an innocent command, starts while the first's
    run groups (local and remote) are being removed and must record no limit."""
    ssh = get("ssh")
    remote_forks = REFUSE.replace("200 << 20", "1 << 20").replace('"', '\\"')
    with Sandbox.create(TASK, Limits(processes=32, timeout_s=15)) as box:
        first = await ssh.deliver(f'true"; ssh qb-remote "{remote_forks}"; echo "end', box)
        second = await ssh.deliver("echo hello", box)
    assert first.execution is not None and first.execution.limit_hit == "processes", first
    assert second.execution is not None and second.execution.stdout.text == "hello\n", second
    assert second.execution.limit_hit is None, second.execution


# -- 4. the smaller changes ------------------------------------------------------------------------------


def test_the_host_layout_binds_cannot_be_poisoned_by_a_caller() -> None:
    """HOLDS: system_binds() is read once per process; each caller gets its own copy, so a launcher that
    extends its list does not change the next one's."""
    from transports.sandbox.isolation import system_binds

    first = system_binds()
    first += ["--bind", "/", "/"]
    assert "--bind" not in system_binds() or system_binds().count("--bind") == 0


async def test_a_program_only_transport_with_a_missing_program_is_a_harness_error(monkeypatch) -> None:
    """HOLDS: the inline check (no thread hop) still turns a missing program into a harness error, nothing
    run: the final shell looked up in an empty search path."""
    from transports import needs
    from transports.execute import deliver

    t = get("raw")
    monkeypatch.setattr(needs, "SEARCH_PATH", "/nonexistent-qb-review")
    with Sandbox.create(TASK, Limits(timeout_s=5)) as box:
        d = await deliver(t, "echo hi", box)
    assert d.execution is None and d.harness_error is not None and "not found" in d.harness_error, d


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


@pytest.mark.needs("pids-cgroup")
async def test_an_untraced_pid_hopper_does_not_outlive_a_run_without_namespaces() -> None:
    """Without bwrap (``isolation: none``, ``--allow-no-isolation``) nothing but the run's cgroup holds an
    untraced child (clone with CLONE_UNTRACED). A child that forks and exits in a loop is gone from
    ``cgroup.procs`` by the time its pid is killed: each kill pass (one read of cgroup.procs, one SIGKILL
    each) misses the next generation. The end of the run must leave nothing of it running.
    HOLDS (and held before, when the loop's finally killed the group a second time): one pass (watch()'s)
    plus the removal's is enough here; the kernel fails a fork whose parent has a fatal signal pending."""
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
