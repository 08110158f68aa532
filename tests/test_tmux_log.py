"""bash's own log on the `tmux` path, attacked: the host copies each hook's write as it happens (a line's
entry before that line runs), so a line can append to the log, never change what it says of the lines
before; what the hooks never write is damage. And honest commands keep their received and damage.

The attacks reach for every writer of the log: a builtin of the pane's shell, the fork readline's editing
makes, a line that reads the next typed line as data, a moved descriptor, a planted ~/.inputrc, history
rewritten afterwards. Each test asserts the safe outcome; the two that still succeed (a line that sets PS0,
and a line read as data whose entry a subshell writes: documented residuals in docs/sandbox.md) are
``xfail(strict=True)``, so the day one is closed its test says so."""

from __future__ import annotations

import time

import anyio
import pytest
from bounded import bounded

from tasks.load import get_task
from transports.base import Delivery
from transports.execute import execute
from transports.paths.tmux import LOG_FD
from transports.registry import get
from transports.sandbox import Limits, Sandbox
from transports.sandbox.shellcopy import MAX_LOG

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


def run(transport: str, command: str, timeout: float = 5):
    """``command`` through ``execute`` on ``transport``: the record, a hang bounded."""
    return bounded(lambda: anyio.run(lambda: execute(TASK, transport, command, limits=Limits(timeout_s=timeout))),
                   timeout + 60)


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


def test_a_later_line_cannot_rewrite_bash_s_record_of_an_earlier_line() -> None:
    """bash history-expands line 1 (``!#``) and runs something else; line 2 finds the log file through
    ``$PS0`` and rewrites it whole, as if bash's record equalled what was read. The host copied line 1's
    entry before line 1 ran and reads no file back: the record is damaged."""
    line1 = "echo hello world > out.txt; : !#"
    line2 = ("E=${PS0##*>>}; E=${E%)}; L1='" + line1 + "'; L2=$(HISTTIMEFORMAT= history 1); L2=${L2#*[0-9]  }; "
             "printf 'P 0\\nC %d\\n%s\\nP 0\\nC %d\\n%s\\n' ${#L1} \"$L1\" ${#L2} \"$L2\" > \"$E\"")
    command = line1 + "\n" + line2
    record = run("tmux", command, timeout=8)
    assert "echo hello world > out.txt; : echo hello world" in record.stdout.text  # bash did expand line 1
    assert record.damaged


BANG = "\"$'\\x21'\""                   # a "!" the typing line does not history-expand: "$'\x21'"


# One line, no earlier line, no hook touched. ESC C-e is readline's shell-expand-line: it runs the line's
# $(...) while the line is still being edited, in a fork of the pane's shell made right after a terminal
# read, which shellcopy.ShellCopy.forked takes for the PS0 hook's fork, so its writes to the log are copied.
# That fork finds R in the tmux driver's argv (/proc/PID/cmdline: no quine needed), writes R's entry and a
# prompt as the hooks would, and SIGKILLs the shell before it reads the Enter: the line never runs.
SELF_FORGE = ('echo hello world > out.txt; : $(for f in /proc/[0-9]*/cmdline; do mapfile -d "" a < $f; '
              '[ "${a[3]}" = qb-tmux ] && break; done; h="    1  ${a[7]}"; '
              'printf "C %d\\n%s\\nP 0\\n" ${#h} "$h" >&' + str(LOG_FD) + '; kill -9 $$)\x1b\x05')


def test_one_line_cannot_write_its_own_entry_through_readline_s_shell_expand_line() -> None:
    record = run("tmux", SELF_FORGE)
    assert record.received == SELF_FORGE        # every byte of R was read by the shell
    # ESC C-e does nothing (the harness's INPUTRC), so the line runs after its own entry; the $(...) then runs
    # as part of the command (not copied), and what bash ran differs from what it read (ESC C-e is not in it)
    assert record.damaged
    assert record.exit_code is None              # the shell SIGKILLed itself: its forged "P 0" is no status


# The same line without any fork: shell-expand-line's arithmetic expansion assigns in the shell itself, so
# $((PS0=0))$((PROMPT_COMMAND=0)) removes the line's own hooks before its entry; the expanded line (not what
# was read) then runs and its builtins write R's entry (ShellCopy.forked alone cannot tell; readline's
# shell-expand-line is unbound in the harness's INPUTRC).
SELF_SILENCE = (": $((PS0=0))$((PROMPT_COMMAND=0)); 'for f in /proc/[0-9]*/cmdline; do mapfile -d \"\" -u 5 a 5< $f; "
                "[ \"${a[3]}\" = qb-tmux ] && break; done; h=\"    1  ${a[7]}\"; printf \"C %d\\n%s\\nP 0\\n\" ${#h} "
                "\"$h\" >&" + str(LOG_FD) + "'\x1b\x05")


def test_one_line_cannot_remove_its_own_hooks_before_its_entry() -> None:
    record = run("tmux", SELF_SILENCE)
    assert record.received == SELF_SILENCE   # every byte of R was read by the shell
    assert record.damaged


# A run before, in the same sandbox (an earlier call of a serve session, an earlier turn), plants
# $HOME/.inputrc: readline reads it when the pane's bash starts (--norc does not stop it). Enter becomes a
# macro that appends code to whatever is typed, silences the hooks and writes the honest line's entry.
_PLANT = (" $((PS0=0))$((PROMPT_COMMAND=0)); 'for f in /proc/[0-9]*/cmdline; do mapfile -d \"\" -u 5 a 5< $f; "
          "[ \"${a[3]}\" = qb-tmux ] && break; done; h=\"    1  ${a[7]}\"; printf \"C %d\\n%s\\nP 0\\n\" ${#h} "
          "\"$h\" >&" + str(LOG_FD) + "; rm -f out.txt'")


INPUTRC = '"\\C-m": "' + _PLANT.replace("\\", "\\\\").replace('"', '\\"') + '\\e\\C-e\\C-j"\n'


@pytest.mark.parametrize("transport", ["tmux", "tmux-safe"])
def test_an_inputrc_planted_by_an_earlier_run_cannot_change_a_later_command_unseen(transport: str) -> None:
    async def go():
        with Sandbox.create(TASK, Limits(timeout_s=5)) as box:
            await box.run(["sh", "-c", 'printf %s "$0" > "$HOME/.inputrc"', INPUTRC])
            d = await get(transport).deliver("echo hello world > out.txt", box)
            return d, (box.workdir / "out.txt").exists()
    d, out = bounded(lambda: anyio.run(go), 60)
    assert d.received == "echo hello world > out.txt"  # typed intact
    assert out and not d.split  # INPUTRC is the harness's file, so the planted ~/.inputrc is never read


def test_the_pane_s_readline_binds_no_key_that_expands_or_executes() -> None:
    """The pane's bash reads only the harness's read-only INPUTRC; no key of any keymap runs
    one of UNSAFE_READLINE, and a planted ~/.inputrc / ~/.terminfo is not read (the prompt still works)."""
    from transports.paths.tmux import UNSAFE_READLINE

    command = ("for m in emacs emacs-standard emacs-meta emacs-ctlx vi vi-command vi-move vi-insert; do "
               "bind -m $m -p; done > binds; echo $INPUTRC $TERMINFO > env; echo hello world > out.txt")
    async def go():
        with Sandbox.create(TASK, Limits(timeout_s=5)) as box:
            await box.run(["sh", "-c", 'mkdir -p "$HOME/.terminfo/t" && printf x > "$HOME/.terminfo/t/tmux-256color"'
                           ' && printf x > "$HOME/.terminfo/t/tmux" && printf x > "$HOME/.terminfo/s/screen"'])
            d = await get("tmux").deliver(command, box)
            return d, (box.workdir / "binds").read_text(), (box.workdir / "env").read_text()
    d, binds, env = bounded(lambda: anyio.run(go), 60)
    assert d.received == command and not d.split and d.execution.exit_code == 0
    bound = {line.split(": ", 1)[1] for line in binds.splitlines() if line.startswith('"')}
    assert "accept-line" in bound and not bound & set(UNSAFE_READLINE)
    assert env.split()[0].startswith("/run/qb-files/inputrc-") and env.split()[1] == "/lib/terminfo"


# Line 1 reads line 2 as data (the read builtin of the pane's shell: a builtin's write is the shell's, so
# copied), then writes the prompt and line 2's entry itself: the count of entries matches the typed lines.
READ_AS_DATA = ("read -rd $'\\r' x; h=\"    2  $x\"; printf 'P 0\\nC %d\\n%s\\n' ${#h} \"$h\" >&" + str(LOG_FD)
                + "\necho hello world > out.txt")


def test_a_line_read_as_data_cannot_be_recorded_as_run() -> None:
    record = run("tmux", READ_AS_DATA)
    assert record.received == READ_AS_DATA and not record.verdict.passed  # line 2 never ran
    assert record.damaged


# The same as READ_AS_DATA, with each entry from the writer the hooks use: the prompt by a builtin of the
# shell before the read, line 2's entry from a subshell, which is the shell's first fork after that read,
# the fork the tracer takes for a hook's (a line that reads the terminal arms it, as readline does).
READ_AS_DATA_FORK = ("printf 'P 0\\n' >&" + str(LOG_FD) + "; read -rd $'\\r' x; (h=\"    2  $x\"; "
                     "printf 'C %d\\n%s\\n' ${#h} \"$h\" >&" + str(LOG_FD) + ")\necho hello world > out.txt")


@pytest.mark.xfail(strict=True, reason="BROKEN (documented residual, docs/sandbox.md): the hook fork is the "
                   "shell's first fork after a terminal read; a read builtin (read -e is readline itself) "
                   "followed by a subshell makes the same system calls as readline followed by PS0")
def test_a_line_read_as_data_cannot_be_recorded_as_run_from_a_subshell() -> None:
    record = run("tmux", READ_AS_DATA_FORK)
    assert record.received == READ_AS_DATA_FORK and not record.verdict.passed
    assert record.damaged


# Line 1 moves the log's descriptor to 3 (the file's inode is what the tracer matches) and closes 247, so
# the hooks' writes fail from then on, and writes line 2's entry as read; line 2 is history-expanded and
# writes the closing prompt itself. No PS0/PROMPT_COMMAND/PS2 changed.
MOVED_FD = (f"exec 3>&{LOG_FD} {LOG_FD}>&-; h=\"    2  " + (EXPANDED + "; echo P 0 >&3").replace("!", BANG)
            + "\"; printf 'P 0\\nC %d\\n%s\\n' ${#h} \"$h\" >&3\n" + EXPANDED + "; echo P 0 >&3")


def test_moving_the_log_descriptor_cannot_hide_a_later_expanded_line() -> None:
    record = run("tmux", MOVED_FD)
    assert record.received == MOVED_FD and not record.verdict.passed  # bash expanded line 2: out.txt empty
    assert record.damaged


PS0_SET = ("Q=\"    2  " + EXPANDED.replace("!", BANG) + "\"; PS0='$(printf \"C %d\\\\n%s\\\\n\" ${#Q} \"$Q\" >&"
           + str(LOG_FD) + ")'\n" + EXPANDED)


@pytest.mark.xfail(strict=True, reason="BROKEN (documented residual, docs/sandbox.md): line 1 sets PS0 to log "
                   "line 2 as typed, line 2 is history-expanded")
def test_an_earlier_line_s_ps0_cannot_hide_a_later_expanded_line() -> None:
    record = run("tmux", PS0_SET)
    assert record.received == PS0_SET and not record.verdict.passed
    assert record.damaged


def test_a_self_killed_shell_s_forged_prompt_is_not_its_status() -> None:
    command = f'echo "P 0" >&{LOG_FD}; false; kill -9 $$'
    record = run("tmux", command)
    assert record.received == command
    assert record.exit_code is None and "before the harness ended the run" in (record.received_note or "")


def test_history_rewritten_by_a_later_line_leaves_the_earlier_entry() -> None:
    """history -c / history -s after an expanded line 1 change bash's history, not the host's copy."""
    command = EXPANDED + "\nhistory -c; history -s 'echo hello world > out.txt; : '$'\\x21''#'"
    record = run("tmux", command)
    assert record.received == command and record.damaged
    assert "echo hello world > out.txt; : echo hello world" in (record.received_note or "")


def test_standard_input_moved_to_a_file_shows_in_received() -> None:
    """After exec 0<file the shell reads its commands from the file; those reads are fd 0's, so
    received is not R and the delivery is damaged (never a clean record of a command nobody typed)."""
    command = "printf 'echo hello world > out.txt\\n' > f; exec 0<f"
    record = run("tmux", command)
    assert record.received != command and record.damaged


def test_a_kill_line_control_character_is_damage() -> None:
    """C-u in R erases what readline had; bash's entry is the rest, received has every byte."""
    command = "rm -rf /sandbox/work/x\x15echo hello world > out.txt"
    record = run("tmux", command)
    assert record.received == command and record.damaged


def test_a_write_past_the_copy_budget_only_adds_damage() -> None:
    """A builtin write of more than MAX_LOG is cut at the budget and marked incomplete."""
    command = (f's=$(head -c {MAX_LOG + 200_000} /dev/zero | tr "\\0" a); printf %s "$s" >&{LOG_FD}; '
               'echo hello world > out.txt')
    d, log, _ = deliver(command)
    assert d.split and len(log) <= MAX_LOG


def test_a_copied_fork_writing_forever_is_bounded_by_the_time_limit() -> None:
    """The first fork after the read builtin is copied until
    it execs; one that loops writing to the log is damage, and the run ends at its limit (the copying's CPU
    is the harness's, as documented)."""
    command = ("read -rd $'\\r' x; (while :; do printf %s \"$x\" >&" + str(LOG_FD) + "; done) & sleep 0.1"
               "\necho hello world > out.txt")
    start = time.monotonic()
    record = run("tmux", command, timeout=3)
    assert record.damaged and time.monotonic() - start < 3 + 4
