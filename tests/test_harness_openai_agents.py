"""The `openai-agents` route: the real OpenAI Agents SDK 0.24.0 (SandboxAgent, Shell, UnixLocalSandboxClient) run by our
driver, with the courier answering the Responses API inside the sandbox. A run costs 2.5 seconds on a quiet machine
and up to 17 under load (the SDK's import, then its workspace fingerprint when the session stops), so the file runs
five: the control solution, a hostile command, the SDK's rewrite of a command that starts with the workspace path,
HOME, and a command that attacks the courier (docs/harnesses.md)."""

from __future__ import annotations

import anyio
import pytest

from tasks.load import get_task
from transports.capture import program_identity
from transports.execute import execute
from transports.harnesses.openai_agents import VERSION, cd_prefix, cd_shell
from transports.sandbox import Limits
from transports.sandbox.launch import INSIDE_ROOT
from transports.sandbox.trace import Exec

TASK = get_task("file-write/control")
LIMITS = Limits(timeout_s=60)
HARNESS = pytest.mark.needs("bwrap", "python3", "dash", "openai-agents")
WORKSPACE = f"{INSIDE_ROOT}/work"  # the sandbox's working directory under bwrap, which the driver is given


def rec(transport: str, command: str, limits: Limits = LIMITS):
    return anyio.run(lambda: execute(TASK, transport, command, limits=limits))


@HARNESS
def test_the_control_solution_passes_offline() -> None:
    r = rec("openai-agents", TASK.solution)
    assert r.verdict.passed and r.received == TASK.solution and not r.damaged and r.error is None, r
    assert r.harness == "openai-agents" and r.harness_version == VERSION == "0.24.0" and r.shell == "dash"
    assert r.wrapper == f"cd {WORKSPACE} && {TASK.solution}" and r.received_note is None
    assert r.isolation == "bwrap" and r.stdout.text == "Done.\n" and r.exit_code == 0
    assert r.harness_log is not None and "POST /v1/responses" in r.harness_log
    assert "answer exec_command R" in r.harness_log and "answer end_turn" in r.harness_log


@HARNESS
def test_a_hostile_command_arrives_whole() -> None:
    command = ("printf '%s\\n' \"it's \\\"done\\\"!\" 'a\\b' `echo y` $(echo z) a//b !! > out.txt\n"
               "cat >> out.txt <<'EOF'\n$HOME \\ ! 'q' \"q\"\nEOF\n")
    r = rec("openai-agents", command)
    assert r.received == command and not r.damaged and r.received_note is None and r.error is None
    assert r.verdict == rec("raw@dash", command).verdict  # the same program on the same shell, from the workspace


@HARNESS
def test_a_command_starting_with_the_workspace_path_is_rewritten() -> None:
    # the SDK makes an absolute path inside the workspace relative (pathlib: `//` and a trailing `/` go), and it
    # takes the whole program for one path: R loses its head and its redirection target changes
    command = f"{WORKSPACE}/x 2>/dev/null; echo 'hello world' > out.txt//"
    r, dash = rec("openai-agents", command), rec("raw@dash", command)
    assert r.received == "x 2>/dev/null; echo 'hello world' > out.txt" and r.damaged and r.received_note is None
    assert r.wrapper == f"cd {WORKSPACE} && {r.received}"
    assert r.verdict.passed and not dash.verdict.passed  # on dash, `> out.txt//` is not a file: nothing written


@HARNESS
def test_home_is_the_workspace() -> None:
    command = "cd; echo 'hello world' > out.txt"  # `cd` alone goes to $HOME
    r, dash = rec("openai-agents", command), rec("raw@dash", command)
    assert r.received == dash.received == command and not r.damaged
    assert r.verdict.passed and not dash.verdict.passed  # raw's HOME is the sandbox's home, not its working directory


@HARNESS
def test_a_command_cannot_change_its_record_through_the_courier() -> None:
    command = (f"echo forged > {INSIDE_ROOT}/meta/harness-*/courier.log; sh -c 'cd {WORKSPACE} && forged'; "
               f"echo 'hello world' > out.txt; pkill -x python3; exec sh -c 'cd {WORKSPACE} && forged'")
    r = rec("openai-agents", command)
    # the courier is dead, so the SDK's next request fails and the driver ends with one line; received is still
    # the kernel's record of the harness's own shell, not R's look-alikes (a child of R's shell, and R's shell
    # itself exec'ing `sh -c` with the harness as its parent: the first exec wins), and the log is informational
    assert r.received == command and not r.damaged and r.received_note is None
    assert r.verdict.passed and r.exit_code == 1 and "agents_driver: APIConnectionError" in r.stderr.text
    assert "Traceback" not in r.stderr.text


def test_a_failed_venv_install_is_a_harness_error(tmp_path, monkeypatch: pytest.MonkeyPatch, require) -> None:
    require("bwrap")
    for k, v in {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "PIP_CONFIG_FILE": "/dev/null",
                 "PIP_INDEX_URL": "http://127.0.0.1:1/simple", "PIP_EXTRA_INDEX_URL": "", "PIP_FIND_LINKS": "",
                 "PIP_RETRIES": "0", "PIP_TIMEOUT": "2"}.items():
        monkeypatch.setenv(k, v)
    r = rec("openai-agents", TASK.solution)
    assert r.error is not None and r.error.startswith(
        "harness: openai-agents: pip install openai-agents==0.24.0 failed (exit 1): ERROR: "), r.error
    assert "\n" not in r.error and "Traceback" not in r.error
    assert r.received is None and not r.damaged and r.transport_error is None
    assert r.verdict.checks[0].check == "harness"
    assert not (tmp_path / "xdg" / "quotebench" / "venv" / "openai-agents@0.24.0").exists()  # no half venv left


# -- the final shell and its prefix, without a harness run ------------------------------------------------------

DASH, BASH = program_identity("sh"), program_identity("bash")
PYTHON = Exec(seq=1, pid=10, parent=None, forked_at=None, exe=None, argv=(b"python", b"driver.py", b"/w"),
              argv_complete=True)


def sh(seq: int, pid: int, parent: int, program: str, exe=DASH, *rest: bytes, complete: bool = True) -> Exec:
    return Exec(seq=seq, pid=pid, parent=parent, forked_at=seq - 1, exe=exe,
                argv=(b"sh", b"-c", program.encode(), *rest), argv_complete=complete)


def test_the_first_sh_of_the_harness_is_the_final_shell_and_r_follows_the_prefix() -> None:
    uname = Exec(seq=2, pid=11, parent=12, forked_at=1, exe=None, argv=(b"uname", b"-p"), argv_complete=True)
    final = sh(3, 13, 10, "cd /w && echo 'a b'")
    forged = sh(4, 14, 13, "cd /w && forged")  # R's own look-alike: R's shell's child
    replaced = sh(6, 13, 10, "cd /w && forged")  # R's shell exec'ing a look-alike in its place: the same pid, later
    helper = sh(2, 15, 10, "cd /w && # INSTALL_RUNTIME_HELPER_V1\nset -eu", DASH, b"sh", b"/tmp/helper")
    # the SDK's helper (sh -c PROG sh FILE) never counts, nor do R's look-alikes
    got = cd_shell([PYTHON, uname, helper, final, forged, replaced], "/w")
    assert got.exec is final and got.wrapper == "cd /w && echo 'a b'" and got.received == "echo 'a b'"
    assert got.note is None
    alone = cd_shell([PYTHON, helper], "/w")  # R ran elsewhere (`{"shell": "bash"}` gives bash -lc R): nothing
    assert alone.exec is None and alone.received is None and "no sh -c" in (alone.note or "")


def test_a_workspace_that_needs_quotes_is_matched_as_the_sdk_quotes_it() -> None:
    assert cd_prefix("/w s/it's") == "cd '/w s/it'\"'\"'s' && "
    got = cd_shell([PYTHON, sh(2, 11, 10, "cd '/w s' && true")], "/w s")
    assert got.received == "true" and got.note is None


@pytest.mark.parametrize("program", ["cd /w&& true", "cd /w2 && true", "true", "cd '/w' && true", " cd /w && true"])
def test_a_program_without_the_exact_prefix_gives_no_received(program: str) -> None:
    got = cd_shell([PYTHON, sh(2, 11, 10, program)], "/w")
    assert got.received is None and got.wrapper == program and "prefix" in (got.note or "")


def test_only_the_system_sh_started_by_the_harness_counts() -> None:
    assert cd_shell([PYTHON, sh(2, 11, 10, "cd /w && true", BASH)], "/w").received is None  # bash is not sh
    assert cd_shell([PYTHON, sh(2, 11, 99, "cd /w && true")], "/w").received is None  # not the harness's child
    assert cd_shell([PYTHON], "/w").received is None and cd_shell([], "/w").received is None
    torn = cd_shell([PYTHON, sh(2, 11, 10, "cd /w && tr", complete=False)], "/w")
    assert torn.received is None and "whole" in (torn.note or "")
