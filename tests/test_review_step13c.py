"""A hostile review of the launcher chain cut for cost (step 13 follow-up, commit 53c15c8): bwrap's init as
pid 1 with no ``--die-with-parent`` and no wrapper, the stdin gate instead of a self-stop, exec events off at
the seize, the ``_unforked``/``_gone_early`` bookkeeping, no cgroup kill at the end of a bwrap run, setpriv
given names and ``LC_ALL=C``. Each test asserts the SAFE outcome; an attack that works is
``xfail(strict=True)`` with the reason.

Results at review time: HOLDS, ``kill -9 -1`` / ``kill -9 1`` from inside (the record is the kernel's);
HOLDS, an untraced (CLONE_UNTRACED) setsid double fork and a nested user+pid namespace outlive neither the
run's end nor a SIGKILLed harness (no cgroup kill needed); HOLDS, the kill list at the end of a run holds
only live processes of the run after a fork storm whose forkers are SIGKILLed mid-fork and after thread
execs; HOLDS, the command's environment is byte-identical with and without setpriv's ``LC_ALL=C``;
HOLDS, unread input of 4 MiB neither blocks nor changes the run; HOLDS, a hostile neighbour run (fork
storm, ``kill -9 -1``) leaves an innocent concurrent run's record intact. BROKEN (low, new): ``LC_ALL=C``
is visible to the command in ``/proc/1/environ`` (bwrap's init). BROKEN (pre-existing, carried into
``limits.which_limit``): ``limit_hit: file-size`` is forged by ``exit 153`` or by printing the words.
BROKEN (pre-existing, environment): a harness that is a child subreaper (a container's pid 1) collects
bwrap inits as zombies it never reaps. Fixed since: file-size from the kernel's SIGXFSZ report; the
zombies were the two start-up probes' inits (not one per run), which now run as pid 1 themselves. Kept as a documented residual: /proc/1/environ.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest
from bounded import bounded

from transports.sandbox import Limits, Sandbox, exectrace, launch

BWRAP = pytest.mark.needs("bwrap")
TOKEN = "qbr27tok"  # in the command line of every process an attack leaves running


def runs(commands: list[str], timeout: float = 5, **kw):
    """Each command as ``bash -c`` in one fresh sandbox: [(execution, wall seconds)]."""
    async def go():
        out = []
        with Sandbox.create(None, Limits(timeout_s=timeout)) as box:
            for c in commands:
                start = time.monotonic()
                ex = await box.run(["bash", "-c", c], **kw)
                out.append((ex, time.monotonic() - start))
        return out
    return bounded(lambda: anyio.run(go), timeout * len(commands) + 60)


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


# -- 1. signals from inside ------------------------------------------------------------------------------

@BWRAP
def test_kill_minus_one_and_pid_one_from_inside_leave_the_kernel_s_record() -> None:
    """HOLDS: a job SIGKILLs everything it can see (``kill -9 -1``) and pid 1: init is untouched, the first
    program dies of the job's signal and that is what is recorded (137), at once, no timeout."""
    [(ex, wall)] = runs(["(sleep 0.2; kill -9 1; kill -9 -1) & sleep 3; echo never"])
    assert ex.exit_code == 137 and not ex.timed_out and ex.stdout.text == "" and wall < 2.5
    assert ex.trace.execs[0].argv[0] == b"bash"


# -- 2. nothing outlives the run, now that a bwrap run's end skips the cgroup ----------------------------

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
    """HOLDS: no cgroup kill at a bwrap run's end; killing bwrap's init (zap_pid_ns_processes) still ends a
    CLONE_UNTRACED setsid double fork and a nested user+pid namespace's processes."""
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
    import anyio, os, signal, threading
    from transports.sandbox import Limits, Sandbox
    async def go():
        box = Sandbox.create(None, Limits(timeout_s=20))
        print(box.workdir, flush=True)
        threading.Timer(1.5, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
        await box.run(["bash", "-c", CMD])
    anyio.run(go)
    """)


@BWRAP
def test_a_harness_sigkilled_mid_run_takes_untraced_and_nested_processes_along() -> None:
    """HOLDS: no --die-with-parent any more; PTRACE_O_EXITKILL kills bwrap's init with the harness, and the
    namespace's end takes the untraced and nested-namespace processes (no sweep needed)."""
    cmd = UNTRACED.replace("FILE", "u") + NESTED + "\nsleep 30"
    code = f"CMD = {cmd!r}\n" + HARNESS_KILLED
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    workdir = Path(done.stdout.split()[0])
    time.sleep(0.5)
    before = [(workdir / n).read_text() if (workdir / n).exists() else None for n in "uv"]
    time.sleep(0.5)
    after = [(workdir / n).read_text() if (workdir / n).exists() else None for n in "uv"]
    assert None not in before and leftovers() == [] and before == after


# -- 3. the kill list: no dead pid in it, whatever the order of events -----------------------------------

STORM = textwrap.dedent(r"""
    python3 - <<'PY'
    import os, threading, time
    for r in range(40):                      # forkers SIGKILLed while stopped at fork events
        pid = os.fork()
        if pid == 0:
            def forker():
                while True:
                    try:
                        if os.fork() == 0:
                            os._exit(0)
                    except OSError:
                        pass
            for _ in range(3):
                threading.Thread(target=forker, daemon=True).start()
            time.sleep(0.01)
            os.kill(os.getpid(), 9)
        os.waitpid(pid, 0)
    for r in range(30):                      # a thread's execve: its former tid vanishes unreported
        pid = os.fork()
        if pid == 0:
            threading.Thread(target=lambda: os.execv("/bin/true", ["true"])).start()
            time.sleep(5)
        os.waitpid(pid, 0)
    PY
    setsid sleep 5 >/dev/null 2>&1 & echo done""")


@BWRAP
def test_the_end_of_run_kill_list_holds_only_live_processes_of_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """HOLDS: at kill_all every pid in the list is alive and in the run's pid namespace (or is the launcher):
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
    [(ex, _)] = runs([STORM], timeout=10)
    assert ex.stdout.text == "done\n" and not ex.timed_out
    assert bad == [] and seen and seen[0] >= 2  # init and the sleep were there to be killed


# -- 4. setpriv's LC_ALL=C ----------------------------------------------------------------------------------

@BWRAP
def test_the_command_s_environment_is_the_same_with_and_without_setpriv_s_c_locale(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """HOLDS: bwrap's --setenv puts the command's LC_ALL back in place: the environment the command gets and
    the one recorded at its exec are byte-identical to a chain without LC_ALL=C (default, chosen, empty)."""
    def both(env):
        got = []
        for prefix in (launch.C_LOCALE, ""):
            monkeypatch.setattr(launch, "C_LOCALE", prefix)
            [(ex, _)] = runs(["cat /proc/$$/environ"], env=env)
            got.append((ex.stdout.text, ex.trace.execs[0].env))
        return got
    for env in (None, {"LC_ALL": "POSIX", "X": "1"}, {"LC_ALL": ""}):
        a, b = both(env)
        assert a == b


@pytest.mark.needs("root")
@BWRAP
@pytest.mark.xfail(strict=True, reason="BROKEN (low), a documented residual (docs/sandbox.md): setpriv's "
                   "LC_ALL=C stays in bwrap's exec-time environment, and bwrap's init is pid 1 of the command's "
                   "namespace: /proc/1/environ shows LC_ALL=C where root was dropped (the command's own "
                   "environment is untouched: test_launch_chain)")
def test_setpriv_s_c_locale_is_not_visible_to_the_command() -> None:
    [(ex, _)] = runs(["tr '\\0' '\\n' </proc/1/environ | grep '^LC_ALL='"])
    assert ex.stdout.text in ("", "LC_ALL=C.UTF-8\n")


# -- 5. the gate and the run's input ----------------------------------------------------------------------

@BWRAP
def test_unread_input_neither_blocks_nor_changes_the_run() -> None:
    """HOLDS: 4 MiB of input after the gate's line that the command never reads (bwrap's init holds the pipe
    too): the run ends with the command, its status and output as they were."""
    [(ex, wall)] = runs(["echo ok; exit 7"], stdin=b"\\\n-\n" + b"x" * (4 << 20))
    assert ex.exit_code == 7 and ex.stdout.text == "ok\n" and not ex.timed_out and wall < 3


# -- 6. limit_hit ------------------------------------------------------------------------------------------

def test_limit_hit_file_size_cannot_be_forged() -> None:
    """BROKEN (pre-existing), fixed: file-size was read from the exit code (128+SIGXFSZ) and stderr's words,
    both the command's to choose; it is now the kernel's report of a process killed by SIGXFSZ."""
    got = runs(["exit 153", "echo 'File size limit exceeded' >&2"])
    assert [ex.limit_hit for ex, _ in got] == [None, None]


# -- 7. runs beside each other ----------------------------------------------------------------------------

@BWRAP
def test_a_hostile_neighbour_leaves_an_innocent_run_s_record_intact() -> None:
    """HOLDS: beside a run that storms forks (forkers SIGKILLed mid-fork) and SIGKILLs everything it sees,
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


# -- 8. a harness that is a child subreaper -----------------------------------------------------------------

SUBREAPER = textwrap.dedent("""
    import anyio, ctypes, os, time
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER, as a container's pid 1 is
    from transports.sandbox import Sandbox
    async def go():
        with Sandbox.create() as box:
            for _ in range(10):
                await box.run(["bash", "-c", "(sleep 0.1; echo late) & echo first"])
    anyio.run(go)
    time.sleep(0.5)
    me = str(os.getpid())
    kids = [p for p in os.listdir("/proc") if p.isdigit() and os.path.exists(f"/proc/{p}/stat")
            and open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1] == me]
    print(len(kids))
    """)


@BWRAP
def test_a_subreaper_harness_is_left_no_zombie_inits() -> None:
    """BROKEN (pre-existing; environment), fixed: a subreaper harness (a container's pid 1) was left two bwrap
    zombies. Measured since: not one per run (the runs' inits are never the harness's to wait on), but the
    inits of the two start-up probes (isolation.starts, hostuid's drop check), which subprocess.run reaps the
    monitor of only. The probes now run their program as the namespace's init (--as-pid-1)."""
    done = subprocess.run([sys.executable, "-c", SUBREAPER], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert done.stdout.strip() == "0", done.stderr[-500:]
