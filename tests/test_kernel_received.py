"""Step 13's attacks on the record, written as the attacks: ``received`` comes from the kernel's exec
trace, and nothing in the sandbox runs as host root.

Each case made the record lie before (a shim, a channel and BASH_ENV inside the sandbox reported
``received``); now the command cannot reach what decides it.
"""

from __future__ import annotations

import anyio
import pytest

from tasks.load import get_task
from transports.sandbox import hostuid
from transports.execute import execute
from transports.sandbox import Limits, Sandbox

from bounded import bounded

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
def test_closing_a_descriptor_after_the_paste_no_longer_hides_the_final_shell() -> None:
    """``9>&-`` once silenced the received channel (received null, a passing verdict, no damage)."""
    command = 'echo hello world > out.txt" 9>&- "'
    record = run("nested", command)
    assert record.received == "echo hello world > out.txt"
    assert record.damaged and record.verdict.passed


@pytest.mark.needs("make")
def test_make_with_its_shell_overridden_still_shows_the_shell_that_ran() -> None:
    """An appended ``override SHELL := /bin/dash`` once gave received null and "make ran no shell"."""
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
