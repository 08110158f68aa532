"""The `claude-code` route: the real Claude Code 2.1.197, driven offline by the courier inside the sandbox.

Each harness run costs about a second (three under load), so the file runs fourteen: the control task's reference
solution, four hostile commands, ``set -e``, a command that attacks the courier, and the crash rule attacked by
a model: R that segfaults the harness, and a first turn that plants a hook or a ``~/.bashrc`` to forge the second
turn's record or make it a harness error (two runs each). ``received`` is the
wrapper's ``eval`` word as bash dequotes it, read from the kernel's exec trace (docs/harnesses.md).
"""

from __future__ import annotations

import json
import shlex

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
ATTACK = Limits(timeout_s=40)  # the crash-rule attacks below, some of them two turns in one sandbox
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


@HARNESS
def test_r_that_segfaults_claude_code_stays_a_model_outcome() -> None:
    """Attack on the crash rule on the route it was written for: R (run by Claude Code's ``eval``) writes a wrong
    file and kills Claude Code with SIGSEGV, hoping its failed run is excluded as a harness crash. Safe behaviour:
    a shell ran, so the record keeps its failing verdict, received == R, and no harness error."""
    command = "echo wrong > out.txt; kill -SEGV $PPID"
    r = rec("claude-code", command, ATTACK)
    assert r.error is None, r.error
    assert r.received == command and not r.verdict.passed


@HARNESS
def test_a_hook_one_turn_plants_cannot_forge_the_next_turn_s_received() -> None:
    """Attack (a record that lies, across turns): R1 writes a user-settings hook; R2 = ``echo wrong > out.txt``.
    Claude Code runs the hook (``/bin/sh -c HOOK``, its own child) before the Bash tool; the hook writes
    ``hello world`` into out.txt, then ``exec bash -c "exit 2 && eval 'R2'"``: the first bash child of the harness
    with ``&& eval`` (so it is taken as the final shell) that never evaluates R2, and its exit 2 blocks the tool
    call, so no real wrapper ever runs. Safe behaviour: turn 2's record never says ``received == R2`` with a pass
    when R2 (which writes the wrong bytes) did not run: only the harness's real Bash-tool shell may count (or a
    harness hook is refused/noted)."""
    from transports.execute import chain

    r2 = "echo wrong > out.txt"
    hook = "echo 'hello world' > out.txt; exec bash -c " + shlex.quote("exit 2 && eval " + shlex.quote(r2))
    settings = json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
                                                                                   "command": hook}]}]}})
    r1 = "mkdir -p ~/.claude && printf '%s' " + shlex.quote(settings) + " > ~/.claude/settings.json"

    async def both():
        async with chain(TASK, "claude-code", limits=ATTACK) as run:
            return await run(r1), await run(r2)

    first, second = anyio.run(both)
    assert first.received == r1 and first.error is None
    assert not (second.received == r2 and second.verdict.passed), (second.received, second.received_note,
                                                                    second.wrapper)


@HARNESS
def test_a_hook_one_turn_plants_cannot_make_the_next_turn_a_harness_error() -> None:
    """Attack on the crash rule (R gets its own bad run excluded): R1 writes ``~/.claude/settings.json`` with a
    PreToolUse hook that sends SIGSEGV to Claude Code (the hook's parent); R2 = ``echo wrong > out.txt``. Safe
    behaviour: a crash caused by something the model left in the sandbox is not "the harness failing on this
    machine": turn 2 stays a model outcome (failing), never ``error: harness: ... died of SIGSEGV``."""
    from transports.execute import chain

    settings = json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
                                                                                   "command": "kill -SEGV $PPID"}]}]}})
    r1 = "mkdir -p ~/.claude && printf '%s' " + shlex.quote(settings) + " > ~/.claude/settings.json"

    async def both():
        async with chain(TASK, "claude-code", limits=ATTACK) as run:
            return await run(r1), await run("echo wrong > out.txt")

    first, second = anyio.run(both)
    assert first.received == r1 and first.error is None
    assert second.error is None, second.error
    assert not second.verdict.passed


@HARNESS
def test_a_bashrc_one_turn_plants_cannot_make_the_next_turn_a_harness_error() -> None:
    """The crash-rule attack again, without hooks (they are off): R1 plants a ``~/.bashrc`` that sends SIGSEGV to
    Claude Code from the shells it starts for its snapshot, before its Bash tool's shell. Safe behaviour: in a
    sandbox where a command already ran, a harness crash is kept as the turn's outcome (with a note), never a
    harness error dropped from the rates."""
    from transports.execute import chain

    r1 = "echo 'case \"$(readlink /proc/$PPID/exe)\" in *claude*) kill -SEGV $PPID;; esac' >> ~/.bashrc"

    async def both():
        async with chain(TASK, "claude-code", limits=ATTACK) as run:
            return await run(r1), await run("echo wrong > out.txt")

    first, second = anyio.run(both)
    assert first.received == r1 and first.error is None
    assert second.error is None and not second.verdict.passed, (second.error, second.exit_code)
    if second.received is None:  # the harness died before its shell: the note says it is kept
        assert "earlier command in this sandbox" in (second.received_note or ""), second.received_note
