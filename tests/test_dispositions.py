"""A command starts with the default signal dispositions whatever its harness was started with: a harness that
runs as a script's background job (SIGINT and SIGQUIT ignored) or under nohup (SIGHUP ignored) records what an
interactive one records."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]
# the command's ignored-signal mask, and a child shell that sends itself SIGINT in the foreground (an
# asynchronous job would not do: bash ignores SIGINT in those itself, once it has set them up)
PROBE = "grep -E '^SigIgn' /proc/self/status; sh -c 'kill -INT $$; echo survived'; echo $?"


def _exec(ignored: tuple[int, ...]) -> dict:
    def start() -> None:
        for sig in ignored:
            signal.signal(sig, signal.SIG_IGN)
    done = subprocess.run([*QB, "exec", "--task", "file-write/control", "--transport", "raw", "--command", PROBE,
                           "--json"], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                          preexec_fn=start)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


@pytest.mark.needs("bwrap")
def test_a_harness_started_with_signals_ignored_hands_none_of_them_to_a_command() -> None:
    plain = _exec(())
    ignoring = _exec((signal.SIGINT, signal.SIGQUIT, signal.SIGHUP))
    assert ignoring["stdout"]["text"] == plain["stdout"]["text"]
    assert plain["stdout"]["text"].splitlines() == ["SigIgn:\t0000000000000000", "130"]  # it died of its SIGINT
