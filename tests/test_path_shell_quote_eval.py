"""`shell-quote-eval`: real node with the real npm shell-quote, inside the sandbox; `received` is what a
capture program in bash's place got, pinned against the tracker reports (#7387, #32879)."""

from __future__ import annotations

import anyio
import pytest

from tasks.load import get_task
from transports.execute import execute
from transports.paths.npm_cache import package_dir
from transports.paths.shell_quote_eval import PACKAGE, VERSION, ShellQuoteEval
from transports.sandbox import Limits, Sandbox

from path_capture import capture_shell, invocations

pytestmark = pytest.mark.needs("node", "npm", "shell-quote")  # skipped naming it locally, failed under CI=true

LIMITS = Limits(timeout_s=10)
TASK = get_task("file-write/control")


def captured(command: str, safe: bool = False) -> tuple[str | None, list[list[str]], str | None]:
    """(received, what the program in bash's place was handed, transport error); nothing runs R."""
    async def go():
        with Sandbox.create(TASK, LIMITS) as box:
            d = await ShellQuoteEval(safe, capture_shell(box)).deliver(command, box)
            return d.received, invocations(box), d.transport_error
    return anyio.run(go)


def rec(transport: str, command: str):
    return anyio.run(lambda: execute(TASK, transport, command, limits=LIMITS))


@pytest.mark.parametrize(("command", "rebuilt"), [
    # #7387: the variable R sets is expanded by parse against the environment, where it is unset
    ("CLEAN_DIR=/some/path && rm -rf ${CLEAN_DIR}/* && ./my_program --flag=value 2>&1 | head -200",
     "CLEAN_DIR=/some/path && rm -rf /* && ./my_program --flag=value 2>& 1 | head -200"),
    ("MYVAR=hello && echo ${MYVAR} | cat", "MYVAR=hello && echo '' | cat"),
    # #32879: brace group quoted, heredoc operator split and lines merged, $$ lost
    ("true | true; { echo inside braces; }", "true | true ; '{' echo inside braces ; '}'"),
    ("bash <<'MY-MARKER'\necho hi | cat\nMY-MARKER", "bash < < MY-MARKER echo hi | cat MY-MARKER"),
    ('true | true; echo "PID=$$"', "true | true ; echo PID="),
    # quotes dropped, then each token re-quoted on its own; a glob stays bare; a comment keeps the rest
    ("grep -c 'a b' \"$HOME/x y\" *.txt | sort # note\necho 'z'",
     "grep -c 'a b' '/sandbox/home/x y' *.txt | sort # note\necho 'z'"),
])
def test_received_is_what_bash_got_from_the_real_rebuild(command: str, rebuilt: str) -> None:
    received, calls, error = captured(command)
    assert error is None
    assert received == rebuilt
    assert calls == [["-c", rebuilt]]


def test_without_a_pipe_the_command_is_handed_on_unchanged() -> None:
    command = "D=/x && echo ${D} \"$$\" { a; } > out.txt"
    received, calls, _ = captured(command)
    assert received == command and calls == [["-c", command]]


def test_parse_sees_the_sandbox_environment_never_the_harness_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QB_TEST_API_KEY", "sk-secret")
    received, _, _ = captured("echo $QB_TEST_API_KEY $HOME $LANG | cat")
    assert received == "echo '' /sandbox/home C.UTF-8 | cat"


def test_the_rebuild_damages_a_real_run() -> None:
    r = rec("shell-quote-eval", "true | true; { echo inside braces; } > out.txt")
    assert r.damaged and "{: command not found" in r.stderr.text and not r.verdict.passed
    r = rec("shell-quote-eval", "D=out.txt && echo hello world | cat > ${D}")
    assert r.received == "D=out.txt && echo hello world | cat > ''"
    assert "No such file or directory" in r.stderr.text


def test_a_parse_error_is_a_transport_error_and_nothing_runs() -> None:
    r = rec("shell-quote-eval", "echo ${} | cat > out.txt")
    assert r.transport_error == "shell-quote-eval: shell-quote parse: Bad substitution: ${}"
    assert r.exit_code is None and r.received is None


def test_the_fix_hands_r_on_unchanged() -> None:
    command = "MYVAR=hello && echo \"${MYVAR} $$\" | cat > out.txt; { echo x; } | cat"
    received, calls, _ = captured(command, safe=True)
    assert received == command and calls == [["-c", command]]


def test_shell_quotes_own_quote_is_not_a_fix_for_bash_c() -> None:
    """Why the fix does not eval quote(['bash', '-c', R]): shell-quote writes ``!`` as ``\\!`` inside double
    quotes, and a non-interactive bash keeps the backslash."""
    js = ("const q=require(process.argv[1]+'/node_modules/shell-quote').quote;"
          "process.stdout.write(q(['printf', '%s', \"it's done!\"]))")

    async def go():
        prefix = package_dir(PACKAGE, VERSION)
        with Sandbox.create(TASK, LIMITS) as box:
            inside = box.mount_point(prefix, "qb-npm")
            quoted = await box.run(["node", "-e", js, inside], binds=((prefix, inside),))
            ran = await box.run(["bash", "-c", quoted.stdout.text])
            return quoted.stdout.text, ran.stdout.text
    quoted, printed = anyio.run(go)
    assert quoted == "printf %s \"it's done\\!\""
    assert printed == "it's done\\!"


def test_a_cache_that_cannot_be_made_is_a_one_line_harness_error(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's failure, not the path's: the record's error, never a transport error or damage."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    r = rec("shell-quote-eval", "echo a | cat > out.txt")
    assert r.error is not None and "\n" not in r.error
    assert r.error.startswith(f"harness: shell-quote-eval: cannot create the npm cache {blocker}/quotebench")
    assert r.transport_error is None and r.exit_code is None and not r.damaged
    assert rec("shell-quote-eval-safe", "echo hello world | cat > out.txt").verdict.passed  # the fix: bash alone
