"""The launcher chain (transports/sandbox/launch.py, exectrace.py): a gate on the launcher's stdin (no
self-stop), exec events off at the seize, bwrap's init as the command's parent (pid 1 of its namespace, no
wrapper), setpriv quieted. Each test is a way the chain could break what the record says: a launcher stage
taken for the command, the gate's pipe or setpriv's locale leaking into the command, signals from inside
to pid 1, a harness that is a child subreaper."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from probes import run_each, traced

from transports.sandbox import Sandbox, hostuid, launch

BWRAP = pytest.mark.needs("bwrap")
ISOLATIONS = [pytest.param("bwrap", marks=BWRAP), "none"]


def runs(isolation: str, argv: list[str], n: int = 1, **kw):
    async def go():
        with Sandbox.create(None, None, isolation) as box:
            return [await box.run(argv, **kw) for _ in range(n)]
    return anyio.run(go)


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_the_first_program_traced_is_always_the_command_never_a_launcher_stage(isolation: str) -> None:
    """The tracer seizes the launcher as soon as its vfork returns, which can be before the launcher's own exec
    is reported; counted as a launcher stage, that event would make bwrap's exec the "command's first program"
    (23 of 60 runs). Exec events are off at the seize, so no run may show it."""
    for ex in runs(isolation, ["bash", "-c", "echo hi; exit 3"], n=40):
        assert [e.argv for e in ex.trace.execs] == [(b"bash", b"-c", b"echo hi; exit 3")]
        assert ex.exit_code == 3 and ex.stdout.text == "hi\n"


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_input_after_the_gate_line_reaches_the_command_whole(isolation: str) -> None:
    """The run's input shares the launcher's stdin with the gate's line: the launcher's ``read`` must take
    that line only, whatever the input starts with (the gate's own words, a dash, no newline, binary)."""
    data = b"-\n\nqb_gate\n" + bytes(range(256)) * 4096 + b"no newline at the end"
    [ex] = runs(isolation, ["bash", "-c", "sha256sum | cut -c1-64"], stdin=data)
    assert ex.stdout.text == hashlib.sha256(data).hexdigest() + "\n"


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_without_input_the_command_s_stdin_is_dev_null_not_the_gate_s_pipe(isolation: str) -> None:
    [ex] = runs(isolation, ["bash", "-c", "stat -L -c %F /dev/stdin; cat; echo end"])
    assert ex.stdout.text == "character special file\nend\n"


@pytest.mark.needs("bwrap")
def test_the_command_keeps_its_own_lc_all_when_setpriv_is_quieted() -> None:
    """setpriv runs with LC_ALL=C (its locale files cost 0.4 ms a run); bwrap sets the command's value back:
    the default one, and one the caller chose."""
    async def go():
        with Sandbox.create() as box:
            default = await box.run(["bash", "-c", "printf %s \"$LC_ALL\""])
            chosen = await box.run(["bash", "-c", "printf %s \"$LC_ALL\""], env={"LC_ALL": "POSIX"})
            return default.stdout.text, chosen.stdout.text
    assert anyio.run(go) == ("C.UTF-8", "POSIX")


def test_setpriv_is_given_names_that_map_back_to_the_dropped_uid() -> None:
    """A name setpriv finds in the system's files (a number no passwd file names is looked up through every
    NSS module first); never a name for another uid."""
    import grp
    import pwd

    argv = hostuid._setpriv_argv()
    user = argv[1].removeprefix("--reuid=")
    group = argv[2].removeprefix("--regid=")
    assert (user if user.isdigit() else str(pwd.getpwnam(user).pw_uid)) == str(hostuid.DROP_UID)
    assert (group if group.isdigit() else str(grp.getgrnam(group).gr_gid)) == str(hostuid.DROP_UID)


@pytest.mark.needs("bwrap")
def test_a_background_job_holding_the_output_outlives_the_first_program_in_bwrap_s_namespace() -> None:
    """bwrap's init keeps the pid namespace while a job holds the output (no --die-with-parent); the status
    is the first program's, and the job's own children are recorded as the command's."""
    [ex] = runs("bwrap", ["bash", "-c", "(sleep 0.3; echo late; exit 9) & echo first; exit 4"])
    assert ex.exit_code == 4 and ex.stdout.text == "first\nlate\n" and not ex.timed_out
    assert [e.argv[0] for e in ex.trace.execs] == [b"bash", b"sleep"]


@BWRAP
def test_kill_minus_one_and_pid_one_from_inside_leave_the_kernel_s_record() -> None:
    """A job SIGKILLs everything it can see (``kill -9 -1``) and pid 1: init is untouched, the first
    program dies of the job's signal and that is what is recorded (137), at once, no timeout."""
    [(ex, wall)] = run_each(["(sleep 0.2; kill -9 1; kill -9 -1) & sleep 3; echo never"])
    assert ex.exit_code == 137 and not ex.timed_out and ex.stdout.text == "" and wall < 2.5
    assert ex.trace.execs[0].argv[0] == b"bash"


@BWRAP
def test_the_command_cannot_stop_or_kill_its_parent_init() -> None:
    """The command's parent is bwrap's init (pid 1 of the run's namespace, not a stoppable ``sh`` wrapper):
    SIGSTOP, SIGKILL, SIGTERM, SIGINT and SIGHUP sent to it from inside are dropped by the
    kernel, the command goes on, its own status is recorded, and its background job still has a namespace
    to finish in."""
    ex, wall, moved = traced("p=$PPID; echo $p; for s in STOP KILL TERM INT HUP; do kill -$s $p; done; "
                             "sleep 0.2; (sleep 0.3; echo late) & echo first; exit 3")
    assert ex.exit_code == 3 and not ex.timed_out and ex.stdout.text == "1\nfirst\nlate\n" and not moved
    assert wall < 3


@BWRAP
def test_a_job_that_signals_init_after_the_first_program_neither_ends_the_run_nor_changes_its_status() -> None:
    """Once the first program has exited, a job holding the output kills and stops pid 1 (a wrapper's exit
    would end the namespace): the kernel drops both, the job finishes, the status is the first program's."""
    ex, wall, moved = traced("(sleep 0.2; kill -9 1; kill -STOP 1; sleep 0.3; echo late) & echo first; exit 3")
    assert ex.exit_code == 3 and not ex.timed_out and ex.stdout.text == "first\nlate\n" and not moved
    assert wall < 3


@BWRAP
def test_the_command_s_environment_is_the_same_with_and_without_setpriv_s_c_locale(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """bwrap's --setenv puts the command's LC_ALL back in place: the environment the command gets and
    the one recorded at its exec are byte-identical to a chain without LC_ALL=C (default, chosen, empty)."""
    def both(env):
        got = []
        for prefix in (launch.C_LOCALE, ""):
            monkeypatch.setattr(launch, "C_LOCALE", prefix)
            [(ex, _)] = run_each(["cat /proc/$$/environ"], env=env)
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
    [(ex, _)] = run_each(["tr '\\0' '\\n' </proc/1/environ | grep '^LC_ALL='"])
    assert ex.stdout.text in ("", "LC_ALL=C.UTF-8\n")


@BWRAP
def test_unread_input_neither_blocks_nor_changes_the_run() -> None:
    """4 MiB of input after the gate's line that the command never reads (bwrap's init holds the pipe
    too): the run ends with the command, its status and output as they were."""
    [(ex, wall)] = run_each(["echo ok; exit 7"], stdin=b"\\\n-\n" + b"x" * (4 << 20))
    assert ex.exit_code == 7 and ex.stdout.text == "ok\n" and not ex.timed_out and wall < 3


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
    """A subreaper harness (a container's pid 1) is left no bwrap init as a zombie: the runs' inits are never
    the harness's to wait on, and the two start-up probes (isolation.starts, hostuid's drop check), whose
    monitor only subprocess.run reaps, run their program as the namespace's init (--as-pid-1)."""
    done = subprocess.run([sys.executable, "-c", SUBREAPER], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert done.stdout.strip() == "0", done.stderr[-500:]
