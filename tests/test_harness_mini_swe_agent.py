"""The `mini-swe-agent` route: the real mini-swe-agent 2.4.6, driven offline by the courier (Chat Completions)
inside the sandbox. A run costs about six seconds (litellm's import), so the file runs three: the control
solution, a hostile command, and a bashism that shows the final shell is dash (docs/harnesses.md)."""

from __future__ import annotations

import anyio
import pytest

from tasks.load import get_task
from transports.execute import execute
from transports.harnesses.mini_swe_agent import VERSION, sh_shell
from transports.sandbox import Limits
from transports.sandbox.trace import Exec

TASK = get_task("file-write/control")
LIMITS = Limits(timeout_s=60)
HARNESS = pytest.mark.needs("bwrap", "python3", "dash", "mini-swe-agent")


def rec(transport: str, command: str):
    return anyio.run(lambda: execute(TASK, transport, command, limits=LIMITS))


@HARNESS
def test_the_control_solution_passes_offline() -> None:
    r = rec("mini-swe-agent", TASK.solution)
    assert r.verdict.passed and r.received == TASK.solution and not r.damaged and r.error is None, r
    assert r.harness == "mini-swe-agent" and r.harness_version == VERSION == "2.4.6" and r.shell == "dash"
    assert r.wrapper == TASK.solution  # Popen(shell=True): the program is R itself
    assert r.harness_log is not None and "answer bash R" in r.harness_log and "answer bash submit" in r.harness_log


@HARNESS
def test_a_hostile_command_arrives_whole() -> None:
    command = "printf '%s\\n' \"it's \\\"done\\\"!\" 'a\\b' `echo y` > out.txt\ncat >> out.txt <<'EOF'\n$HOME \\ !\nEOF\n"
    r = rec("mini-swe-agent", command)
    assert r.received == command and not r.damaged and r.received_note is None and r.error is None


@HARNESS
def test_the_final_shell_is_dash_as_on_raw_at_dash() -> None:
    command = "echo $'hello world' > out.txt"  # bash writes "hello world"; dash writes "$hello world"
    mini, raw, dash = rec("mini-swe-agent", command), rec("raw", command), rec("raw@dash", command)
    assert mini.received == command and raw.verdict.passed
    assert not mini.verdict.passed and mini.verdict == dash.verdict


def test_no_shell_from_the_harness_means_no_received() -> None:
    launcher = Exec(seq=1, pid=10, parent=None, forked_at=None, exe=None, argv=(b"python",), argv_complete=True)
    assert sh_shell([launcher]).received is None and sh_shell([]).received is None


def test_a_failed_venv_install_is_a_harness_error(tmp_path, monkeypatch: pytest.MonkeyPatch, require) -> None:
    require("bwrap")
    for k, v in {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "PIP_CONFIG_FILE": "/dev/null",
                 "PIP_INDEX_URL": "http://127.0.0.1:1/simple", "PIP_EXTRA_INDEX_URL": "", "PIP_FIND_LINKS": "",
                 "PIP_RETRIES": "0", "PIP_TIMEOUT": "2"}.items():
        monkeypatch.setenv(k, v)
    r = rec("mini-swe-agent", TASK.solution)
    assert r.error is not None and r.error.startswith(
        "harness: mini-swe-agent: pip install mini-swe-agent==2.4.6 failed (exit 1): ERROR: "), r.error
    assert "\n" not in r.error and "Traceback" not in r.error
    assert r.received is None and not r.damaged and r.transport_error is None
    assert r.verdict.checks[0].check == "harness"
    assert not (tmp_path / "xdg" / "quotebench" / "venv" / "mini-swe-agent@2.4.6").exists()  # no half venv left
