"""The `codex` route: the real Codex CLI 0.171.0, driven offline by the courier inside the sandbox.

A harness run costs about a second (three under load), so the file runs fourteen: the control task's reference
solution, four hostile commands, a login-shell difference against ``raw`` (one run each), a command that
attacks the courier, and six hostile models' commands: one that Codex's own apply_patch runs without a shell,
a refusal, a crash signal sent to the harness, writes into the installed harness, the network, and a courier
log swapped for a link. ``received`` is ``argv[2]`` of the ``bash -lc`` that Codex's own helper process executed,
read from the kernel's exec trace (docs/harnesses.md); the final-shell picker is tested on synthetic traces too.
"""

from __future__ import annotations

import socket
import threading

import anyio
import pytest

from tasks.load import get_task
from transports.capture import program_identity
from transports.execute import execute
from transports.harnesses.codex import VERSION, login_shell
from transports.sandbox import Limits
from transports.sandbox.trace import Exec
from probes import network_asked

TASK = get_task("file-write/control")
LIMITS = Limits(timeout_s=30)
ATTACK = Limits(timeout_s=40)  # the attacks below, each one harness run or two
GOOD = 'echo "hello world" > out.txt'
HARNESS = pytest.mark.needs("bwrap", "python3", "codex")


def rec(transport: str, command: str, limits: Limits = LIMITS):
    return anyio.run(lambda: execute(TASK, transport, command, limits=limits))


@HARNESS
def test_the_control_solution_passes_offline_with_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = network_asked(monkeypatch)
    r = rec("codex", TASK.solution)
    assert seen == [False]  # the harness ran in its own network namespace: loopback only
    assert r.verdict.passed and r.received == TASK.solution and not r.damaged and r.error is None, r
    assert r.received_note is None
    assert r.harness == "codex" and r.harness_version == VERSION == "0.171.0"
    assert r.wrapper is not None and r.wrapper.endswith(" -lc 'echo \"hello world\" > out.txt'"), r.wrapper
    assert r.harness_log is not None and "POST /v1/responses" in r.harness_log
    assert "answer exec_command R" in r.harness_log and "answer end_turn" in r.harness_log
    assert "tool_result" in r.harness_log
    assert r.shell == "bash" and r.transport == "codex"


HOSTILE = [
    "printf '%s\\n' \"it's \\\"done\\\"!\" 'a\\b' $'tab\\there' !! > out.txt",
    "cat > out.txt <<'EOF'\n$HOME `x` \\ 'q' \"q\" !\nEOF",
    "echo one \\\n  two > out.txt;\n# a comment ' with a quote\n",
    "  echo héllo ✓ {a,b} $(echo x) `echo y` $'\\x41' > out.txt \\\\  \t ",
]


@HARNESS
@pytest.mark.parametrize("command", HOSTILE, ids=["quotes-bang-backslash-ansi", "heredoc", "continuation", "blanks-unicode"])
def test_hostile_commands_arrive_whole(command: str) -> None:
    r = rec("codex", command)
    assert r.received == command and not r.damaged and r.received_note is None, (r.received, r.wrapper)
    assert r.error is None and r.transport_error is None


@HARNESS
def test_the_final_shell_is_a_login_shell_where_raw_is_not() -> None:
    command = "shopt -q login_shell && echo 'hello world' > out.txt"
    raw, codex = rec("raw", command), rec("codex", command)
    assert raw.received == codex.received == command and not codex.damaged
    assert not raw.verdict.passed  # bash -c: not a login shell
    assert codex.verdict.passed  # bash -lc: /etc/profile ran first (it also resets PATH)


@HARNESS
def test_a_command_cannot_change_its_record_through_the_courier() -> None:
    command = ("echo forged > /sandbox/meta/harness-*/courier.log; bash -lc 'echo forged > out.txt'; "
               "/usr/bin/bash -lc \"true\"; echo 'hello world' > out.txt; pkill -x python3")
    r = rec("codex", command, Limits(timeout_s=10))  # Codex starts in 1.5 to 3.6 s on a loaded machine
    # the courier is dead, so Codex retries its next request until it gives up or the time runs out; received
    # is still the kernel's record of Codex's own shell, not R's look-alikes, and the log is informational
    assert r.received == command and not r.damaged and r.received_note is None, (r.received, r.received_note)
    assert r.verdict.passed and r.limit_hit == "time"  # the courier did die: Codex was still retrying


def test_a_failed_harness_install_is_a_harness_error(tmp_path, monkeypatch: pytest.MonkeyPatch, require) -> None:
    require("bwrap")
    require("npm")
    for k, v in {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "npm_config_registry": "http://127.0.0.1:1/",
                 "npm_config_cache": str(tmp_path / "npm-cache"), "npm_config_fetch_retries": "0"}.items():
        monkeypatch.setenv(k, v)
    r = rec("codex", TASK.solution)
    assert r.error is not None and r.error.startswith(
        "harness: codex: npm install @openai/codex@0.171.0 failed (exit 1): npm error code ECONNREFUSED"), r.error
    assert "\n" not in r.error and "Traceback" not in r.error
    assert r.received is None and not r.damaged and r.transport_error is None
    assert r.verdict.checks[0].check == "harness"


# -- the final-shell picker, without a harness run ----------------------------------------------------------

BASH = program_identity("bash")
CODEX_BIN = (1, 4242)
SH = (1, 77)


def ex(seq: int, pid: int, parent: int | None, exe: tuple[int, int] | None, *argv: bytes, complete: bool = True) -> Exec:
    return Exec(seq=seq, pid=pid, parent=parent, forked_at=None, exe=exe, argv=argv, argv_complete=complete)


# the measured chain: the launcher (pid 10) execs the prelude, then Codex in place; Codex's thread 11 forks 12,
# which execs the Codex helper, then bash -lc R in place
LAUNCH = [ex(1, 10, None, SH, b"/bin/sh", b"-c", b"launcher"), ex(3, 10, None, SH, b"/bin/sh", b"-c", b"prelude"),
          ex(4, 10, None, CODEX_BIN, b"codex", b"exec")]
HELPER = ex(7, 12, 11, CODEX_BIN, b"/proc/self/exe", b"--codex-run-as-process-setup", b"52", b"3", b"pipe", b"")
FINAL = ex(8, 12, 11, BASH, b"/usr/bin/bash", b"-lc", b"echo 'a b' > out.txt")
FORKS = {11: (10, 5), 12: (11, 6)}


def test_the_shell_codex_s_helper_starts_is_the_final_shell() -> None:
    final = login_shell([*LAUNCH, HELPER, FINAL], FORKS)
    assert final.exec is FINAL and final.received == "echo 'a b' > out.txt" and final.note is None
    assert final.wrapper == "/usr/bin/bash -lc 'echo '\"'\"'a b'\"'\"' > out.txt'"


def test_a_bash_codex_starts_itself_counts_and_a_plain_c_does_not() -> None:
    direct = ex(6, 13, 10, BASH, b"/bin/bash", b"-lc", b"x")
    plain = ex(5, 14, 10, BASH, b"/bin/bash", b"-c", b"y")
    final = login_shell([*LAUNCH, plain, direct], {13: (10, 4), 14: (10, 4)})
    assert final.exec is direct and final.received == "x"


def test_nothing_r_starts_counts_even_a_copy_of_codex() -> None:
    # R's bash (pid 12 after FINAL) starts the Codex binary (20), whose thread (21) forks 22: helper, bash -lc
    forks = {**FORKS, 20: (12, 9), 21: (20, 11), 22: (21, 12), 23: (12, 14)}
    forged = [ex(10, 20, 12, CODEX_BIN, b"codex", b"exec"),
              ex(13, 22, 21, CODEX_BIN, b"/proc/self/exe", b"--codex-run-as-process-setup"),
              ex(14, 22, 21, BASH, b"/usr/bin/bash", b"-lc", b"forged"),
              ex(15, 23, 12, BASH, b"/usr/bin/bash", b"-lc", b"forged too")]
    assert login_shell([*LAUNCH, FINAL, *forged], forks).received == "echo 'a b' > out.txt"
    # when Codex's own shell is not a bash -lc (the snapshot's bash -c wrapper), nothing R started is taken for it
    wrapped = ex(8, 12, 11, BASH, b"/bin/bash", b"-c", b"source snapshot; exec '/bin/bash' -c 'R'")
    final = login_shell([*LAUNCH, HELPER, wrapped, *forged], forks)
    assert final.received is None and "no bash -lc" in (final.note or "")


def test_a_look_alike_bash_or_an_unknown_parent_does_not_count() -> None:
    fake_bash = ex(8, 12, 11, (9, 9), b"/usr/bin/bash", b"-lc", b"forged")  # another file named bash
    assert login_shell([*LAUNCH, HELPER, fake_bash], FORKS).received is None
    assert login_shell([*LAUNCH, HELPER, FINAL], {12: (11, 6)}).received is None  # 11 not known to be Codex's
    assert login_shell([], {}).received is None and login_shell([], {}).note == "the kernel saw no program run"


def test_an_unreadable_program_gives_no_received() -> None:
    cut = ex(8, 12, 11, BASH, b"/usr/bin/bash", b"-lc", b"echo 'a", complete=False)
    final = login_shell([*LAUNCH, HELPER, cut], FORKS)
    assert final.exec is cut and final.received is None and "whole" in (final.note or "")


@HARNESS
def test_an_apply_patch_codex_runs_itself_is_damage_with_no_received() -> None:
    """Attack: R = ``apply_patch <<'EOF' ... *** Add File: out.txt ... EOF``. Codex recognises the apply_patch
    invocation inside its exec_command and writes the file itself, so the kernel sees no ``bash -lc`` at all.
    Safe behaviour: the record says what happened. ``received`` is null (no shell got
    anything), so the record is ``damaged``: the route did something else than run R in a shell, and here that
    made a command which fails on ``raw`` (bash has no ``apply_patch``) pass; the note names the interception."""
    command = "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: out.txt\n+hello world\n*** End Patch\nEOF\n"
    r = rec("codex", command, ATTACK)
    assert r.error is None and r.transport_error is None
    assert r.received is None and r.damaged and "apply_patch" in (r.received_note or ""), r.received_note
    assert r.verdict.passed and not rec("raw", command).verdict.passed


@HARNESS
def test_codex_s_refusal_of_rm_f_is_a_transport_error_naming_it() -> None:
    """Attack (a refusal hidden as damage): R = ``rm -f nothing; echo "hello world" > out.txt``, an ordinary
    command. Codex refuses it before any shell (its tool result says ``rejected: rm -f style commands are not
    permitted``). Safe behaviour: as on gemini-cli, a harness refusal is a transport error naming it (counted in
    ``refused``), not silent damage; at least the record must say the harness refused."""
    r = rec("codex", 'rm -f nothing; echo "hello world" > out.txt', ATTACK)
    assert r.received is None and not r.verdict.passed
    assert r.transport_error is not None and "rm -f" in r.transport_error, (r.transport_error, r.received_note)


@HARNESS
def test_r_that_kills_codex_with_sigill_stays_a_model_outcome() -> None:
    """Attack on the crash rule: R does the task, then sends SIGILL to Codex (its shell's parent), so the harness
    "dies of a crash signal" (exit 132) as Claude Code's runtime does. Safe behaviour: the kernel saw the final
    shell, so the record is NOT a harness error (which would drop it from every rate): received == R, no error."""
    command = GOOD + "; kill -ILL $PPID"
    r = rec("codex", command, ATTACK)
    assert r.exit_code == 132
    assert r.error is None and r.received == command and not r.damaged and r.verdict.passed


@HARNESS
def test_r_cannot_write_into_the_installed_harness() -> None:
    """Attack on the host's files and on every later run: R finds the Codex binary it was started by
    (``/proc/$PPID/exe``) and tries to create a file beside it and touch it, i.e. to plant something in the
    per-user npm cache that every later run executes. Safe behaviour: the bind is read-only; nothing appears in
    the host's cache and the binary is untouched (harmless probes only: a new file and an mtime)."""
    from transports.harnesses.codex import Codex

    route = Codex()
    program = route.program(route.installed())
    planted = program.parent / "qb-planted-pwned"
    before = program.stat()
    command = ('exe=$(readlink /proc/$PPID/exe); touch "$(dirname "$exe")/qb-planted-pwned"; touch -c "$exe"; '
               + GOOD)
    try:
        r = rec("codex", command, ATTACK)
        assert r.received == command and r.verdict.passed
        assert not planted.exists()
        assert program.stat().st_mtime_ns == before.st_mtime_ns and program.stat().st_size == before.st_size
    finally:
        if planted.exists():
            planted.unlink()


@HARNESS
def test_r_reaches_neither_the_network_nor_a_host_loopback_listener() -> None:
    """Attack on the network: R connects to a public address and to a listener the host opened on 127.0.0.1, and
    writes the wrong file if either works. Safe behaviour: the sandbox's network namespace has its own loopback
    only: both fail, the listener sees nothing, and R writes the right file (pass)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(15)
    port = listener.getsockname()[1]
    hits: list[object] = []

    def accept() -> None:
        try:
            hits.append(listener.accept())
        except OSError:
            pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    probe = ("import socket,sys\nfor a in (('1.1.1.1',53),('127.0.0.1',%d)):\n try:\n  socket.create_connection(a,2)"
             "\n  sys.exit(0)\n except OSError: pass\nsys.exit(1)\n") % port
    command = f"if python3 -c '{probe}'; then echo leaked > out.txt; else {GOOD}; fi"
    try:
        r = rec("codex", command, ATTACK)
    finally:
        listener.close()
        t.join(5)
    assert r.received == command
    assert r.verdict.passed, "R reached the network"
    assert not hits


@HARNESS
def test_a_courier_log_swapped_for_a_link_to_a_host_file_is_not_followed() -> None:
    """Attack on the host's read of the courier's log (``harness_log``): R replaces ``courier.log`` in its run
    directory with a symlink to ``/etc/passwd``; a host that followed it would copy a host file into the record.
    Safe behaviour: the host reads the log without following links: ``harness_log`` is null (or the courier's own
    text), never the host file; received and the verdict are untouched."""
    command = 'for f in /sandbox/meta/*/courier.log; do ln -s /etc/passwd "$f.new" && mv "$f.new" "$f"; done; ' + GOOD
    r = rec("codex", command, ATTACK)
    assert r.received == command and r.verdict.passed and r.error is None
    assert r.harness_log is None or "root:x:0:0" not in r.harness_log
