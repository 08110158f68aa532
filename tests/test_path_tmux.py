"""The `tmux` path with the real tmux: tmux's ; parse, readline, history expansion, PS2, the terminal as
stdin; received against a capture program in bash's place; nothing outlives the call; bash's log is the
host's copy, whatever becomes of its file; and `tmux-safe` keeps R intact where `tmux` breaks it."""

from __future__ import annotations

import random
import re
import os
import subprocess
from pathlib import Path
import time

import anyio
import pytest

from tasks.load import get_task
from transports.base import Delivery
from transports.paths.tmux import parse_log
from transports.registry import get
from transports.sandbox import Limits, Sandbox

LIMITS = Limits(timeout_s=4)
TASK = get_task("file-write/control")  # its fixture is an empty working directory


def deliver(transport: str, command: str, limits: Limits = LIMITS, files: tuple[str, ...] = ("out.txt",)
            ) -> tuple[Delivery, dict[str, str | None]]:
    """Run ``command`` on ``transport`` in a fresh sandbox; the delivery and the named files of ``work/`` after it."""
    async def go() -> tuple[Delivery, dict[str, str | None]]:
        with Sandbox.create(TASK, limits) as box:
            d = await get(transport).deliver(command, box)
            found = {f: (box.workdir / f).read_text() if (box.workdir / f).exists() else None for f in files}
            assert not [p.name for p in box.meta.iterdir()], "the run's directory was left behind"
            return d, found
    return anyio.run(go)


def tmux_processes(pattern: str = "tmux -S /sandbox/meta/tmux-") -> list[str]:
    """Processes matching ``pattern`` that this test process started (its descendants): tmux servers of other
    test processes running at the same time are not this test's leftovers. A leftover that escaped the tree
    is caught by the tests' own unique markers (``sleep 1013``), which match anywhere."""
    done = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if "pgrep" not in line]
    if pattern.startswith("tmux -S "):
        lines = [line for line in lines if _descends_from_me(int(line.split()[0]))]
    return lines


def _descends_from_me(pid: int) -> bool:
    me = os.getpid()
    for _ in range(64):
        if pid == me:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        if pid <= 1:
            return False
    return False


# -- tmux's own parse of the key arguments -------------------------------------------------------

def test_a_trailing_semicolon_ends_the_tmux_command_and_nothing_is_typed() -> None:
    d, files = deliver("tmux", "echo one > out.txt;")
    assert d.received is None and d.execution is not None
    assert d.execution.exit_code == 1 and d.execution.stderr.text == "unknown command: Enter\n"
    assert d.received_note == "tmux refused the send-keys command: nothing was typed"
    assert files["out.txt"] is None
    raw, raw_files = deliver("raw", "echo one > out.txt;")
    assert raw_files["out.txt"] == "one\n" and raw.execution and raw.execution.exit_code == 0


def test_an_escaped_trailing_semicolon_reaches_bash_unescaped() -> None:
    command = "echo hi > out.txt; find . -name out.txt -exec cat {} \\;"
    d, _ = deliver("tmux", command)
    assert d.received == command[:-2] + ";"  # bash then runs find without its ';': find fails
    assert d.execution is not None and d.execution.exit_code == 1
    assert "find: missing argument to `-exec'" in d.execution.stdout.text
    raw, _ = deliver("raw", command)
    assert raw.execution and raw.execution.exit_code == 0 and raw.execution.stdout.text == "hi\n"


@pytest.mark.parametrize("command, received, code, said", [
    ("Enter", "\r", 0, ""),          # a key name is that key: two Enter presses reach bash
    ("C-c", "", 130, ""),             # Ctrl-C at the prompt: nothing runs, $? is 130
    ("-n > out.txt", None, 1, "command send-keys: unknown flag -n\n"),  # a leading - is an option to tmux
])
def test_without_l_tmux_reads_key_names_and_options(command: str, received: str | None, code: int, said: str) -> None:
    d, _ = deliver("tmux", command)
    assert d.received == received and d.execution is not None
    assert d.execution.exit_code == code and d.execution.stderr.text == said


def test_a_command_longer_than_a_tmux_message_is_refused_by_tmux() -> None:
    command = "echo " + "x" * 20000 + " > out.txt"
    d, files = deliver("tmux", command)
    assert d.received is None and d.execution is not None and d.execution.stderr.text == "command too long\n"
    assert files["out.txt"] is None
    safe, safe_files = deliver("tmux-safe", command)
    assert safe.received == command and safe_files["out.txt"] == "x" * 20000 + "\n"


def _keystrokes(args: list[str], command: str) -> str:
    """What the real tmux types for ``send-keys -t qb ARGS``: a capture program in bash's place (a raw-mode
    terminal read up to the Enter key), run inside the sandbox like the path itself."""
    probe = r"""S=/tmp/probe; args=("${@:2}")
tmux -S $S -f /dev/null new-session -d -s qb sh -c 'stty raw -echo; tmux wait-for -S ready; exec cat > keys'
timeout 3 tmux -S $S wait-for ready
tmux -S $S send-keys -t qb "${args[@]}" "$1"; tmux -S $S send-keys -t qb Enter
for _ in $(seq 300); do case $(cat keys) in *$'\r') break;; esac; sleep 0.01; done
cat keys; tmux -S $S kill-server"""

    async def go() -> str:
        with Sandbox.create(TASK, LIMITS) as box:
            ex = await box.run(["bash", "-c", probe, "probe", command, *args])
            assert ex.stdout.text.endswith("\r"), ex.stdout.text
            return ex.stdout.text[:-1]
    return anyio.run(go)


@pytest.mark.parametrize("command", ["find . -name x -exec echo {} \\;", "echo 'a  b' \"c\" $HOME > out.txt",
                                     "printf '%s\\n' \"$(date)\" `id -u`"])
def test_received_is_what_tmux_typed_when_bash_adds_nothing(command: str) -> None:
    """No ``!``, tab or newline: bash's record equals the keys the real tmux typed, as a capture program read them."""
    typed = _keystrokes([], command)
    d, _ = deliver("tmux", command)
    assert d.received == typed


def test_send_keys_l_drops_a_trailing_semicolon_too() -> None:
    """tmux #1849: -l (literal) does not protect a trailing ';' (FACTS.md measured this on tmux 3.3a)."""
    assert _keystrokes(["-l"], "echo one;") == "echo one"
    assert _keystrokes(["-l"], "echo one\\;") == "echo one;"


# -- readline and the interactive bash --------------------------------------------------------------

def test_history_expansion_rewrites_a_later_line() -> None:
    command = "echo one two > a.txt\nprintf '%s\\n' \"!!\" > out.txt"
    d, files = deliver("tmux", command)
    assert d.received == command  # delivered intact; bash's own expansion changed it: damaged, with its record
    assert d.split
    assert '"echo one two > a.txt" > out.txt' in (d.received_note or "")  # what bash ran, from its own record
    assert files["out.txt"] == "echo one two > a.txt\n"
    safe, safe_files = deliver("tmux-safe", command)
    assert safe.received == command and safe_files["out.txt"] == "!!\n"


def test_a_failed_history_expansion_runs_nothing() -> None:
    command = 'echo "hello world" > out.txt; echo "!nothing-like-this"'
    d, files = deliver("tmux", command)
    assert d.received == command and d.split and files["out.txt"] is None  # delivered, then the line is dropped
    assert "event not found" in d.execution.stdout.text  # type: ignore[union-attr]


def test_a_tab_is_readline_completion_not_a_character() -> None:
    d, files = deliver("tmux", "printf 'a\\tb|\tc' > out.txt")
    assert d.received == "printf 'a\\tb|\tc' > out.txt" and files["out.txt"] == "a\tb|c"  # the tab arrived
    assert d.split and "printf 'a\\\\tb|c' > out.txt" in (d.received_note or "")  # readline completed it away
    safe, safe_files = deliver("tmux-safe", "printf 'a\\tb|\tc' > out.txt")
    assert safe_files["out.txt"] == "a\tb|\tc"


def test_a_multi_line_heredoc_goes_through_ps2() -> None:
    command = "cat > out.txt <<'EOF'\nline one\n\n$HOME `x` !! \\n\nEOF"
    d, files = deliver("tmux", command)
    assert d.received == command  # lithist: bash's entry keeps the lines; ! is not expanded in a here-doc body
    assert files["out.txt"] == "line one\n\n$HOME `x` !! \\n\n"
    assert d.execution is not None and d.execution.stdout.text.count("\n> ") == 4


def test_a_backslash_newline_is_recorded_joined_and_blank_lines_stay() -> None:
    command = "echo a \\\nb > out.txt\n\necho c >> out.txt\n"
    d, files = deliver("tmux", command)
    assert d.received == command  # every byte arrived; bash's own record joins the continuation
    assert d.split and "echo a b > out.txt" in (d.received_note or "")
    assert files["out.txt"] == "a b\nc\n"


def test_the_terminal_is_stdin_so_a_read_takes_the_next_typed_line() -> None:
    command = "IFS= read -r -n 11 x; printf %s \"$x\" > out.txt\nsecret line"
    d, files = deliver("tmux", command)
    assert files["out.txt"] == "secret line"
    assert d.received == command  # the pane's shell read all of it: the second line as read's data
    assert d.split  # bash's own record shows the second line never ran as a command
    safe, safe_files = deliver("tmux-safe", command)
    assert safe_files["out.txt"] == "" and safe.received == command  # stdin is /dev/null, as on raw


def test_an_incomplete_command_leaves_bash_at_ps2() -> None:
    d, _ = deliver("tmux", "echo 'unbalanced > out.txt")
    assert d.received == "echo 'unbalanced > out.txt" and d.split  # delivered; it never ran
    assert d.execution is not None and d.execution.exit_code is None
    assert not d.execution.timed_out
    assert d.received_note and "continuation prompt (PS2)" in d.received_note


@pytest.mark.parametrize("command, code", [("false", 1), ("exit 3", 3), ("true; (exit 7)", 7)])
def test_exit_code_is_the_status_at_the_last_prompt(command: str, code: int) -> None:
    for transport in ("tmux", "tmux-safe", "raw"):
        d, _ = deliver(transport, command)
        assert d.execution is not None and d.execution.exit_code == code, transport


def test_the_pane_shell_has_the_sandboxs_environment_and_no_hooks_leak() -> None:
    d, files = deliver("tmux", "env > out.txt; echo \"$PWD $HOME\" >> out.txt")
    env = (files["out.txt"] or "").splitlines()
    assert env[-1] == "/sandbox/work /sandbox/home"
    names = {line.split("=", 1)[0] for line in env[:-1]}
    assert {"PATH", "LANG", "TZ", "TMUX", "TMUX_PANE"} <= names
    assert not names & {"PS0", "PS1", "PS2", "PROMPT_COMMAND", "HISTFILE"}
    assert not [n for n in names if "KEY" in n or "TOKEN" in n]


# -- nothing outlives the call -------------------------------------------------------------------

def test_the_server_and_everything_in_the_pane_are_gone_after_the_call() -> None:
    d, _ = deliver("tmux", "nohup setsid sleep 1013 >/dev/null 2>&1 & disown; echo hello world > out.txt")
    assert d.execution is not None and d.execution.exit_code == 0
    assert tmux_processes() == [] and tmux_processes("sleep 1013") == []


def test_a_command_that_never_returns_times_out_within_the_sandbox_timeout() -> None:
    limits = Limits(timeout_s=3)
    for transport in ("tmux", "tmux-safe"):
        start = time.monotonic()
        d, _ = deliver(transport, "sleep 1017", limits)
        took = time.monotonic() - start
        assert d.execution is not None and d.execution.timed_out and d.execution.exit_code is None
        assert d.execution.limit_hit == "time" and d.received == "sleep 1017"
        assert took < limits.timeout_s + 1.5, took
        assert tmux_processes() == [] and tmux_processes("sleep 1017") == []


# -- bash's log is copied as the hooks write it: the file is never read back -------------------------

def test_a_log_file_replaced_by_a_fifo_changes_nothing() -> None:
    """The hooks write to the descriptor the pane's shell started with (the old inode); the driver, which
    paces on the file, never opens a FIFO; the host reads no file."""
    start = time.monotonic()
    command = "e=$(echo ../meta/tmux-*/log); rm -f $e; mkfifo $e; echo x"
    d, _ = deliver("tmux", command, Limits(timeout_s=3))
    assert time.monotonic() - start < 4.5
    assert d.received == command and not d.split and d.received_note is None
    assert d.execution is not None and d.execution.exit_code == 0


def test_a_log_file_replaced_by_a_symlink_changes_nothing() -> None:
    command = "ln -sf /etc/hostname ../meta/tmux-*/log"
    d, _ = deliver("tmux", command)
    assert d.received == command and not d.split and d.received_note is None
    assert d.execution is not None and d.execution.exit_code == 0


def test_a_later_line_rewriting_the_log_file_only_appends_damage() -> None:
    """The log file once was bash's record, and a later line rewrote it (and with it the received of the
    line before). Now the host has the writes it copied: the builtin's write to the file (the same inode)
    is one more, after the entries already copied, and what the hooks never write is damage."""
    command = ("echo hello world > out.txt\n"
               "printf 'C 6\\nforged\\nP 0\\n' > $(echo ../meta/tmux-*/log)")
    d, files = deliver("tmux", command)
    assert d.received == command and files["out.txt"] == "hello world\n"
    assert d.split and "a C entry written by the shell itself" in (d.received_note or "")  # printf's, not PS0's
    assert d.execution is not None and d.execution.trace is not None
    assert d.execution.trace.shell_log.startswith(b"P 0\nC 33\n    1  echo hello world > out.txt\nP 0\nC 63\n")


def test_a_forged_report_from_a_killed_driver_is_not_believed() -> None:
    """The command writes the driver's report itself and kills the driver (inside the sandbox's pid namespace;
    its argv says ``qb-tmux keys``: the pane's wrapper, a ``bash -c`` waiting on the pane's shell, stays)."""
    command = ('for d in ../meta/tmux-*/; do echo "send-failed 7" > "$d/status"; done; echo hello world > out.txt; '
               'pkill -9 -f "^bash -c .* qb-tmux keys "')
    d, files = deliver("tmux", command)
    assert files["out.txt"] == "hello world\n" and d.transport_error is None
    # The forged "send-failed 7" would give exit code 7 and no received. Whether the pane's bash got back to
    # its prompt (status 0, pkill's) before the sandbox's processes were killed is a race; both are honest.
    assert d.received == command and d.execution is not None and d.execution.exit_code in (None, 0)
    assert (d.received_note or "").startswith("the driver's report was missing or unreadable (the command "
                                              "interfered with it?)")
    # (the driver never reached its kill-server: a pane shell SIGKILLed by the sandbox has no status of its own)
    assert d.execution.exit_code is None or "killed by signal" not in (d.received_note or "")
    assert tmux_processes() == []


def c(entry: bytes) -> bytes:
    return b"C %d\n%s\n" % (len(entry), entry)


def test_parse_log() -> None:
    log = (b"P 0\n" + c(b"    1  false") + b"P 1\nP 1\nW\nW\n" + c(b"    2  cat <<E\nx\n\nE") + b"P 0\n"
           + c(b"    3* exit 3"))
    rec = parse_log(log)
    assert rec.lines == ["false", "", "cat <<E\nx\n\nE"] and rec.pending == ["exit 3"]
    assert rec.status == 0 and rec.damage is None and rec.prompted and rec.commands == 3
    assert rec.executed() == "false\n\ncat <<E\nx\n\nE\nexit 3"
    assert parse_log(b"P 0\nW\n").at_continuation
    assert parse_log(b"").executed() is None


@pytest.mark.parametrize("log, damage", [
    (b"P 0\nC 999\n    1  x\n", "malformed"),                       # a length past the end
    (b"P 0\nC 1\nxP 0\n", "malformed"),                               # no newline after the entry
    (b"P 0\nQ 1\n", "malformed"),
    (b"P 0\nC 1\nx\nP 0", "ends inside an entry"),
    (b"C 1\nx\nP 0\n", "an entry before the first prompt"),
    (b"W\nP 0\n", "an entry before the first prompt"),
    (b"P 0\n" + c(b"x") + c(b"y"), "two commands with no prompt between"),
])
def test_parse_log_stops_at_what_the_hooks_never_write(log: bytes, damage: str) -> None:
    assert parse_log(log).damage == damage


def test_what_is_appended_to_the_log_only_extends_what_it_says_ran() -> None:
    """Whatever a command appends after an entry (the only place it can write: the entry was copied before
    the command ran), bash's record of the lines before stays a prefix, and damage stays damage."""
    honest = [b"P 0\n", b"P 0\n" + c(b"    1  echo a"), b"P 0\n" + c(b"    1  echo a") + b"P 0\nW\n",
              b"P 0\n" + c(b"    1  : echo a") + b"P 1\n" + c(b"    2  x")]
    pieces = [b"P 0\n", b"P 7\n", b"W\n", c(b"    9  forged"), c(b"y\nz"), b"C 3\n", b"\n", b"C 99\nab\n",
              b"P\n", b"x", b"\xff\n", b"P 0"]
    rng = random.Random(18)
    for _ in range(2000):
        before = rng.choice(honest)
        suffix = b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
        a, b = parse_log(before), parse_log(before + suffix)
        assert (b.executed() or "").startswith(a.executed() or ""), (before, suffix)
        assert b.commands >= a.commands and (a.damage is None or b.damage == a.damage)


# -- the fix ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["echo one > out.txt;", "echo \"x !! y\" > out.txt",
                                     "printf 'a\\tb|\tc' > out.txt", "Enter",
                                     "cat > out.txt <<'EOF'\n a\\\n\tb\nEOF\n"])
def test_tmux_safe_reproduces_raw(command: str) -> None:
    raw, raw_files = deliver("raw", command)
    safe, safe_files = deliver("tmux-safe", command)
    assert safe.received == command and safe.transport_error is None
    assert safe_files == raw_files
    assert safe.execution and raw.execution and safe.execution.exit_code == raw.execution.exit_code


def test_each_entry_must_come_from_the_writer_the_hooks_use() -> None:
    """P from the shell itself, C and W from its hook fork; anything else stops the parse as damage."""
    log = b"P 0\nW\nC 3\nabc\nP 1\n"
    honest = [(0, False), (4, True), (6, True), (10, True), (14, False)]
    assert parse_log(log, honest).damage is None and parse_log(log, honest).lines == ["abc"]
    assert "C entry written by the shell" in parse_log(log, [(0, False), (4, True), (6, False), (14, False)]).damage
    assert "C entry written by the shell" in parse_log(log, [(0, False), (4, True), (6, True), (10, False)]).damage
    assert "W entry written by the shell" in parse_log(log, [(0, False), (6, True), (14, False)]).damage
    assert "P entry written by a fork" in parse_log(log, [(0, False), (4, True), (6, True), (10, True)]).damage
    assert "P entry written by a fork" in parse_log(log, [(0, True), (4, True)]).damage
