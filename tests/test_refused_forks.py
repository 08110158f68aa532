"""The refused-fork count is the run's own: a fork the kernel refuses (the pids limit) is recorded as
``limit_hit: "processes"`` on the run that made it, never on a run beside it or after it, and counting it is
never held up by the removal of a run's cgroup.

No assertion is on an absolute duration: the slow-removal test counts what completes during a removal it
makes slow itself, without load on the machine.
"""

from __future__ import annotations

import threading
import time

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


@pytest.mark.needs("pids-cgroup")
async def test_the_run_after_one_with_refused_forks_is_not_marked_processes() -> None:
    """Run 1's forks are refused; run 2 starts at once, while run 1's group is
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
    """Two runs of one sandbox at once (the ssh transport's remote runs, a reply's concurrent runs): the
    innocent run forks nothing, and its record says no limit, because a run reads its own run group's count
    (on cgroup v1 the kernel counts a refused fork in the forking task's group: ``cgroups.refused_in_run``),
    not the whole sandbox's before and after itself, which would take in the other run's refused forks."""
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
would stall its other threads, and a thread waiting for the death comes too late."""


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
def test_counting_refused_forks_is_not_held_up_by_a_slow_group_removal() -> None:
    """While a run group's removal retries its rmdir, counts of the sandbox keep completing (not one, after
    it: ``pid_limit_hits`` runs on the event loop twice a run, so the removal must not hold the count's lock
    through its retries), and each sees the refused forks exactly once, also once the group is left (its
    count given back)."""
    for _ in range(3):  # the late member may come after the rmdir already succeeded: then try again
        seen, before, meanwhile, took, joined = _slow_removal()
        if joined:
            break
    assert joined, "the late member never joined the group: nothing was tested"
    assert before > 0 and seen == {before}, (before, seen)
    # each count is a fraction of a millisecond of work and the removal retries for ~100 ms: held up by the
    # removal, the loop completes one count when the removal is over, not dozens while it runs
    assert meanwhile >= 10, f"only {meanwhile} counts completed during the rest of a {took * 1000:.1f} ms removal"


@pytest.mark.needs("pids-cgroup")
async def test_an_ssh_delivery_after_one_with_refused_remote_forks_records_no_limit() -> None:
    """One sandbox (a serve session), two ssh deliveries in a row. The first's remote
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
