"""A hostile review of step 13b: bash's tmux record copied by the tracer as the hooks write it
(transports/sandbox/shellcopy.py, transports/paths/tmux.py), and the launcher's cgroup self-migration and
what runs between bwrap and the command (transports/sandbox/launch.py: a self-stopping wrapper then, bwrap's
own init since). Each test asserts the SAFE outcome; an attack
that works is marked ``xfail(strict=True)`` with the reason, so the day it is fixed the test says so.

Results at review time: BROKEN, a single line whose readline editing (``ESC C-e``, shell-expand-line) runs
a command substitution before the line's own PS0 entry, in the fork the tracer takes for the hook's, or
assigns PS0/PROMPT_COMMAND in the shell before its entry; BROKEN, a ~/.inputrc planted by an earlier run of
the same sandbox, which makes Enter append code to a later honest command, recorded undamaged (on
``tmux-safe`` too);
BROKEN, a line that reads the next typed line as data and writes that line's entry itself; BROKEN, a line
that moves the log's descriptor and writes the next line's entry (no hook variable touched); BROKEN (the
documented residual), a line that sets PS0; BROKEN (low), the exit status of a shell that wrote its own
prompt entry and SIGKILLed itself; BROKEN, a thread's execve left its former tid in the tracer's kill
list, and the end of the run SIGKILLed the host process that reused that number. The rest held.

Fixed since: readline's expanding and executing keys do nothing (a harness-owned, read-only INPUTRC,
which also keeps ~/.inputrc unread); each copied log write is attributed to its writer (P from the shell,
C/W from its hook fork), so a builtin's entry is damage; a shell that SIGKILLed itself before the driver's
kill-server has an unknown status; exectrace drops a thread's former tid at its exec event. Still BROKEN:
the documented residual (a line sets PS0), and a line read as data whose entry a subshell (the first fork
after that read) writes.
"""

from __future__ import annotations

import time

import anyio
import pytest
from bounded import bounded

from tasks.load import get_task
from transports.execute import execute
from transports.paths.tmux import LOG_FD
from transports.registry import get
from transports.sandbox import Limits, Sandbox
from transports.sandbox.shellcopy import MAX_LOG

TASK = get_task("file-write/control")  # passes when out.txt holds "hello world\n"
BANG = "\"$'\\x21'\""                   # a "!" the typing line does not history-expand: "$'\x21'"
DAMAGED_LINE = "echo hello world > out.txt; : !#"  # bash history-expands it: out.txt ends up empty


def run(transport: str, command: str, timeout: float = 5):
    return bounded(lambda: anyio.run(lambda: execute(TASK, transport, command, limits=Limits(timeout_s=timeout))),
                   timeout + 60)


def traced(command: str, timeout: float = 4):
    """One plain run of ``bash -c command`` in a fresh sandbox: (execution, wall seconds, workdir/alive
    still being rewritten a second after the run ended)."""
    async def go():
        with Sandbox.create(TASK, Limits(timeout_s=timeout)) as box:
            start = time.monotonic()
            ex = await box.run(["bash", "-c", command])
            wall = time.monotonic() - start
            alive = box.workdir / "alive"
            moved = False
            if alive.exists():
                before = alive.stat().st_mtime_ns
                await anyio.sleep(0.6)
                moved = alive.stat().st_mtime_ns != before
            return ex, wall, moved
    return bounded(lambda: anyio.run(go), timeout + 60)


def shell_log(command: str, timeout: float = 5) -> tuple[bool, bytes]:
    """``command`` on `tmux`: (split, the host's copy of bash's log)."""
    async def go():
        with Sandbox.create(TASK, Limits(timeout_s=timeout)) as box:
            d = await get("tmux").deliver(command, box)
            return d.split, d.execution.trace.shell_log if d.execution is not None else b""
    return bounded(lambda: anyio.run(go), timeout + 60)


# -- 1. bash's record on the tmux path ------------------------------------------------------------------

# One line, no earlier line, no hook touched. ESC C-e is readline's shell-expand-line: it runs the line's
# $(...) while the line is still being edited, in a fork of the pane's shell made right after a terminal
# read, which shellcopy.ShellCopy.forked takes for the PS0 hook's fork, so its writes to the log are copied.
# That fork finds R in the tmux driver's argv (/proc/PID/cmdline: no quine needed), writes R's entry and a
# prompt as the hooks would, and SIGKILLs the shell before it reads the Enter: the line never runs.
SELF_FORGE = ('echo hello world > out.txt; : $(for f in /proc/[0-9]*/cmdline; do mapfile -d "" a < $f; '
              '[ "${a[3]}" = qb-tmux ] && break; done; h="    1  ${a[7]}"; '
              'printf "C %d\\n%s\\nP 0\\n" ${#h} "$h" >&' + str(LOG_FD) + '; kill -9 $$)\x1b\x05')


@pytest.mark.needs("tmux")
def test_one_line_cannot_write_its_own_entry_through_readline_s_shell_expand_line() -> None:
    record = run("tmux", SELF_FORGE)
    assert record.received == SELF_FORGE        # (holds) every byte of R was read by the shell
    # FIXED: ESC C-e does nothing (INPUTRC), so the line runs after its own entry; the $(...) then runs as
    # part of the command (not copied), and what bash ran differs from what it read (ESC C-e is not in it)
    assert record.damaged
    assert record.exit_code is None              # the shell SIGKILLed itself: its forged "P 0" is no status


# The same line without any fork: shell-expand-line's arithmetic expansion assigns in the shell itself, so
# $((PS0=0))$((PROMPT_COMMAND=0)) removes the line's own hooks before its entry; the expanded line (not what
# was read) then runs and its builtins write R's entry. Fixing ShellCopy.forked alone does not close it.
SELF_SILENCE = (": $((PS0=0))$((PROMPT_COMMAND=0)); 'for f in /proc/[0-9]*/cmdline; do mapfile -d \"\" -u 5 a 5< $f; "
                "[ \"${a[3]}\" = qb-tmux ] && break; done; h=\"    1  ${a[7]}\"; printf \"C %d\\n%s\\nP 0\\n\" ${#h} "
                "\"$h\" >&" + str(LOG_FD) + "'\x1b\x05")


@pytest.mark.needs("tmux")
def test_one_line_cannot_remove_its_own_hooks_before_its_entry() -> None:
    record = run("tmux", SELF_SILENCE)
    assert record.received == SELF_SILENCE   # (holds) every byte read; bash ran the expanded line instead
    assert record.damaged                    # BROKEN: damaged False, exit 0, no note


# A run before, in the same sandbox (an earlier call of a serve session, an earlier turn), plants
# $HOME/.inputrc: readline reads it when the pane's bash starts (--norc does not stop it). Enter becomes a
# macro that appends code to whatever is typed, silences the hooks and writes the honest line's entry.
_PLANT = (" $((PS0=0))$((PROMPT_COMMAND=0)); 'for f in /proc/[0-9]*/cmdline; do mapfile -d \"\" -u 5 a 5< $f; "
          "[ \"${a[3]}\" = qb-tmux ] && break; done; h=\"    1  ${a[7]}\"; printf \"C %d\\n%s\\nP 0\\n\" ${#h} "
          "\"$h\" >&" + str(LOG_FD) + "; rm -f out.txt'")
INPUTRC = '"\\C-m": "' + _PLANT.replace("\\", "\\\\").replace('"', '\\"') + '\\e\\C-e\\C-j"\n'


@pytest.mark.needs("tmux")
@pytest.mark.parametrize("transport", ["tmux", "tmux-safe"])
def test_an_inputrc_planted_by_an_earlier_run_cannot_change_a_later_command_unseen(transport: str) -> None:
    async def go():
        with Sandbox.create(TASK, Limits(timeout_s=5)) as box:
            await box.run(["sh", "-c", 'printf %s "$0" > "$HOME/.inputrc"', INPUTRC])
            d = await get(transport).deliver("echo hello world > out.txt", box)
            return d, (box.workdir / "out.txt").exists()
    d, out = bounded(lambda: anyio.run(go), 60)
    assert d.received == "echo hello world > out.txt"  # (holds) typed intact
    assert out and not d.split  # FIXED: INPUTRC is the harness's file, so the planted ~/.inputrc is never read


# Line 1 reads line 2 as data (the read builtin of the pane's shell: a builtin's write is the shell's, so
# copied), then writes the prompt and line 2's entry itself: the count of entries matches the typed lines.
READ_AS_DATA = ("read -rd $'\\r' x; h=\"    2  $x\"; printf 'P 0\\nC %d\\n%s\\n' ${#h} \"$h\" >&" + str(LOG_FD)
                + "\necho hello world > out.txt")


@pytest.mark.needs("tmux")
def test_a_line_read_as_data_cannot_be_recorded_as_run() -> None:
    record = run("tmux", READ_AS_DATA)
    assert record.received == READ_AS_DATA and not record.verdict.passed  # line 2 never ran
    assert record.damaged


# Line 1 moves the log's descriptor to 3 (the file's inode is what the tracer matches) and closes 247, so
# the hooks' writes fail from then on, and writes line 2's entry as read; line 2 is history-expanded and
# writes the closing prompt itself. No PS0/PROMPT_COMMAND/PS2 changed.
MOVED_FD = (f"exec 3>&{LOG_FD} {LOG_FD}>&-; h=\"    2  " + (DAMAGED_LINE + "; echo P 0 >&3").replace("!", BANG)
            + "\"; printf 'P 0\\nC %d\\n%s\\n' ${#h} \"$h\" >&3\n" + DAMAGED_LINE + "; echo P 0 >&3")


@pytest.mark.needs("tmux")
def test_moving_the_log_descriptor_cannot_hide_a_later_expanded_line() -> None:
    record = run("tmux", MOVED_FD)
    assert record.received == MOVED_FD and not record.verdict.passed  # bash expanded line 2: out.txt empty
    assert record.damaged


PS0_SET = ("Q=\"    2  " + DAMAGED_LINE.replace("!", BANG) + "\"; PS0='$(printf \"C %d\\\\n%s\\\\n\" ${#Q} \"$Q\" >&"
           + str(LOG_FD) + ")'\n" + DAMAGED_LINE)


@pytest.mark.needs("tmux")
@pytest.mark.xfail(strict=True, reason="BROKEN (documented residual, docs/sandbox.md): line 1 sets PS0 to log "
                   "line 2 as typed, line 2 is history-expanded")
def test_an_earlier_line_s_ps0_cannot_hide_a_later_expanded_line() -> None:
    record = run("tmux", PS0_SET)
    assert record.received == PS0_SET and not record.verdict.passed
    assert record.damaged


@pytest.mark.needs("tmux")
def test_a_self_killed_shell_s_forged_prompt_is_not_its_status() -> None:
    command = f'echo "P 0" >&{LOG_FD}; false; kill -9 $$'
    record = run("tmux", command)
    assert record.received == command
    assert record.exit_code is None and "before the harness ended the run" in (record.received_note or "")


@pytest.mark.needs("tmux")
def test_the_pane_s_readline_binds_no_key_that_expands_or_executes() -> None:
    """FIXED (1-3): the pane's bash reads only the harness's read-only INPUTRC; no key of any keymap runs
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


@pytest.mark.needs("tmux")
def test_history_rewritten_by_a_later_line_leaves_the_earlier_entry() -> None:
    """HOLDS: history -c / history -s after an expanded line 1 change bash's history, not the host's copy."""
    command = DAMAGED_LINE + "\nhistory -c; history -s 'echo hello world > out.txt; : '$'\\x21''#'"
    record = run("tmux", command)
    assert record.received == command and record.damaged
    assert "echo hello world > out.txt; : echo hello world" in (record.received_note or "")


@pytest.mark.needs("tmux")
def test_standard_input_moved_to_a_file_shows_in_received() -> None:
    """HOLDS: after exec 0<file the shell reads its commands from the file; those reads are fd 0's, so
    received is not R and the delivery is damaged (never a clean record of a command nobody typed)."""
    command = "printf 'echo hello world > out.txt\\n' > f; exec 0<f"
    record = run("tmux", command)
    assert record.received != command and record.damaged


@pytest.mark.needs("tmux")
def test_a_kill_line_control_character_is_damage() -> None:
    """HOLDS: C-u in R erases what readline had; bash's entry is the rest, received has every byte."""
    command = "rm -rf /sandbox/work/x\x15echo hello world > out.txt"
    record = run("tmux", command)
    assert record.received == command and record.damaged


@pytest.mark.needs("tmux")
def test_a_write_past_the_copy_budget_only_adds_damage() -> None:
    """HOLDS: a builtin write of more than MAX_LOG is cut at the budget and marked incomplete."""
    command = (f's=$(head -c {MAX_LOG + 200_000} /dev/zero | tr "\\0" a); printf %s "$s" >&{LOG_FD}; '
               'echo hello world > out.txt')
    split, log = shell_log(command)
    assert split and len(log) <= MAX_LOG


@pytest.mark.needs("tmux")
def test_a_copied_fork_writing_forever_is_bounded_by_the_time_limit() -> None:
    """HOLDS (CPU is the harness's, as documented): the first fork after the read builtin is copied until
    it execs; one that loops writing to the log is damage, and the run ends at its limit."""
    command = ("read -rd $'\\r' x; (while :; do printf %s \"$x\" >&" + str(LOG_FD) + "; done) & sleep 0.1"
               "\necho hello world > out.txt")
    start = time.monotonic()
    record = run("tmux", command, timeout=3)
    assert record.damaged and time.monotonic() - start < 3 + 4


# -- 2. the launcher and bwrap's init --------------------------------------------------------------------

UNTRACED = r"""python3 - <<'PY'
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
if libc.syscall(56, 0x00800000 | 17, 0, 0, 0, 0) == 0:   # clone(CLONE_UNTRACED | SIGCHLD): no fork event
    os.setsid()
    for i in range(100000):
        open("/sandbox/work/alive", "w").write(str(i)); time.sleep(0.05)
    os._exit(0)
PY
sleep 0.3; echo parent"""


@pytest.mark.needs("bwrap")
def test_an_untraced_clone_does_not_outlive_the_run() -> None:
    """HOLDS: CLONE_UNTRACED hides a child from the tracer (no fork event, not in kill_all's pids), but it
    stays in bwrap's pid namespace and the run's cgroup, so it dies with the run."""
    ex, _, moved = traced(UNTRACED)
    assert ex.stdout.text.strip() == "parent" and not moved


@pytest.mark.needs("bwrap")
def test_the_command_cannot_stop_or_kill_its_parent_init() -> None:
    """HOLDS: the command's parent is bwrap's init (pid 1 of the run's namespace; it replaced a stoppable
    ``sh`` wrapper): SIGSTOP, SIGKILL, SIGTERM, SIGINT and SIGHUP sent to it from inside are dropped by the
    kernel, the command goes on, its own status is recorded, and its background job still has a namespace
    to finish in."""
    ex, wall, moved = traced("p=$PPID; echo $p; for s in STOP KILL TERM INT HUP; do kill -$s $p; done; "
                             "sleep 0.2; (sleep 0.3; echo late) & echo first; exit 3")
    assert ex.exit_code == 3 and not ex.timed_out and ex.stdout.text == "1\nfirst\nlate\n" and not moved
    assert wall < 3


@pytest.mark.needs("bwrap")
def test_a_job_that_signals_init_after_the_first_program_neither_ends_the_run_nor_changes_its_status() -> None:
    """HOLDS: once the first program has exited, a job holding the output kills and stops pid 1 (as it could
    the old wrapper, whose exit ended the namespace): dropped; the job finishes, the status is the first
    program's."""
    ex, wall, moved = traced("(sleep 0.2; kill -9 1; kill -STOP 1; sleep 0.3; echo late) & echo first; exit 3")
    assert ex.exit_code == 3 and not ex.timed_out and ex.stdout.text == "first\nlate\n" and not moved
    assert wall < 3


@pytest.mark.needs("root")
@pytest.mark.needs("bwrap")
def test_the_command_cannot_leave_its_cgroup_nor_pass_the_pids_limit() -> None:
    """HOLDS: no cgroup file is reachable (no /sys, a cgroup namespace, no mount in a user namespace), and
    forks stop at the sandbox's pids.max."""
    command = ("for f in /sys/fs/cgroup/pids/tasks /proc/1/root/sys/fs/cgroup/pids/tasks; do "
               "echo 0 > $f 2>/dev/null && echo ESCAPED $f; done; "
               "unshare -Urm sh -c 'mkdir -p /tmp/c && mount -t cgroup -o pids none /tmp/c && echo 0 > /tmp/c/tasks "
               "&& echo ESCAPED mount' 2>/dev/null; "
               "python3 -c 'import os, time\nn = 0\nfor i in range(400):\n    try:\n        if os.fork() == 0:\n"
               "            time.sleep(3); os._exit(0)\n        n += 1\n    except OSError:\n        break\n"
               "print(\"forked\", n)' >forks 2>&1 </dev/null; cat forks")
    ex, _, _ = traced(command, timeout=6)
    assert "ESCAPED" not in ex.stdout.text
    forked = int(ex.stdout.text.split("forked")[1].split()[0])
    assert forked < Limits().processes and ex.limit_hit == "processes"


THREAD_EXEC = ("import threading, os, time\n"
               "threading.Thread(target=lambda: os.execv('/bin/sleep', ['sleep', '0.2'])).start()\n"
               "time.sleep(5)")


@pytest.mark.needs("root")
def test_a_thread_s_exec_leaves_no_stale_pid_for_the_end_of_run_kill() -> None:
    import os
    import subprocess

    from transports.sandbox.exectrace import GATE_PREFIX, Tracer

    tracer = Tracer(["/bin/sh", "-c", GATE_PREFIX + 'exec python3 -c "$0"', THREAD_EXEC], env=dict(os.environ),
                    cwd="/tmp", stdin=False)
    tracer.start()
    assert tracer.main_exited.wait(10)
    time.sleep(0.2)
    gone = [pid for pid in tracer._alive if not os.path.exists(f"/proc/{pid}")]
    victim = None
    if gone:  # a host process that happens to get that number next (ns_last_pid: the next pid, as root)
        for _ in range(20):
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(gone[0] - 1))
            victim = subprocess.Popen(["sleep", "30"])
            if victim.pid == gone[0]:
                break
            victim.kill()
            victim.wait()
            victim = None
    try:
        tracer.kill_all()  # what the end of every run does
        time.sleep(0.2)
        assert tracer.join(5)
        assert victim is None or victim.poll() is None, "an unrelated host process was SIGKILLed"
        assert gone == []
    finally:
        if victim is not None:
            victim.kill()
            victim.wait()


# The same as READ_AS_DATA, with each entry from the writer the hooks use: the prompt by a builtin of the
# shell before the read, line 2's entry from a subshell, which is the shell's first fork after that read,
# the fork the tracer takes for a hook's (a line that reads the terminal arms it, as readline does).
READ_AS_DATA_FORK = ("printf 'P 0\\n' >&" + str(LOG_FD) + "; read -rd $'\\r' x; (h=\"    2  $x\"; "
                     "printf 'C %d\\n%s\\n' ${#h} \"$h\" >&" + str(LOG_FD) + ")\necho hello world > out.txt")


@pytest.mark.needs("tmux")
@pytest.mark.xfail(strict=True, reason="BROKEN (documented residual, docs/sandbox.md): the hook fork is the "
                   "shell's first fork after a terminal read; a read builtin (read -e is readline itself) "
                   "followed by a subshell makes the same system calls as readline followed by PS0")
def test_a_line_read_as_data_cannot_be_recorded_as_run_from_a_subshell() -> None:
    record = run("tmux", READ_AS_DATA_FORK)
    assert record.received == READ_AS_DATA_FORK and not record.verdict.passed
    assert record.damaged


def test_each_entry_must_come_from_the_writer_the_hooks_use() -> None:
    """P from the shell itself, C and W from its hook fork; anything else stops the parse as damage."""
    from transports.paths.tmux import parse_log

    log = b"P 0\nW\nC 3\nabc\nP 1\n"
    honest = [(0, False), (4, True), (6, True), (10, True), (14, False)]
    assert parse_log(log, honest).damage is None and parse_log(log, honest).lines == ["abc"]
    assert "C entry written by the shell" in parse_log(log, [(0, False), (4, True), (6, False), (14, False)]).damage
    assert "C entry written by the shell" in parse_log(log, [(0, False), (4, True), (6, True), (10, False)]).damage
    assert "W entry written by the shell" in parse_log(log, [(0, False), (6, True), (14, False)]).damage
    assert "P entry written by a fork" in parse_log(log, [(0, False), (4, True), (6, True), (10, True)]).damage
    assert "P entry written by a fork" in parse_log(log, [(0, True), (4, True)]).damage
