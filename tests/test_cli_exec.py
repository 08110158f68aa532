"""`quotebench exec` as a newcomer reads it: invisible changes made visible, (damaged)
on its own line, the route's rule and intermediate text, several transports side by side, a scratch run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from qb_client.records.damage import cell, char_diff, visible
from qb_client.records.route import artifacts, rules_for

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]


def qb(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([*QB, *args], capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)


def rows(stdout: str) -> list[tuple[str, str]]:
    """The label/value rows of an exec record view, trailing padding removed."""
    return [(m.group(1).strip(), m.group(2).rstrip()) for m in re.finditer(r"^(\S*(?: \S+)?) {2,}(.*)$", stdout, re.M)]


# ---------------------------------------------------------------- the pure parts


def test_visible_marks_what_a_terminal_hides() -> None:
    assert visible("echo x\n") == "echo x↵"            # a trailing newline is a mark, not a blank line
    assert visible("a\tb\r") == "a→b␍"
    assert visible("a  \nb") == "a··↵\nb"               # blanks at a line's end; the line still breaks
    assert visible("a b") == "a b"                      # blanks inside a line stay blanks
    assert visible("\x1b[2J") == "\\x1b[2J"            # terminal controls are escaped as everywhere


def test_char_diff_shows_lost_newline_tab_and_blanks() -> None:
    assert char_diff("echo hi\n", "echo hi").plain == "echo hi[-↵-]"
    assert char_diff("a\tb", "a b").plain == "a[-→-]{+·+}b"
    assert char_diff('echo "a b"', "echo a").plain == 'echo [-"-]a[-·b"-]'
    assert cell("x" * 60, 10) == "x" * 9 + "…"
    assert cell("a b\tc  \n") == "a b→c··↵" and cell("a  ") == "a··"


def test_rules_and_artifacts_come_from_the_route() -> None:
    assert any("tmux #1849" in r for r in rules_for("tmux", "echo two;"))
    assert rules_for("tmux-safe", "echo two;") == []
    assert rules_for("raw", 'echo "x" $HOME') == []
    assert artifacts("nested", 'echo "a b"') == [("outer", 'bash -c "echo "a b""')]
    assert artifacts("ssh", "true") == [("outer", 'ssh qb-remote "true"')]
    assert artifacts("make", "echo $HOME") == [("makefile", "all:\n\techo $HOME\n")]
    assert artifacts("gha-run", "true")[0][0] == "workflow"
    assert artifacts("json-correct+nested", "x") == [("decoded", "x"), ("outer", 'bash -c "x"')]
    assert artifacts("raw", "true") == []
    assert artifacts("docker-sh", "true") == [("outer", 'docker exec CTR sh -c "true"')]
    assert artifacts("shell-quote-eval", "a | b") == []  # the rebuild needs node: only a run's received says
    assert artifacts("shell-quote-eval", "a | b", "a | b") == [("rebuilt", "a | b")]


# ---------------------------------------------------------------- the command


def test_exec_shows_the_diff_the_rule_and_damaged_on_its_own_line() -> None:
    r = qb("exec", "--task", "file-write/control", "--transport", "nested", "--command", 'echo "hello world" > out.txt')
    assert r.returncode == 1, r.stderr
    got = rows(r.stdout)
    labels = [k for k, _ in got]
    assert ("outer", 'bash -c "echo "hello world" > out.txt"') in got
    assert ("received", "echo hello") in got
    assert labels[labels.index("received") + 1] == "" and got[labels.index("received") + 1][1] == "(damaged)"
    assert ("diff", 'echo [-"-]hello[-·world"·>·out.txt-]') in got
    assert any(k == "rule" and "ends the outer double quotes" in v for k, v in got)


def test_exec_a_lost_trailing_newline_is_a_mark_not_a_blank_line() -> None:
    r = qb("exec", "--task", "file-write/control", "--transport", "gha-block", "--command", "true\n\n")
    got = rows(r.stdout)
    assert ("command", "true↵") in got and ("", "↵") in got  # R's two newlines: two marks, no blank line
    assert ("received", "true↵") in got and ("diff", "true↵[-↵-]") in got
    assert "\n\n" not in r.stdout


def test_exec_several_transports_side_by_side() -> None:
    r = qb("exec", "--task", "file-write/control", "--transports", "raw,nested", "--command",
           'echo "hello world" > out.txt')
    assert r.returncode == 1, r.stderr
    table = [line for line in r.stdout.splitlines() if line.startswith("│")]
    assert len(table) == 2
    assert re.search(r"│ raw +│ echo \"hello world\" > out\.txt +│ 0 +│ PASS +│ no +│", table[0]), table[0]
    assert re.search(r"│ nested +│ echo hello +│ 0 +│ FAIL +│ yes +│", table[1]), table[1]
    docs = json.loads(qb("exec", "--task", "file-write/control", "--transports", "raw,nested", "--command", "true",
                         "--json").stdout)
    assert [d["transport"] for d in docs] == ["raw", "nested"]


def test_exec_without_a_task_runs_in_an_empty_directory_and_judges_nothing() -> None:
    r = qb("exec", "--transport", "raw", "--command", "ls -A | wc -l; echo hi")
    assert r.returncode == 0, r.stderr
    got = rows(r.stdout)
    assert ("stdout", "0") in got and ("", "hi") in got and ("exit", "0") in got
    assert "verdict" not in r.stdout and "scratch directory" in r.stdout
    doc = json.loads(qb("exec", "--transport", "raw", "--command", "exit 3", "--json").stdout)
    assert doc["verdict"] is None and doc["task_id"] is None and doc["exit_code"] == 3


@pytest.mark.parametrize("args, expect", [
    (["--command", "true"], "give exactly one of --transport NAME, --transports A,B,C"),
    (["--transport", "raw", "--transports", "raw", "--command", "true"], "give exactly one of --transport NAME"),
    (["--transport", "raw", "--command", "true", "--timeout", "0"], "--timeout must be a positive number"),
])
def test_exec_bad_options_are_one_line(args: list[str], expect: str) -> None:
    r = qb("exec", *args)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and expect in r.stderr, r.stderr


def test_exec_timeout_reaches_the_sandbox() -> None:
    doc = json.loads(qb("exec", "--transport", "raw", "--command", "sleep 5", "--timeout", "0.5", "--json").stdout)
    assert doc["timed_out"] and doc["limit_hit"] == "time" and doc["timing"]["exec_ms"] < 4000
