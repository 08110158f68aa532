"""The harness frame's own rules, on executions built by hand (no harness run): when a harness's death is a
harness error rather than something the route did to R (transports/harnesses/harness.py)."""

from __future__ import annotations

import signal

import pytest

from transports.harnesses.harness import Final, crashed
from transports.sandbox import Execution
from transports.sandbox.process import Stream
from transports.sandbox.trace import Exec

SHELL = Exec(seq=3, pid=20, parent=10, forked_at=2, exe=None, argv=(b"bash", b"-c", b"R"), argv_complete=True)


def ex(exit_code: int | None, *, timed_out: bool = False) -> Execution:
    return Execution(exit_code=exit_code, stdout=Stream(), stderr=Stream(), timed_out=timed_out, exec_ms=1.0,
                     isolation="bwrap")


@pytest.mark.parametrize("sig", [signal.SIGILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT])
def test_a_crash_before_any_shell_is_the_harness_failing(sig: int) -> None:
    why = crashed(Final(None), ex(128 + sig))
    assert why is not None and signal.Signals(sig).name in why and f"exit {128 + sig}" in why
    assert "nothing of R ran" in why


def test_a_crash_after_the_final_shell_ran_stays_on_the_record() -> None:
    # R ran: whatever followed could be R's doing (it may kill the harness), so it is never excused
    assert crashed(Final(SHELL, "R", "R"), ex(128 + signal.SIGILL)) is None


@pytest.mark.parametrize("code,timed_out", [(0, False), (1, False), (97, False), (128 + signal.SIGKILL, False),
                                            (128 + signal.SIGTERM, False), (None, True), (128 + signal.SIGILL, True)])
def test_an_exit_a_kill_or_the_time_limit_is_not_a_crash(code: int | None, timed_out: bool) -> None:
    assert crashed(Final(None), ex(code, timed_out=timed_out)) is None


def test_only_the_first_exec_after_a_fork_can_be_a_final_shell() -> None:
    """A process the harness forked that execs a second time (an rc file or a hook doing ``exec bash -c
    "... && eval '...'"``) is that process's own doing: only its first exec is the harness's choice."""
    from transports.harnesses.claude_code import eval_shell
    from transports.harnesses.harness import forked_shells
    from transports.capture import program_identity

    bash = program_identity("bash")
    harness = Exec(seq=1, pid=10, parent=None, forked_at=None, exe=None, argv=(b"claude",), argv_complete=True)
    dash_then = Exec(seq=2, pid=11, parent=10, forked_at=1, exe=None, argv=(b"/bin/sh", b"-c", b"hook"),
                     argv_complete=True)
    forged = Exec(seq=3, pid=11, parent=10, forked_at=1, exe=bash,
                  argv=(b"bash", b"-c", b"exit 2 && eval 'forged'"), argv_complete=True)
    real = Exec(seq=4, pid=12, parent=10, forked_at=2, exe=bash,
                argv=(b"/bin/bash", b"-c", b"x && eval 'R'"), argv_complete=True)
    assert forged not in forked_shells([harness, dash_then, forged, real])
    assert eval_shell([harness, dash_then, forged, real]).received == "R"
    assert eval_shell([harness, dash_then, forged]).received is None
