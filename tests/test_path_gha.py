"""`gha-run` / `gha-block`: the workflow text through PyYAML, ``${{ }}`` substituted as the runner does, the
script run as ``bash -e FILE``; `received` checked against the script a capture program in bash's place
was started on, and the fixes' encodings checked the same way."""

from __future__ import annotations

import anyio
import pytest
import yaml

from tasks.load import get_task
from transports.execute import execute
from transports.paths.gha import Gha, first_step, workflow
from transports.paths.gha_expr import ExpressionError, neutralise, substitute
from transports.sandbox import Limits, Sandbox

from path_capture import capture_shell, invocations, script_of

LIMITS = Limits(timeout_s=10)
TASK = get_task("file-write/control")


def rec(transport: str, command: str):
    return anyio.run(lambda: execute(TASK, transport, command, limits=LIMITS))


def captured(style: str, command: str, safe: bool = False):
    """(delivery, the capture program's arguments, the script text it was started on); nothing runs R."""
    async def go():
        with Sandbox.create(TASK, LIMITS) as box:
            d = await Gha(style, safe, capture_shell(box)).deliver(command, box)
            calls = invocations(box)
            return d, calls, script_of(box)
    return anyio.run(go)


@pytest.mark.parametrize(("style", "command", "script"), [
    ("run", 'echo "hello world" > out.txt', 'echo "hello world" > out.txt'),
    ("run", "echo x # y > out.txt", "echo x"),                              # ' #' starts a YAML comment
    ("run", "echo a\n          b > out.txt", "echo a b > out.txt"),          # an indented line is folded in
    ("run", "echo ${{ github.repository }} > out.txt", "echo quotebench/fixture > out.txt"),
    ("block", "echo a: b # c", "echo a: b # c\n"),                          # clip chomping adds a newline
    ("block", "printf '%s' \"${{ github.x }}\" \n\n", "printf '%s' \"\" \n"),  # ... and drops extra ones
])
def test_received_is_the_script_bash_e_was_started_on(style: str, command: str, script: str) -> None:
    d, calls, text = captured(style, command)
    assert d.transport_error is None and d.received == script
    assert len(calls) == 1 and calls[0][0] == "-e" and text == script


@pytest.mark.parametrize(("style", "command", "error"), [
    ("run", "echo a: b > out.txt", "gha-run: YAML: mapping values are not allowed here (line 6, column 20)"),
    ("run", "*x > out.txt", "gha-run: YAML: found undefined alias 'x' (line 6, column 14)"),
    ("run", "'q' > out.txt", "gha-run: YAML: while scanning a block scalar"),      # '>' after the quoted scalar
    ("block", "  indented\nnot > out.txt", "gha-block: YAML: while parsing a block mapping expected <block end>"),
    ("block", "printf '\x1b[1m' > out.txt", "gha-block: YAML: unacceptable character #x001b"),
    ("block", "echo ${{ github.sha > out.txt", "gha-block: the expression at offset 5 is not closed with }}"),
    ("block", "echo ${{ foo }} > out.txt", "gha-block: unrecognized named-value: 'foo'"),
    ("run", "[" * 5000, "gha-run: YAML: nesting too deep"),
])
def test_a_step_that_cannot_run_is_a_transport_error(style: str, command: str, error: str) -> None:
    r = rec(f"gha-{style}", command)
    assert r.transport_error is not None and r.transport_error.startswith(error), r.transport_error
    assert r.exit_code is None and r.received is None and "\n" not in r.transport_error


def test_a_shell_the_text_adds_to_the_step_is_refused_unless_documented() -> None:
    r = rec("gha-run", "echo hi\n        shell: python {0}")
    assert r.transport_error == "gha-run: the step names a shell not run here: 'python {0}'"
    d, calls, _ = captured("run", "echo hi > out.txt\n        shell: bash")
    assert calls[0][:4] == ["--noprofile", "--norc", "-eo", "pipefail"] and d.received == "echo hi > out.txt"


def test_errexit_stops_the_default_step_and_the_fix_names_a_shell_without_it() -> None:
    command = "false; echo ok"
    stopped, fixed = rec("gha-block", command), rec("gha-block-safe", command)
    assert (stopped.exit_code, stopped.stdout.text) == (1, "")
    assert (fixed.exit_code, fixed.stdout.text) == (0, "ok\n") == (rec("raw", command).exit_code, "ok\n")


@pytest.mark.parametrize("command", [
    "echo ${{ github.sha }} '${{' }} ${{{ $${{", "  leading\n\tTAB\n   \n", "a: b # c\n- d\n---\n...", "",
    "\n\n", "cr\r\nlf", "esc \x1b[0m del \x7f nel \x85 ls \u2028 bom \ufeff emoji \U0001f600", "'\"\\",
])
def test_the_fix_delivers_r_exactly_to_bash_without_errexit(command: str) -> None:
    for style in ("run", "block"):
        d, calls, text = captured(style, command, safe=True)
        assert d.transport_error is None and d.received == command
        assert len(calls) == 1 and len(calls[0]) == 1 and text == command  # bash FILE: no -e


def test_the_fix_workflow_is_valid_yaml_for_any_parser_reading_the_same_text() -> None:
    command = "x: ${{ y }}\n  z"
    step, _ = first_step(workflow(command, "block", safe=True))
    assert step == {"shell": "bash {0}", "run": neutralise(command)}
    assert yaml.safe_load(workflow(command, "block", safe=True))["jobs"]["qb"]["steps"][0]["run"] == neutralise(command)


@pytest.mark.parametrize(("run", "script"), [
    ("${{ 'it''s' }}|${{ '}}' }}|${{ 1 }}|${{ 0x1F }}|${{ 2.50 }}|${{ true }}|${{ null }}|", "it's|}}|1|31|2.5|true||"),
    ("${{ github.ref }} ${{ GitHub.Event_Name }} ${{ github['actor'] }} ${{ github.nope }}",
     "refs/heads/main push quotebench "),
    ("${{ secrets.TOKEN }}|${{ env.HOME }}|${{ contains(github.ref, 'main') }}|${{ 1 == 1 }}", "|||"),
])
def test_expressions_evaluate_in_the_documented_subset(run: str, script: str) -> None:
    assert substitute(run) == script


@pytest.mark.parametrize("run", ["${{ }}", "${{ a }}", "${{ github.ref", "${{ 'open }}", "${{ (1 }}", "${{ a;b }}"])
def test_a_malformed_expression_fails_the_step(run: str) -> None:
    with pytest.raises(ExpressionError):
        substitute(run)
