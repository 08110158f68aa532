"""Attacks on how the harness learns ``received``, and on the exec trace it is read from.

A capture file in the sandbox that the host read back would be the command's to attack: a FIFO there
would hang the harness, a symlink copy a host file into the record, a plain write forge ``received``.
These tests are the attacks, run through the real transports and real bash, each bounded in time so
that a regression fails instead of hanging; floods of execs and forks keep the trace bounded too.
"""

from __future__ import annotations

import subprocess

import anyio
import pytest

from tasks.load import get_task
from transports.execute import execute
from transports.sandbox import Limits

from bounded import bounded
from probes import traced

LIMITS = Limits(timeout_s=4)
TASK = get_task("file-write/control")
INNER = ("nested", "nested-single", "escaped")


def execute_with(timeout_s: float, transport: str, command: str):
    return bounded(lambda: anyio.run(lambda: execute(TASK, transport, command, limits=Limits(timeout_s=timeout_s))),
                   timeout_s + 60)


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


def test_code_the_outer_expansion_runs_before_the_final_shell_makes_the_delivery_split() -> None:
    # the outer shell runs $(...) in a forked subshell before it execs the inner shell: R's text ran early
    record = run("nested", "$(true)echo hello > out.txt")
    assert record.received == "echo hello > out.txt"
    assert record.damaged and "ran 1 process(es) of R's text before the final shell" in (record.received_note or "")


def test_a_final_shell_given_another_environment_is_not_believed() -> None:
    # the outer parse gives the in-place inner bash a BASH_ENV of its choosing: code the record would not show
    record = run("nested", 'echo ok > out.txt"; BASH_ENV=/dev/null exec bash -c "echo ok > out.txt')
    assert record.damaged and "BASH_ENV" in (record.received_note or "")


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
    assert record.received_note and "2 final shells" in record.received_note


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


def test_a_flood_of_execs_is_bounded_in_time_and_in_the_record() -> None:
    """Thousands of programs started by the outer expansion: the trace keeps at most MAX_EXECS of them,
    counts the rest, and the record's note stays short."""
    record = execute_with(8, "nested", "$(for i in $(seq 1500); do /bin/true; done)echo done > out.txt")
    assert record.received == "echo done > out.txt"
    assert record.damaged and len(record.received_note or "") < 2000
    assert "execs past the trace's cap" in (record.received_note or "")


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
    ([b"/run/qb-shim/bash", b"-cx", b"echo hi"], "echo hi"),        # -c need not be the cluster's last letter
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


@pytest.mark.needs("bwrap")
def test_an_exec_flood_after_the_boundary_keeps_the_final_shell() -> None:
    """1200 execs after the boundary cannot push the final shell out of the trace."""
    command = "seq 1200 | xargs -n1 /bin/true; echo hello world > out.txt"
    record = execute_with(20, "nested", command)
    assert record.received == command and not record.damaged and record.verdict.passed
    assert "past the trace's cap" in (record.received_note or "")


@pytest.mark.needs("bwrap")
def test_the_trace_keeps_a_bounded_number_of_bytes() -> None:
    """The trace holds at most 20 MiB of arguments and environment in all, not each exec's whole (up to 2 MiB
    of arguments and 1 MiB of environment, 1024 times: 3 GiB in the harness, outside the sandbox's memory
    cgroup)."""
    command = ("ulimit -s unlimited 2>/dev/null || ulimit -s $(ulimit -H -s); a=$(head -c 120000 /dev/zero | tr '\\0' a); export E1=$a E2=$a E3=$a E4=$a E5=$a E6=$a E7=$a; "
               "set -- $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a; for i in $(seq 40); do bash -c : \"$@\"; done")
    ex, _, _ = traced(command, timeout=20)
    assert len(ex.trace.execs) >= 40
    kept = sum(sum(map(len, e.argv)) + sum(map(len, e.env or ())) for e in ex.trace.execs)
    assert kept <= 20 << 20


@pytest.mark.needs("bwrap")
def test_a_fork_loop_s_trace_is_bounded_by_the_time_limit() -> None:
    """Bounded by time only: a fork loop adds one small entry per fork, a few thousand a second."""
    ex, _, _ = traced("while :; do (:); done", timeout=3)
    assert ex.timed_out and len(ex.trace.forks) < 200_000
