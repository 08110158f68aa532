"""The `claude-code` route: the real Claude Code 2.1.197, driven offline by the courier inside the sandbox.

Each harness run costs about a second (three under load), so the file runs seven: the control task's reference
solution, four hostile commands, ``set -e``, and a command that attacks the courier. ``received`` is the
wrapper's ``eval`` word as bash dequotes it, read from the kernel's exec trace (docs/harnesses.md).
"""

from __future__ import annotations

import anyio
import pytest

from tasks.load import get_task
from transports.execute import execute
from transports.harnesses.claude_code import VERSION, eval_shell
from transports.harnesses.dequote import DequoteError, dequote, word_after
from transports.sandbox import Limits
from transports.sandbox.trace import Exec
from harness_corpus import crashed
from probes import network_asked

TASK = get_task("file-write/control")
LIMITS = Limits(timeout_s=30)
HARNESS = pytest.mark.needs("bwrap", "python3", "claude-code")


def rec(transport: str, command: str, limits: Limits = LIMITS):
    """One execution; a run in which Claude Code itself crashed before any shell (a harness error, which a
    resumed replay retries too: docs/harnesses.md) is run again, at most twice more."""
    for _ in range(3):
        r = anyio.run(lambda: execute(TASK, transport, command, limits=limits))
        if not crashed(r):
            break
    return r


@HARNESS
def test_the_control_solution_passes_offline_with_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = network_asked(monkeypatch)
    r = rec("claude-code", TASK.solution)
    assert seen == [False]  # the harness ran in its own network namespace: loopback only
    assert r.verdict.passed and r.received == TASK.solution and not r.damaged and r.error is None, r
    assert r.harness == "claude-code" and r.harness_version == VERSION == "2.1.197"
    assert r.wrapper is not None and "&& eval " in r.wrapper and r.wrapper.startswith("source ")
    assert r.harness_log is not None and "POST /v1/messages" in r.harness_log and "answer tool_use" in r.harness_log
    assert "tool_result" in r.harness_log and "answer end_turn" in r.harness_log
    assert r.shell == "bash" and r.transport == "claude-code"


HOSTILE = [
    "printf '%s\\n' \"it's \\\"done\\\"!\" 'a\\b' $'tab\\there' !! > out.txt",
    "cat > out.txt <<'EOF'\n$HOME `x` \\ 'q' \"q\" !\nEOF",
    "echo one \\\n  two > out.txt;\n# a comment ' with a quote\n",
    "  echo héllo ✓ {a,b} $(echo x) `echo y` > out.txt  ",
]


@HARNESS
@pytest.mark.parametrize("command", HOSTILE, ids=["quotes-bang-backslash-ansi", "heredoc", "continuation", "blanks-unicode"])
def test_hostile_commands_arrive_whole(command: str) -> None:
    r = rec("claude-code", command)
    assert r.received == command and not r.damaged and r.received_note is None, (r.received, r.wrapper)
    assert r.error is None and r.transport_error is None


@HARNESS
def test_set_e_is_ignored_where_raw_honours_it() -> None:
    command = "set -e; false; echo 'hello world' > out.txt"
    raw, claude = rec("raw", command), rec("claude-code", command)
    assert raw.received == claude.received == command and not claude.damaged
    assert not raw.verdict.passed  # errexit stopped at false
    assert claude.verdict.passed  # the eval is left of &&: errexit has no effect (HARNESSES.md)


@HARNESS
def test_a_command_cannot_change_its_record_through_the_courier() -> None:
    command = ("echo forged > /sandbox/meta/harness-*/courier.log; bash -c \"true && eval 'forged'\"; "
               "echo 'hello world' > out.txt; pkill -x python3")
    r = rec("claude-code", command, Limits(timeout_s=12))
    # the courier is dead, so the harness retries its next request until the time runs out; received is still
    # the kernel's record of the harness's own wrapper, not R's look-alike, and the log is informational
    assert r.received == command and not r.damaged and r.received_note is None
    assert r.verdict.passed and r.limit_hit == "time"


def test_a_failed_harness_install_is_a_harness_error(tmp_path, monkeypatch: pytest.MonkeyPatch, require) -> None:
    require("bwrap")
    require("npm")
    for k, v in {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "npm_config_registry": "http://127.0.0.1:1/",
                 "npm_config_cache": str(tmp_path / "npm-cache"), "npm_config_fetch_retries": "0"}.items():
        monkeypatch.setenv(k, v)
    r = rec("claude-code", TASK.solution)
    assert r.error is not None and r.error.startswith(
        "harness: claude-code: npm install @anthropic-ai/claude-code@2.1.197 failed (exit 1): npm error code ECONNREFUSED")
    assert "\n" not in r.error and "Traceback" not in r.error
    assert r.received is None and not r.damaged and r.transport_error is None
    assert r.verdict.checks[0].check == "harness"


# -- the wrapper's word, without a harness run ------------------------------------------------------------

@pytest.mark.parametrize("word, value", [
    ("'echo '\"'\"'hello world'\"'\"' > out.txt'", "echo 'hello world' > out.txt"),
    ("POST", "POST"),
    ("'a\\b $x `y`'\\''z'", "a\\b $x `y`'z"),
    ("'line1\nline2'", "line1\nline2"),
])
def test_bash_dequotes_the_eval_word(word: str, value: str) -> None:
    wrapper = f"source /s 2>/dev/null || true && eval {word} < /dev/null && pwd -P >| /tmp/c"
    assert word_after(wrapper, "&& eval ") == word
    assert dequote(word) == value


@pytest.mark.parametrize("word", ["$(touch /tmp/x)", "\"$HOME\"", "`id`", "*", "~", "{a,b}", "'open"])
def test_a_word_that_could_expand_is_refused_not_run(word: str) -> None:
    with pytest.raises(DequoteError):
        word_after(f"x && eval {word} < /dev/null", "&& eval ")


def test_a_wrapper_without_the_snapshot_is_read_too() -> None:
    from transports.capture import program_identity

    launcher = Exec(seq=1, pid=10, parent=None, forked_at=None, exe=None, argv=(b"claude",), argv_complete=True)
    shell = Exec(seq=2, pid=11, parent=10, forked_at=1, exe=program_identity("bash"), argv=(
        b"/bin/bash", b"-c", b"eval 'echo '\\''a b'\\' < /dev/null && pwd -P >| /tmp/c"), argv_complete=True)
    r_shell = Exec(seq=3, pid=12, parent=11, forked_at=2, exe=program_identity("bash"), argv=(
        b"/bin/bash", b"-c", b"true && eval forged"), argv_complete=True)
    final = eval_shell([launcher, r_shell, shell])
    assert final.exec is shell and final.received == "echo 'a b'" and final.note is None


def test_no_wrapper_from_the_harness_means_no_received() -> None:
    launcher = Exec(seq=1, pid=10, parent=None, forked_at=None, exe=None, argv=(b"claude",), argv_complete=True)
    final = eval_shell([launcher])
    assert final.exec is None and final.received is None and "no bash" in (final.note or "")
    assert eval_shell([]).received is None
