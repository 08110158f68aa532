"""`quotebench exec` shows the intermediate text of docker-sh, tmux and shell-quote-eval,
each from the transport's own public function: the docker command line, the argv of tmux send-keys (checked
against the argv the kernel saw run), and what shell-quote-eval hands to bash."""

from __future__ import annotations

import json
import re

import anyio
import pytest

from tasks.load import get_task
from transports.paths.tmux import send_keys_argv
from transports.registry import get
from transports.sandbox import Limits, Sandbox

from test_cli_exec import qb, rows

TASK = "file-write/control"


def artifact(stdout: str, label: str) -> str:
    found = [v for k, v in rows(stdout) if k == label]
    assert len(found) == 1, stdout
    return found[0]


# ---------------------------------------------------------------- docker-sh


@pytest.mark.needs("dash")
def test_docker_sh_shows_its_docker_exec_command_line() -> None:
    r = qb("exec", "--task", TASK, "--transport", "docker-sh", "--command", 'echo "a b" > out.txt')
    assert r.returncode == 1, r.stderr
    assert artifact(r.stdout, "outer") == 'docker exec CTR sh -c "echo "a b" > out.txt"'
    # what the outer line does is what ran: host bash splits at the inner quotes, dash gets `echo a`
    assert ("received", "echo a") in rows(r.stdout)


@pytest.mark.needs("dash")
def test_docker_sh_safe_shows_r_quoted_for_the_host_shell() -> None:
    r = qb("exec", "--task", TASK, "--transport", "docker-sh-safe", "--command", 'echo "hello world" > out.txt')
    assert r.returncode == 0, r.stderr
    assert artifact(r.stdout, "outer") == "docker exec CTR sh -c 'echo \"hello world\" > out.txt'"


# ---------------------------------------------------------------- tmux


@pytest.mark.needs("tmux")
def test_tmux_shows_the_argv_of_send_keys() -> None:
    r = qb("exec", "--task", TASK, "--transport", "tmux", "--command", "echo two;")
    assert json.loads(artifact(r.stdout, "keys")) == ["tmux", "-S", "SOCKET", "send-keys", "-t", "qb", "echo two;",
                                                      "Enter"]
    r = qb("exec", "--task", TASK, "--transport", "tmux-safe", "--command", "echo two;")
    assert json.loads(artifact(r.stdout, "keys")) == [
        "tmux", "-S", "SOCKET", "send-keys", "-t", "qb", "-l", "bash /run/qb-files/command-N </dev/null", ";",
        "send-keys", "-t", "qb", "Enter"]


def _send_keys_seen(transport: str, command: str) -> list[str]:
    """The argv of the send-keys exec in a real delivery, as the kernel's exec trace holds it."""
    async def go() -> list[str]:
        with Sandbox.create(get_task(TASK), Limits(timeout_s=4)) as box:
            d = await get(transport).deliver(command, box)
            assert d.execution is not None and d.execution.trace is not None
            seen = [e for e in d.execution.trace.execs if b"send-keys" in e.argv and e.argv[0].endswith(b"tmux")]
            assert len(seen) == 1 and seen[0].argv_complete
            return [a.decode() for a in seen[0].argv]
    return anyio.run(go)


@pytest.mark.needs("tmux", "bwrap")
@pytest.mark.parametrize("safe", [False, True])
def test_the_argv_shown_is_the_argv_that_ran(safe: bool) -> None:
    seen = _send_keys_seen("tmux-safe" if safe else "tmux", "echo 'a b' | cat")
    socket = seen[2]  # the run's own server, a fresh name each run
    script = "/run/qb-files/command-N"
    if safe:
        m = re.fullmatch(r"bash (/run/qb-files/command-\d+) </dev/null", seen[7])
        assert m, seen
        script = m.group(1)
    assert send_keys_argv("echo 'a b' | cat", safe, script=script, socket=socket) == seen


# ---------------------------------------------------------------- shell-quote-eval


def test_shell_quote_eval_without_a_pipe_shows_r_handed_to_bash_unchanged() -> None:
    r = qb("exec", "--task", TASK, "--transport", "shell-quote-eval", "--command", "D=/x && echo ${D}")
    assert json.loads(artifact(r.stdout, "argv")) == ["bash", "-c", "D=/x && echo ${D}"]
    r = qb("exec", "--task", TASK, "--transport", "shell-quote-eval-safe", "--command", "echo ${D} | cat")
    assert json.loads(artifact(r.stdout, "argv")) == ["bash", "-c", "echo ${D} | cat"]


@pytest.mark.needs("node", "npm", "shell-quote")
def test_shell_quote_eval_with_a_pipe_shows_the_rebuilt_string() -> None:
    r = qb("exec", "--task", TASK, "--transport", "shell-quote-eval", "--command", "MYVAR=hello && echo ${MYVAR} | cat")
    assert artifact(r.stdout, "rebuilt") == "MYVAR=hello && echo '' | cat"  # #7387: parse expanded ${MYVAR}
    assert "argv" not in [k for k, _ in rows(r.stdout)]
