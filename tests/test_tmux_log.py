"""bash's own log on the `tmux` path, attacked: the host copies each hook's write as it happens (a line's
entry before that line runs), so a line can append to the log, never change what it says of the lines
before; what the hooks never write is damage. And honest commands keep their received and damage."""

from __future__ import annotations

import anyio
import pytest

from tasks.load import get_task
from transports.base import Delivery
from transports.paths.tmux import LOG_FD
from transports.registry import get
from transports.sandbox import Limits, Sandbox

pytestmark = pytest.mark.needs("tmux")

TASK = get_task("file-write/control")
EXPANDED = "echo hello world > out.txt; : !#"   # line 1: bash history-expands it and runs something else
RAN = "echo hello world > out.txt; : echo hello world > out.txt; : "  # what bash made of it


def deliver(command: str, timeout: float = 5) -> tuple[Delivery, bytes, str | None]:
    """``command`` on `tmux` in a fresh sandbox: the delivery, the host's copy of bash's log, and out.txt."""
    async def go() -> tuple[Delivery, bytes, str | None]:
        with Sandbox.create(TASK, Limits(timeout_s=timeout)) as box:
            d = await get("tmux").deliver(command, box)
            out = box.workdir / "out.txt"
            trace = d.execution.trace if d.execution is not None else None
            return d, trace.shell_log if trace is not None else b"", out.read_text() if out.exists() else None
    return anyio.run(go)


def entry(text: str, n: int) -> bytes:
    h = f"{n:5d}  {text}".encode()
    return b"C %d\n%s\n" % (len(h), h)


def test_a_forged_log_written_to_the_descriptor_by_a_builtin_only_adds_damage() -> None:
    """Line 2 knows the mechanism: it prints, through a builtin of the pane's shell, a whole log in which
    line 1 ran as read. The host copies it, after line 1's real entry, which it already had."""
    forged = "P 0\\nC %d\\n%s\\nP 0\\n"
    command = EXPANDED + f"\nL='{EXPANDED}'; printf '{forged}' ${{#L}} \"$L\" >&{LOG_FD}"
    d, log, out = deliver(command)
    assert d.received == command and out == ""  # delivered intact; bash ran something else (": ... > out.txt")
    assert d.split
    assert log.startswith(b"P 0\n" + entry(RAN, 1))  # line 1's real entry, before anything of it ran
    assert "a C entry written by the shell itself" in (d.received_note or "")  # printf's, not PS0's fork


def test_a_later_line_truncating_the_log_file_cannot_unwrite_an_entry() -> None:
    command = EXPANDED + f"\n: > /proc/$$/fd/{LOG_FD}; : >&{LOG_FD}"
    d, log, _ = deliver(command)
    assert d.received == command and d.split
    assert repr(RAN)[1:-1] in (d.received_note or "") and log.startswith(b"P 0\n" + entry(RAN, 1))


def test_closing_the_descriptor_hides_nothing_of_later_lines() -> None:
    """Line 1 closes the log's descriptor: the hooks can no longer write, so line 2 (history-expanded) has
    no entry, and bash's record is shorter than what it read: damage, as for any missing entry."""
    command = f"exec {LOG_FD}>&-\necho !#"
    d, _, _ = deliver(command)
    assert d.received == command and d.split


def test_closing_the_descriptor_alone_leaves_the_status_unknown_not_the_line() -> None:
    """A single line that closes it ran as read (its entry was copied first); only its status is lost."""
    command = f"exec {LOG_FD}>&-; echo hello world > out.txt"
    d, log, out = deliver(command)
    assert d.received == command and not d.split and out == "hello world\n"
    assert log == b"P 0\n" + entry(command, 1)
    assert d.execution is not None and d.execution.exit_code is None
    assert "status is unknown" in (d.received_note or "")


@pytest.mark.parametrize("writer", [
    f"printf 'P 0\\nC 5\\nforge\\nP 0\\n' | cat >&{LOG_FD}",                       # another program, forked
    f"exec bash -c 'printf \"P 0\\nC 5\\nforge\\nP 0\\n\" >&{LOG_FD}'",            # the pane's shell replaced
])
def test_a_program_other_than_bash_writing_to_the_descriptor_is_not_copied(writer: str) -> None:
    """Only the pane's bash and its forks that are still bash are copied: an exec'd program's writes to the
    inherited descriptor (bash cannot mark it close-on-exec) reach the file, never the host's copy."""
    command = EXPANDED + "\n" + writer
    d, log, _ = deliver(command)
    assert b"C 5\nforge\n" not in log and log.startswith(b"P 0\n" + entry(RAN, 1))
    assert d.received == command and d.split


def test_a_shell_that_execs_another_program_has_that_program_s_status() -> None:
    """The shell's status comes from the kernel (the wait status of its pid), not from a hook."""
    d, _, _ = deliver("exec bash -c 'exit 5'")
    assert d.execution is not None and d.execution.exit_code == 5 and not d.split


@pytest.mark.parametrize("command", [
    "exec 9>lock; x=$(echo a); y=$( (echo b) ); echo $x$y > out.txt; (echo c >> out.txt) &\nwait",
    "for i in 1 2 3; do v=$(printf %s $i); echo -n $v >> out.txt; done; echo >> out.txt",
    "f() { echo \"$@\"; }\nf hello world > out.txt",
])
def test_honest_subshells_and_descriptors_leave_the_log_alone(command: str) -> None:
    """bash's forks are copied too (the hooks run in them); an honest command's own forks write elsewhere."""
    d, log, out = deliver(command)
    assert d.received == command and not d.split and d.received_note is None, d.received_note
    assert out is not None and d.execution is not None and d.execution.exit_code == 0
    assert log.count(b"\nC ") == command.count("\n") + 1
