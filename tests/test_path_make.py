"""`make`: real GNU make inside the sandbox; `received` checked against a capture program run as make's
SHELL on the same Makefile, and make-safe's constructions checked the same way."""

from __future__ import annotations

import anyio
import pytest

from tasks.load import get_task
from transports.execute import execute
from transports.paths.make_recipe import MakeRecipe, one_line_exact
from transports.sandbox import Limits, Sandbox

from path_capture import capture_program, invocations, script_of

pytestmark = pytest.mark.needs("make", "dash")

LIMITS = Limits(timeout_s=10)
TASK = get_task("file-write/control")


def rec(transport: str, command: str):
    return anyio.run(lambda: execute(TASK, transport, command, limits=LIMITS))


def make_with_capture(makefile: str, script: str | None = None) -> tuple[list[list[str]], str | None, int | None]:
    """Real make on ``makefile`` with the capture program as SHELL: (its invocations, the script it was
    handed, make's exit code). ``{script}`` in the makefile names a file holding ``script``."""
    async def go():
        with Sandbox.create(TASK, LIMITS) as box:
            cap = capture_program(box, "sh")
            path = box.meta / "script.sh"
            if script is not None:
                path.write_text(script)
            (box.meta / "setup.mk").write_text(f"override SHELL := {cap}\n")
            (box.meta / "Makefile").write_text(makefile.replace("{script}", box.inside(path)))
            ran = await box.run(["make", "-f", box.inside(box.meta / "setup.mk"), "-f", box.inside(box.meta / "Makefile")])
            return invocations(box), script_of(box), ran.exit_code
    return anyio.run(go)


@pytest.mark.parametrize(("command", "first", "shells"), [
    ('echo "hello world" > out.txt', 'echo "hello world" > out.txt', 1),
    # make expands $H (empty), $$, and ${TZ}, a make variable imported from the environment
    ("echo $HOME $$ ${TZ} > out.txt", "echo OME $ UTC > out.txt", 1),
    ("  @-echo quiet > out.txt", "echo quiet > out.txt", 1),            # blanks and prefix characters stripped
    ("cd /tmp\n\ttouch x", "cd /tmp", 2),                               # a tabbed line is a second recipe line
])
def test_received_is_the_first_recipe_text_make_hands_the_shell(command: str, first: str, shells: int) -> None:
    calls, _, _ = make_with_capture(MakeRecipe().makefile(command, None))
    assert [c[0] for c in calls] == ["-c"] * shells and calls[0][1] == first
    r = rec("make", command)
    assert r.received == first and r.shell == "dash"
    assert (r.received_note is not None) == (shells > 1)


def test_a_newline_ends_the_recipe_and_nothing_runs() -> None:
    r = rec("make", "for i in 1 2; do\n  echo $i > out.txt\ndone")
    assert r.received is None and r.received_note == "make ran no shell"
    assert r.exit_code == 2 and "missing separator" in r.stderr.text
    assert not (r.transport_error or r.verdict.passed)


def test_make_reports_any_failure_as_2_and_a_dash_prefix_hides_it() -> None:
    assert rec("make", "exit 7").exit_code == 2
    hidden = rec("make", "-exit 7")
    assert hidden.received == "exit 7" and hidden.exit_code == 0 and "(ignored)" in hidden.stderr.text
    assert MakeRecipe.route_exit_code(7) == 2 and MakeRecipe.route_exit_code(0) == 0


def test_a_make_function_in_r_runs_a_shell_before_the_recipe() -> None:
    r = rec("make", "echo $(shell echo made) > out.txt")
    assert r.received == "echo made"  # the first shell make started: the function's, then the recipe's
    assert r.received_note is not None and "2 shells" in r.received_note


@pytest.mark.parametrize("command", ['printf "%s\\n" "$HOME" $$ \'$(x)\' > out.txt', "echo a \\\\ b # c\t"])
def test_the_fix_doubles_dollars_on_a_line_make_leaves_alone(command: str) -> None:
    assert one_line_exact(command)
    calls, _, code = make_with_capture(MakeRecipe(safe=True).makefile(command, None))
    assert calls == [["-c", command]] and code == 0
    assert rec("make-safe", command).received == command


@pytest.mark.parametrize("command", ["for i in 1 2; do\n  echo $i\ndone > out.txt", "  -x", "@echo a", "echo \\", ""])
def test_the_fix_runs_anything_else_from_a_script_file(command: str) -> None:
    assert not one_line_exact(command)
    calls, script, _ = make_with_capture(MakeRecipe(safe=True).makefile(command, "{script}"), command)
    assert len(calls) == 1 and calls[0][0] == "-c" and calls[0][1].startswith("exec /bin/sh /")
    r = rec("make-safe", command)
    assert r.received == command and r.received_note is not None and "exec /bin/sh" in r.received_note


def test_oneshell_is_not_exact_with_a_posix_shell() -> None:
    """Why the fix does not use .ONESHELL: make still strips blanks and @-+ from every line, and a tab."""
    body = "cat <<EOF\n  indented\n-dash\n\ttab\nEOF"
    makefile = ".ONESHELL:\nall:\n" + "".join("\t" + line + "\n" for line in body.split("\n"))
    calls, _, _ = make_with_capture(makefile)
    assert calls == [["-c", "cat <<EOF\nindented\ndash\ntab\nEOF"]]
