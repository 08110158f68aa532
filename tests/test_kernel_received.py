"""Attacks on the record, written as the attacks: ``received`` comes from the kernel's exec trace, and
nothing in the sandbox runs as host root.

A shim, a channel or BASH_ENV inside the sandbox would be the command's to forge; the exec trace is out of
its reach, so each attack here ends as a damaged (or split) record, never a clean ``received == R``.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from bounded import bounded
from probes import traced

from tasks.load import get_task
from transports.execute import execute
from transports.sandbox import Limits, Sandbox, hostuid

TASK = get_task("file-write/control")
LIMITS = Limits(timeout_s=6)


def run(transport: str, command: str):
    return bounded(lambda: anyio.run(lambda: execute(TASK, transport, command, limits=LIMITS)), 60)


@pytest.mark.parametrize("transport", ["nested", "nested-single", "docker-sh", "nested@zsh", "nested@busybox"])
def test_a_renamed_copy_of_a_shell_is_not_the_final_shell(transport: str) -> None:
    """The paste runs the payload in the outer parse, then a renamed copy of a shell gets a program of the
    command's choosing: only the real shell's file is the boundary, and the early code makes it split."""
    closer = "'" if transport == "nested-single" else '"'
    command = f"x{closer}; echo hacked > out.txt; cp /bin/bash /tmp/sh2; exec /tmp/sh2 -c {closer}echo hello world"
    record = run(transport, command)
    assert record.damaged
    assert record.received != command


@pytest.mark.needs("bwrap")
def test_closing_a_descriptor_after_the_paste_does_not_hide_the_final_shell() -> None:
    """``9>&-`` after the paste closes no channel that received depends on: the final shell is still seen."""
    command = 'echo hello world > out.txt" 9>&- "'
    record = run("nested", command)
    assert record.received == "echo hello world > out.txt"
    assert record.damaged and record.verdict.passed


@pytest.mark.needs("make")
def test_make_with_its_shell_overridden_still_shows_the_shell_that_ran() -> None:
    """An appended ``override SHELL := /bin/dash``: received is what dash ran, never null or "make ran no shell"."""
    command = "echo hello world > out.txt\noverride SHELL := /bin/dash"
    record = run("make", command)
    assert record.received == "echo hello world > out.txt"
    assert record.damaged


@pytest.mark.needs("make")
def test_make_with_a_renamed_shell_cannot_forge_received() -> None:
    """A copy of dash made at parse time and set as SHELL: the recipe's shell is not dash's file."""
    command = "echo hacked > out.txt\nX := $(shell cp /bin/dash /tmp/sh2)\noverride SHELL := /tmp/sh2"
    record = run("make", command)
    assert record.received != command and record.damaged


def test_a_preload_hidden_past_the_environment_cap_is_not_believed() -> None:
    """LD_PRELOAD behind more than 1 MiB of environment: the final shell's environment cannot be read
    whole, so the delivery is split, never a clean ``received == R``."""
    pad = "; ".join(f"export P{i}=$(head -c 120000 /dev/zero | tr '\\0' a)" for i in range(10))
    command = f'x"; {pad}; export LD_PRELOAD=/nonexistent.so; exec bash -c "echo ok > out.txt'
    record = run("nested", command)
    assert record.damaged
    assert "environment" in (record.received_note or "")


def test_the_outer_parse_that_exports_into_the_final_shell_is_split() -> None:
    record = run("nested", 'x"; export BASH_ENV=/dev/null; exec bash -c "echo ok > out.txt')
    assert record.damaged and "BASH_ENV" in (record.received_note or "")


def test_the_exec_trace_lists_the_programs_of_the_run() -> None:
    async def go():
        async with Sandbox.create(TASK, LIMITS) as box:
            return await box.run(["bash", "-c", "/bin/true; bash -c 'echo x'"])
    ex = bounded(lambda: anyio.run(go), 60)
    argvs = [e.argv for e in ex.trace.execs]
    assert argvs[0] == (b"bash", b"-c", b"/bin/true; bash -c 'echo x'")
    assert (b"/bin/true",) in argvs and (b"bash", b"-c", b"echo x") in argvs
    assert all(e.exe is not None for e in ex.trace.execs)


@pytest.mark.parametrize("transport, command", [
    ("nested", '$(exec bash -c "${BASH_EXECUTION_STRING:9:-1}" >/dev/null 2>&1)"; echo PAYLOAD; #'),
    ("ssh", '$(ssh qb-remote "${BASH_EXECUTION_STRING:15:-1}" >/dev/null 2>&1 </dev/null)"; echo PAYLOAD; #'),
])
def test_a_breakout_that_feeds_r_to_a_shell_of_its_own_is_still_damaged(transport: str, command: str) -> None:
    """A paste that breaks out of the quotes runs R through a shell of its own in the outer expansion
    (``${BASH_EXECUTION_STRING}``): that shell got R whole, but the route's final shell did not, so the record
    is damaged, with a note."""
    record = run(transport, command)
    assert "PAYLOAD" in record.stdout.text  # the outer shell ran the breakout
    assert record.damaged  # whatever a shell of R's own received, the command did not arrive as one program
    assert record.received_note


def quine(assignment: str, threshold: int = 70) -> str:
    """``${BASH_COMMAND:OFF:LEN}`` that expands to its own text inside the outer ``bash -c "..."`` (whose
    BASH_COMMAND is ``bash -c "R"``, R at offset 9), running ``assignment`` in the outer parse only (the
    outer BASH_COMMAND is longer than ``threshold``, the final shell's is not): no fork, received == R."""
    for length in range(10, 200):
        text = "${BASH_COMMAND:(${#BASH_COMMAND}>%d?%s:0)*0+9:%d}" % (threshold, assignment, length)
        if len(text) == length:
            return text
    raise AssertionError("no fixed point")


@pytest.mark.needs("bwrap")
def test_an_outer_expansion_that_reproduces_itself_cannot_set_shlvl_unseen() -> None:
    """The outer parse runs R's own arithmetic (SHLVL=41) without a fork and the final shell gets exactly R,
    yet nested prints 40 where raw prints 0: SHLVL is left out of the environment check, so the outer
    expansion's text is what marks the record damaged, naming SHLVL."""
    command = quine("SHLVL=41") + " ; printenv SHLVL"
    record = run("nested", command)
    assert record.received == command  # the quine holds: the text arrived intact
    assert record.stdout.text.strip() != run("raw", command).stdout.text.strip()  # ...and ran differently
    assert record.damaged
    assert "SHLVL" in (record.received_note or "")


@pytest.mark.needs("bwrap")
@pytest.mark.parametrize("assignment", ["OLDPWD=9", "PWD=7"])
def test_an_outer_expansion_cannot_set_the_directories_unseen(assignment: str) -> None:
    """The same self-reproducing expansion setting OLDPWD or PWD in the outer parse: received == R, damaged."""
    command = quine(assignment) + " ; printenv OLDPWD PWD"
    record = run("nested", command)
    assert record.received == command
    assert record.damaged


@pytest.mark.needs("bwrap")
def test_tracing_a_traced_process_is_refused_and_the_exec_still_recorded() -> None:
    """PTRACE_TRACEME (or an attach) from inside fails, one tracer per process, and the exec is still seen."""
    command = ("python3 -c 'import ctypes,os; l=ctypes.CDLL(None,use_errno=True); "
               "print(l.ptrace(0,0,0,0), ctypes.get_errno(), flush=True); os.execv(\"/bin/echo\", [\"echo\", \"ran\"])'")
    ex, _, _ = traced(command, timeout=6)
    assert ex.stdout.text.split()[:2] == ["-1", "1"]  # EPERM
    assert any(e.argv[:2] == (b"echo", b"ran") for e in ex.trace.execs)


# -- no host root inside ------------------------------------------------------------------------

@pytest.mark.needs("root")
def test_a_sysctl_write_from_inside_does_not_change_the_host() -> None:
    path = "/proc/sys/fs/lease-break-time"
    before = open(path).read()
    new = "46\n" if before != "46\n" else "47\n"
    record = run("raw", f"echo {new.strip()} > {path}; id -u; echo hello world > out.txt")
    assert open(path).read() == before
    assert record.stdout.text.strip() != "0"
    assert record.limits_applied["kernel"] in ("read-only", "host")


@pytest.mark.needs("root")
@pytest.mark.needs("bwrap")
def test_root_is_dropped_before_bwrap_and_the_record_says_so() -> None:
    record = run("raw", "id -u > out.txt; cat /proc/self/uid_map")
    if hostuid.user() == "dropped":
        assert record.limits_applied["user"] == "dropped"
        assert record.stdout.text.split()[0] == "65534"  # the uid inside is the dropped one, not 0
    else:  # the machine cannot drop root: the record and the refusal say so
        assert record.limits_applied["user"] == "root" and hostuid.problem()
    assert record.limits_applied["kernel"] == "read-only"


@pytest.mark.needs("root")
@pytest.mark.needs("bwrap")
def test_a_nested_user_namespace_cannot_write_host_sysctls_or_cgroups() -> None:
    """A user+mount+pid namespace of the command's own, with a fresh /proc and sysfs, still cannot write
    kernel.core_pattern, nor reach a cgroup file."""
    before = Path("/proc/sys/kernel/core_pattern").read_text()
    command = ("unshare -Urnmpf --mount-proc sh -c 'echo \"|/bin/qbx %p\" > /proc/sys/kernel/core_pattern; "
               "mount -t sysfs s /sys && for f in /sys/fs/cgroup/*/cgroup.procs /sys/kernel/uevent_helper; do "
               "echo 1 > $f && echo WROTE $f; done; mount -t cgroup2 c /mnt && echo 1 > /mnt/cgroup.procs "
               "&& echo WROTE cg2'; echo done")
    ex, _, _ = traced(command, timeout=6)
    assert "WROTE" not in ex.stdout.text
    assert Path("/proc/sys/kernel/core_pattern").read_text() == before
