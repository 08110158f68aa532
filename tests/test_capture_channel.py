"""Attacks on how the harness learns ``received`` (issue: step 6, item 1; step 7, item 4).

The nested family's capture used to be a file in the sandbox that the host read back:
a FIFO there hung the harness, a symlink copied a host file into the record, and a plain
write forged ``received``. These tests are the attacks, run through the real transports
and real bash, each bounded in time so that a regression fails instead of hanging.
"""

from __future__ import annotations

import subprocess

import anyio
import pytest

from tasks.load import get_task
from transports.execute import execute
from transports.sandbox import Limits

from bounded import bounded

LIMITS = Limits(timeout_s=4)
TASK = get_task("file-write/control")
INNER = ("nested", "nested-single", "escaped")


def run(transport: str, command: str, budget_s: float = 30.0):
    """execute() with a hard deadline: a hang is a failure, not a stuck suite."""
    return bounded(lambda: anyio.run(lambda: execute(TASK, transport, command, limits=LIMITS)), budget_s)


def real_inner(outer: str) -> str:
    """What a real outer bash hands the inner bash, observed without any capture machinery."""
    probe = 'printf %s "$2"'
    done = subprocess.run(["bash", "-c", outer.replace("bash -c", f"bash -c '{probe}' x -c", 1)],
                          capture_output=True, timeout=10, env={"PATH": "/usr/bin:/bin"})
    return done.stdout.decode().split("\n")[0]


@pytest.mark.parametrize("transport", INNER)
def test_a_fifo_or_link_in_the_scratch_space_does_not_hang_or_leak(transport: str) -> None:
    for attack in ("rm -rf /sandbox/meta/*; mkfifo /sandbox/meta/received-1 /sandbox/meta/received-2",
                   "ln -sf /etc/passwd /sandbox/meta/received-1; ln -sf /etc/passwd /sandbox/meta/received-2"):
        record = run(transport, attack)
        assert record.received is not None and "root:" not in record.received
        assert record.exit_code == 0


@pytest.mark.parametrize("transport", INNER)
def test_the_inner_shell_cannot_reach_the_channel(transport: str) -> None:
    record = run(transport, "printf shim >&9; echo forged >&9; ls -l /proc/self/fd/ > out.txt")
    assert record.received is not None and record.received.startswith("printf shim >&9")
    assert "Bad file descriptor" in record.stderr.text
    assert record.received_note is None


def test_a_message_from_the_outer_expansion_is_not_taken_for_the_boundary() -> None:
    # the outer shell runs $(...) in a subshell that holds the channel: its message fails verification
    record = run("nested", "$(printf shim >&9; kill -STOP $BASHPID)echo hello > out.txt")
    assert record.received == "echo hello > out.txt"
    assert record.received_note and "failed verification" in record.received_note


def test_a_shim_started_with_preloaded_code_is_not_believed() -> None:
    record = run("nested", "$(LD_PRELOAD=/nonexistent.so /run/qb-shim/bash -c forged)echo ok > out.txt")
    assert record.received == "echo ok > out.txt"
    assert record.received_note and "LD_PRELOAD" in record.received_note


def test_received_of_an_inner_shell_split_off_in_the_background() -> None:
    # the paste closes the quote early and the outer parse meets an '&': the first inner shell is forked
    command = 'echo one > out.txt" & wait; echo "'
    record = run("nested", command)
    assert record.received == "echo one > out.txt" == real_inner('bash -c "' + command + '"')
    assert record.received_note and "forked" in record.received_note
    assert "found 'one\\n'" in record.verdict.checks[0].detail  # the background shell did write out.txt


def test_several_shells_split_off_name_the_first_and_count_them() -> None:
    command = 'echo one > out.txt" & wait; bash -c "echo two >> out.txt" & wait; echo "'
    record = run("nested", command)
    assert record.received == "echo one > out.txt"
    assert record.received_note and "2 shells" in record.received_note


def test_the_shell_exec_d_in_place_is_the_boundary_even_after_forked_ones() -> None:
    record = run("nested", 'echo one > out.txt" & wait; bash -c "echo two > two.txt')
    assert record.received == "echo two > two.txt"


def test_the_shim_is_invisible_to_the_outer_expansions() -> None:
    # $(which bash) and $PATH are expanded by the outer shell: they must read as on a real system
    record = run("nested", "echo $(which bash) $PATH > out.txt")
    assert record.received == "echo /usr/bin/bash /usr/local/bin:/usr/bin:/bin > out.txt"


def test_a_flood_of_shells_in_the_outer_expansion_is_bounded() -> None:
    command = "$(for i in $(seq 100); do bash -c :; done)echo done > out.txt"
    record = run("nested", command)
    assert record.received == "echo done > out.txt"


def test_the_first_forked_shell_is_chosen_by_fork_order_every_time() -> None:
    command = 'echo one > a.txt" & bash -c "echo two > b.txt" & bash -c "echo three > c.txt" & wait; echo "'
    seen = {run("nested", command).received for _ in range(6)}
    assert seen == {"echo one > a.txt"}


def test_a_flood_of_announcements_is_bounded_in_time_and_in_the_record() -> None:
    """200 background loops and the outer shell itself writing to the channel without end: once took
    the harness past its wall clock to 1.6 GB; now the run ends at its timeout and the note stays short."""
    command = 'x"; for i in $(seq 200); do (while :; do printf shim >&9; done) & done; while :; do printf shim >&9; done; "'
    import time

    start = time.monotonic()
    record = run("nested", command, budget_s=60)
    assert time.monotonic() - start < LIMITS.timeout_s + 15
    assert record.timed_out and record.limit_hit == "time"
    assert len(record.received_note or "") < 2000


# -- where the program sits among the inner shell's options ----------------------------------------

@pytest.mark.needs("bwrap")
def test_an_option_word_split_off_before_the_program_is_not_taken_for_it() -> None:
    """R = ``-x" "echo hi > out.txt``: nested's outer parse gives ``bash -c -x 'echo hi > out.txt'``, and bash
    runs ``echo hi > out.txt`` with xtrace. That program, not ``-x``, is what the inner shell received, and it
    is not R: damaged. On raw the same R is one word that bash refuses as options, and received stays R."""
    command = '-x" "echo hi > out.txt'
    nested = run("nested", command)
    assert nested.received == "echo hi > out.txt" and nested.damaged, nested
    assert "+ echo hi" in nested.stderr.text
    raw = run("raw", command)
    assert raw.received == command and not raw.damaged and raw.exit_code == 2, raw


@pytest.mark.needs("bwrap")
@pytest.mark.parametrize("command", ["-x echo hi > out.txt", "-e"])
def test_an_r_that_bash_refuses_as_options_is_refused_alike_on_nested_and_raw(command: str) -> None:
    """One word that looks like options: bash runs nothing on either transport; nested adds no damage."""
    nested, raw = run("nested", command), run("raw", command)
    assert nested.received == raw.received == command and not nested.damaged and not raw.damaged
    assert nested.exit_code == raw.exit_code != 0


@pytest.mark.parametrize(("argv", "program"), [
    ([b"bash", b"-c", b"-x", b"echo hi"], "echo hi"),
    ([b"/run/qb-shim/bash", b"-cx", b"echo hi"], "echo hi"),        # was None: -c is not the cluster's last letter
    ([b"bash", b"-c", b"-o", b"errexit", b"echo hi"], "echo hi"),   # -o takes the next word
    ([b"bash", b"-c", b"--", b"-x"], "-x"),                         # -- ends the options
    ([b"bash", b"-c", b"-x echo hi"], "-x echo hi"),                # refused as options: the word after -c
    ([b"bash", b"-c", b"-e"], "-e"),                                # no program left: the word after -c
    ([b"bash", b"-c", b"-o"], "-o"),
    ([b"bash", b"-x", b"script.sh"], None),                         # no -c: a script, not a program text
])
def test_received_from_reads_the_options_as_the_shell_does(argv: list[bytes], program: str | None) -> None:
    from transports.capture import received_from

    assert received_from(argv) == program
