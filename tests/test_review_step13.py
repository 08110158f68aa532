"""A hostile review of step 13 (received from the kernel's exec trace, no host root inside), written as
the attacks. Each test asserts the SAFE behaviour: it fails where the attack works.

Results at review time (see the commit messages): the SHLVL quine, the 3 GiB trace, make_dir through a
planted link and the qb-binds link sweep were broken and are fixed on this branch; the tmux record forgery
was fixed later (the tracer copies bash's log as the hooks write it; see tests/test_tmux_log.py); the
holder-scan cost is broken and not fixed here; the rest held.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

import anyio
import pytest

from tasks.load import get_task
from transports.sandbox import leftovers as leftovers_mod
from transports.execute import execute
from transports.sandbox import Limits, Sandbox

from bounded import bounded

TASK = get_task("file-write/control")


def run(transport: str, command: str, timeout: float = 6):
    return bounded(lambda: anyio.run(lambda: execute(TASK, transport, command, limits=Limits(timeout_s=timeout))),
                   timeout + 60)


def traced(command: str, timeout: float = 6):
    """One plain run of ``bash -c command`` in a fresh sandbox: (execution, wall seconds)."""
    async def go():
        with Sandbox.create(TASK, Limits(timeout_s=timeout)) as box:
            start = time.monotonic()
            ex = await box.run(["bash", "-c", command])
            return ex, time.monotonic() - start
    return bounded(lambda: anyio.run(go), timeout + 60)


def quine(assignment: str, threshold: int = 70) -> str:
    """``${BASH_COMMAND:OFF:LEN}`` that expands to its own text inside the outer ``bash -c "..."`` (whose
    BASH_COMMAND is ``bash -c "R"``, R at offset 9), running ``assignment`` in the outer parse only (the
    outer BASH_COMMAND is longer than ``threshold``, the final shell's is not): no fork, received == R."""
    for length in range(10, 200):
        text = "${BASH_COMMAND:(${#BASH_COMMAND}>%d?%s:0)*0+9:%d}" % (threshold, assignment, length)
        if len(text) == length:
            return text
    raise AssertionError("no fixed point")


# -- 1. the record --------------------------------------------------------------------------------------


@pytest.mark.needs("bwrap")
def test_an_outer_expansion_that_reproduces_itself_cannot_set_shlvl_unseen() -> None:
    """BROKEN, fixed: the outer parse ran R's own arithmetic (SHLVL=41) without a fork, the final shell got
    exactly R, and SHLVL is left out of the environment check: nested printed 40 where raw prints 0, with
    received == R and damaged false."""
    command = quine("SHLVL=41") + " ; printenv SHLVL"
    record = run("nested", command)
    assert record.received == command  # the quine holds: the text arrived intact
    assert record.stdout.text.strip() != run("raw", command).stdout.text.strip()  # ...and ran differently
    assert record.damaged
    assert "SHLVL" in (record.received_note or "")


@pytest.mark.needs("bwrap")
@pytest.mark.parametrize("assignment", ["OLDPWD=9", "PWD=7"])
def test_an_outer_expansion_cannot_set_the_directories_unseen(assignment: str) -> None:
    command = quine(assignment) + " ; printenv OLDPWD PWD"
    record = run("nested", command)
    assert record.received == command
    assert record.damaged


@pytest.mark.needs("tmux")
def test_a_later_line_cannot_rewrite_bash_s_record_of_an_earlier_line() -> None:
    """BROKEN, fixed: bash history-expands line 1 (``!#``) and runs something else; line 2 found the
    record file through ``$PS0`` and rewrote it whole, so bash's record equalled what was read: received ==
    R, damaged false. Now the host copies each hook's write as it happens (line 1's entry before line 1
    runs) and reads no file back."""
    line1 = "echo hello world > out.txt; : !#"
    line2 = ("E=${PS0##*>>}; E=${E%)}; L1='" + line1 + "'; L2=$(HISTTIMEFORMAT= history 1); L2=${L2#*[0-9]  }; "
             "printf 'P 0\\nC %d\\n%s\\nP 0\\nC %d\\n%s\\n' ${#L1} \"$L1\" ${#L2} \"$L2\" > \"$E\"")
    command = line1 + "\n" + line2
    record = run("tmux", command, timeout=8)
    assert "echo hello world > out.txt; : echo hello world" in record.stdout.text  # bash did expand line 1
    assert record.damaged


@pytest.mark.needs("bwrap")
def test_an_exec_flood_after_the_boundary_keeps_the_final_shell() -> None:
    """HOLDS: 1200 execs after the boundary cannot push the final shell out of the trace."""
    command = "seq 1200 | xargs -n1 /bin/true; echo hello world > out.txt"
    record = run("nested", command, timeout=20)
    assert record.received == command and not record.damaged and record.verdict.passed
    assert "past the trace's cap" in (record.received_note or "")


@pytest.mark.needs("bwrap")
def test_tracing_a_traced_process_is_refused_and_the_exec_still_recorded() -> None:
    """HOLDS: PTRACE_TRACEME / an attach from inside fail (one tracer per process); the exec is seen."""
    command = ("python3 -c 'import ctypes,os; l=ctypes.CDLL(None,use_errno=True); "
               "print(l.ptrace(0,0,0,0), ctypes.get_errno(), flush=True); os.execv(\"/bin/echo\", [\"echo\", \"ran\"])'")
    ex, _ = traced(command)
    assert ex.stdout.text.split()[:2] == ["-1", "1"]  # EPERM
    assert any(e.argv[:2] == (b"echo", b"ran") for e in ex.trace.execs)


# -- 2. the host -----------------------------------------------------------------------------------------


@pytest.mark.needs("root")
@pytest.mark.needs("bwrap")
def test_a_nested_user_namespace_cannot_write_host_sysctls_or_cgroups() -> None:
    """HOLDS: a user+mount+pid namespace of the command's own, with a fresh /proc and sysfs, still cannot
    write kernel.core_pattern, nor reach a cgroup file."""
    before = Path("/proc/sys/kernel/core_pattern").read_text()
    command = ("unshare -Urnmpf --mount-proc sh -c 'echo \"|/bin/qbx %p\" > /proc/sys/kernel/core_pattern; "
               "mount -t sysfs s /sys && for f in /sys/fs/cgroup/*/cgroup.procs /sys/kernel/uevent_helper; do "
               "echo 1 > $f && echo WROTE $f; done; mount -t cgroup2 c /mnt && echo 1 > /mnt/cgroup.procs "
               "&& echo WROTE cg2'; echo done")
    ex, _ = traced(command)
    assert "WROTE" not in ex.stdout.text
    assert Path("/proc/sys/kernel/core_pattern").read_text() == before


@pytest.mark.needs("root")
@pytest.mark.needs("bwrap")
def test_make_dir_never_follows_a_planted_link_to_the_host() -> None:
    """BROKEN, fixed: a run replaces meta/ with a link to a host directory; the tmux route's make_dir (as
    root) then created its run directory there, owned by uid 65534 (and remove_tree later reached
    through the link too)."""
    target = Path(tempfile.mkdtemp(prefix="qb-review-target-"))

    async def go():
        with Sandbox.create(TASK, Limits(timeout_s=5)) as box:
            ex = await box.run(["sh", "-c", f"rm -rf /sandbox/meta && ln -s {target} /sandbox/meta && echo ok"])
            assert ex.stdout.text.strip() == "ok"
            with pytest.raises(OSError):
                box.make_dir(box.scratch("tmux"))
            from transports.paths.tmux import Tmux
            delivery = await Tmux().deliver("echo hello world > out.txt", box)
            return delivery
    try:
        delivery = bounded(lambda: anyio.run(go), 60)
        assert delivery.transport_error is not None
        assert os.listdir(target) == []
    finally:
        for name in os.listdir(target):
            p = target / name
            p.rmdir() if p.is_dir() else p.unlink()
        target.rmdir()


@pytest.mark.needs("root")
def test_the_leftover_sweep_never_unmounts_through_a_planted_link(monkeypatch: pytest.MonkeyPatch) -> None:
    """BROKEN, fixed: ``qb-binds-<dead pid>-x`` in the temp directory was swept without an owner or link
    check, so a link there made root lazily unmount every mount point in the directory it names."""
    base = Path(tempfile.mkdtemp(prefix="qb-review-sweep-"))
    victim = base / "victim"
    (victim / "m").mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "qb-review", str(victim / "m")], check=True)
    try:
        dead = subprocess.Popen(["true"])
        dead.wait()
        (base / f"qb-binds-{dead.pid}-x").symlink_to(victim)
        monkeypatch.setattr(tempfile, "tempdir", str(base))
        monkeypatch.setattr(leftovers_mod, "_swept", False)
        leftovers_mod.sweep_leftovers()
        assert os.path.ismount(victim / "m")
    finally:
        subprocess.run(["umount", "-l", str(victim / "m")], capture_output=True)
        (base / f"qb-binds-{dead.pid}-x").unlink(missing_ok=True)
        (victim / "m").rmdir()
        victim.rmdir()
        base.rmdir()


# -- 3. hangs and delays ---------------------------------------------------------------------------------


@pytest.mark.needs("bwrap")
def test_a_background_job_holding_the_output_forever_ends_at_the_time_limit() -> None:
    """HOLDS: the holder wait is bounded by the run's deadline."""
    ex, wall = traced("sleep 1000 & exit 0", timeout=2)
    assert ex.timed_out and wall < 2 + 1.5


@pytest.mark.needs("bwrap")
def test_stopped_processes_and_zombies_do_not_hold_the_tracer() -> None:
    """HOLDS: a stopped first program, a stopped child holding the output, an unreaped zombie under a
    stopped parent: all killed at the deadline, the tracer joins."""
    command = "(sleep 1000 & kill -STOP $!; (exit 3) & kill -STOP $BASHPID) & sleep 0.2; kill -STOP $$"
    ex, wall = traced(command, timeout=2)
    assert ex.timed_out and wall < 2 + 1.5


@pytest.mark.needs("bwrap")
def test_the_holder_scan_cannot_stretch_a_run_past_its_deadline() -> None:
    """FIXED: 240 processes with 1000 descriptors each and one holder of the output made every holder scan
    (readlink of every descriptor) take ~0.8 s of the harness's CPU, and the deadline was only checked
    between scans. Now the scan stops at the deadline, looks at the last holder first, and scans are spaced
    by twice their own cost."""
    setup = ("for i in $(seq 3 1020); do eval \"exec $i</dev/null\"; done; "
             "for i in $(seq 240); do sleep 30 >/dev/null 2>&1 & done; ")
    # the same processes without a holder of the output: what the tracer, the kill and the kernel's
    # teardown of 241 processes of 1018 descriptors cost on this machine at this moment (2.3 s wall and
    # 1.8 s of the harness's CPU on a quiet 2-core machine, several times that with the other core busy)
    cpu = time.process_time()
    free, free_wall = traced(setup + "sleep 30 >/dev/null 2>&1 & exit 0", timeout=20)
    free_cpu = time.process_time() - cpu
    assert not free.timed_out
    cpu = time.process_time()
    ex, wall = traced(setup + "sleep 30 & exit 0", timeout=8)
    held_cpu = time.process_time() - cpu
    assert ex.timed_out
    # scanning without a pause kept a harness core busy from the first program's exit (~2 s in) to the
    # deadline: ~6 s more CPU than the run without a holder; spaced scans that look at the last holder
    # first cost ~0.2 s. Both runs are measured side by side, so a loaded machine slows both: no
    # absolute time is asserted but a hang guard.
    assert held_cpu < free_cpu + 2, (held_cpu, free_cpu)
    assert wall < 8 + free_wall + 6, (wall, free_wall)


# -- 4. bounds -------------------------------------------------------------------------------------------


@pytest.mark.needs("bwrap")
def test_the_trace_keeps_a_bounded_number_of_bytes() -> None:
    """BROKEN, fixed: every exec of a shell kept up to 2 MiB of arguments and 1 MiB of environment, 1024
    times: 60 execs already held 164 MiB in the harness (3 GiB at the cap), outside the sandbox's memory
    cgroup."""
    command = ("ulimit -s unlimited 2>/dev/null || ulimit -s $(ulimit -H -s); a=$(head -c 120000 /dev/zero | tr '\\0' a); export E1=$a E2=$a E3=$a E4=$a E5=$a E6=$a E7=$a; "
               "set -- $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a; for i in $(seq 40); do bash -c : \"$@\"; done")
    ex, _ = traced(command, timeout=20)
    assert len(ex.trace.execs) >= 40
    kept = sum(sum(map(len, e.argv)) + sum(map(len, e.env or ())) for e in ex.trace.execs)
    assert kept <= 20 << 20


@pytest.mark.needs("bwrap")
def test_forks_and_input_stay_bounded_by_the_time_limit() -> None:
    """HOLDS (bounded by time only): a fork loop adds one small entry per fork, a few thousand a second."""
    ex, _ = traced("while :; do (:); done", timeout=3)
    assert ex.timed_out and len(ex.trace.forks) < 200_000
