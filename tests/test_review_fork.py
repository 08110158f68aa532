"""A fork attacked (a hostile review): a child forked while a thread of its parent holds a lock, or with a
sandbox its parent made, runs its own work and leaves its parent's alone; what it makes goes at its exit.

Each case is a lock or a piece of state a forked child copies from its parent: the ssh endpoint's and the
fixture facts' locks, held for seconds by a parent's thread; a launcher the parent started ahead; the
container tools' stand-ins."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BWRAP = pytest.mark.needs("bwrap")
ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, *, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT)})


@BWRAP
@pytest.mark.needs("openssh")
def test_a_child_forked_while_a_parents_thread_builds_the_ssh_endpoint_runs_its_own_ssh_record() -> None:
    """transports/ssh/endpoints.py ``_lock`` is held while a worker thread builds the endpoint (its master
    included: seconds); a child forked then gets its own lock and makes its own ssh record, never hanging."""
    done = _python("""
        import anyio, os, signal, sys, threading, time
        from tasks.load import get_task
        from transports.execute import execute
        from transports.ssh import endpoints
        task = get_task('file-write/control')
        anyio.run(execute, task, 'raw', 'true')
        t = threading.Thread(target=anyio.run, args=(execute, task, 'ssh', 'echo parent'))
        t.start()
        deadline = time.monotonic() + 30
        while not endpoints._lock.locked() and time.monotonic() < deadline:
            time.sleep(0.001)
        held = endpoints._lock.locked()
        child = os.fork()
        if child == 0:
            signal.alarm(45)  # the copied lock held: the child hangs, and this ends it with SIGALRM
            r = anyio.run(execute, task, 'ssh', 'echo child')
            os._exit(0 if r.stdout.text == 'child\\n' else 1)
        t.join()
        _, status = os.waitpid(child, 0)
        print('held', held, 'child', os.waitstatus_to_exitcode(status))
        """)
    assert done.returncode == 0 and done.stdout.split()[-1] == "0", (done.stdout, done.stderr[-3000:])


def test_a_child_forked_while_a_parents_thread_reads_fixture_facts_reads_its_own() -> None:
    """tasks/gitread.py ``_facts_lock`` is held while git reads a fixture's facts (subprocesses); a child
    forked then gets its own lock and checks its first git task, never hanging."""
    done = _python("""
        import os, signal, sys, threading, time
        from tasks.load import get_task
        from tasks import gitread
        spec = get_task('git-commit/control').fixture.git
        t = threading.Thread(target=gitread.fixture_facts, args=(spec,))
        t.start()
        while not gitread._facts_lock.locked() and t.is_alive():
            time.sleep(0.0005)
        child = os.fork()
        if child == 0:
            signal.alarm(20)
            gitread.fixture_facts(spec)
            os._exit(0)
        t.join()
        _, status = os.waitpid(child, 0)
        print('child', os.waitstatus_to_exitcode(status))
        """)
    assert done.returncode == 0 and done.stdout.split()[-1] == "0", (done.stdout, done.stderr[-3000:])


@BWRAP
def test_a_forked_child_never_takes_a_launcher_its_parent_started_ahead() -> None:
    """A Sandbox made (and its launcher started ahead) before a fork: the child's run starts a launcher of its
    own, and the parent's stays waiting for the parent's next run. Taken by the child, the child's command ran
    in the parent's launcher, traced by the parent, and the child waited for a tracer thread it does not have."""
    done = _python("""
        import anyio, os, signal
        from tasks.load import get_task
        from transports.sandbox import Sandbox
        box = Sandbox.create(get_task('file-write/control'))
        assert box.start_ahead()
        held = list(box.waiting)
        child = os.fork()
        if child == 0:
            signal.alarm(30)
            ex = anyio.run(lambda: box.run(['/bin/sh', '-c', 'echo child']))
            os._exit(0 if ex.stdout.text == 'child\\n' and not held[0].used else 1)
        _, status = os.waitpid(child, 0)
        ex = anyio.run(lambda: box.run(['/bin/sh', '-c', 'echo parent']))
        print('child', os.waitstatus_to_exitcode(status), 'parent', ex.stdout.text.strip(), 'took-its-own', held[0].used)
        box.close()
        """)
    assert done.returncode == 0 and done.stdout.split()[-6:] == ["child", "0", "parent", "parent", "took-its-own",
                                                                "True"], (done.stdout, done.stderr[-3000:])


@BWRAP
def test_a_forked_childs_container_tool_stand_ins_are_removed_at_its_exit() -> None:
    """transports/template.py binds the stand-ins' exit handler to the process that registered it: a forked
    child that makes its own (``qb-shim-<childpid>-*``) registers its own, and removes them at its exit."""
    done = _python("""
        import anyio, glob, os, sys
        from tasks.load import get_task
        from transports.execute import execute
        task, tr = get_task('file-write/control'), 'template:docker exec c sh -c {R}'
        anyio.run(execute, task, tr, 'true')
        child = os.fork()
        if child == 0:
            anyio.run(execute, task, tr, 'true')
            sys.exit(0)  # a normal exit: its exit handlers run
        os.waitpid(child, 0)
        left = [d for d in glob.glob('/tmp/qb-shim-*') if f'-{child}-' in d]
        for d in left:
            import shutil; shutil.rmtree(d, True)
        print('left', len(left))
        """)
    assert done.returncode == 0 and done.stdout.split()[-1] == "0", (done.stdout, done.stderr[-3000:])
