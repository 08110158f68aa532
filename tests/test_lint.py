"""The lint's predictions, its hazards and safe texts, its API and its command line, on inputs chosen to
fail a near-miss: each expected ``received`` is the exact text bash hands the final shell (the execution
oracle, tests/test_lint_oracle.py, holds the whole corpus to the real routes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probes import cli, results_file
from qb_client.records.route import rules_for
from transports.lint import LintError, lint

ROOT = Path(__file__).resolve().parent.parent
ENV = {"HOME": "/sandbox/home", "PATH": "/usr/bin:/bin"}


@pytest.mark.parametrize("route, command, received", [
    ("nested", "echo hi > out.txt", "echo hi > out.txt"),
    ("nested", 'echo "a b" > out.txt', "echo a"),
    ("nested", "printf 'a\\\\b\\n'", "printf 'a\\b\\n'"),
    ("nested", "echo \\q \\$x", "echo \\q $x"),
    ("nested", "echo it's", "echo it's"),
    ("nested", "echo $'t'", "echo $'t'"),
    ("nested-single", "echo it''s", "echo its"),
    ("nested-single", "echo 'a b'", "echo a"),
    ("ssh", 'echo "a b" > out.txt', "echo a b > out.txt"),
    ("docker-sh", 'echo "x"y', "echo xy"),
    ("json-naive", 'echo \\"a\\"', 'echo "a"'),
    ("shlex-sh", 'echo "a"', "echo a"),
    ("make", "echo $$HOME", "echo $HOME"),
    ("make", "@echo hi", "echo hi"),
    ("gha-block", "echo hi", "echo hi\n"),
    ("raw", "echo hi\n", "echo hi\n"),
])
def test_received_is_the_exact_text_the_final_shell_gets(route: str, command: str, received: str) -> None:
    p = lint(command, route)
    assert p.known and p.received == received
    assert p.damaged is (received != command)


def test_a_variable_expands_only_where_the_environment_is_known() -> None:
    without = lint('echo "$HOME"', "nested")
    assert not without.known and without.damaged is True and without.received is None
    assert "environment is not known" in (without.unknown or "")
    known = lint('echo "$HOME" $UNSET', "nested", env=ENV)
    assert known.known and known.received == "echo /sandbox/home "


@pytest.mark.parametrize("command, why", [
    ('echo "$(date)"', "command substitution"),
    ("echo `id`", "backtick"),
    ('echo "$$"', "a value bash sets at run time"),
    ('echo "x *.txt"', "pathname expansion"),
    ('echo "${x:-d}"', "operator"),
])
def test_what_needs_a_run_is_unknown_but_surely_damaged(command: str, why: str) -> None:
    p = lint(command, "nested", env=ENV)
    assert not p.known and p.received is None and p.damaged is True and why in (p.unknown or "")


def test_a_split_paste_is_damaged_and_received_is_the_first_command() -> None:
    p = lint('echo a" & echo "b', "nested")
    assert p.split and p.damaged and p.received == "echo a"
    later = lint('echo a"; env bash -c "x', "nested")  # a later command could exec a shell in place
    assert later.split and later.damaged is True and not later.known


def test_a_syntax_error_on_the_first_line_runs_nothing() -> None:
    p = lint('echo "a', "nested")
    assert p.known and p.received is None and p.damaged is True and not p.split
    assert lint("a'", "nested-single").received is None


def test_text_no_shell_argument_can_carry_is_a_predicted_transport_error() -> None:
    for command in ("echo a\x00b", "echo \udcff"):
        for route in ("raw", "nested", "ssh", "make", "gha-run", "tmux", "json-naive+ssh"):
            p = lint(command, route)
            assert p.transport_error is not None and p.damaged is True and p.received is None, route
    long = lint("x" * 131072, "raw")
    assert long.transport_error is not None and "longer than the kernel allows" in long.transport_error
    assert lint("x" * 131072, "tempscript").damaged is False


def test_routes_without_a_static_model_say_unknown_never_a_guess() -> None:
    for route in ("gemini-cli", "template:docker exec c sh -c \"{R}\""):
        p = lint("echo hi", route)
        assert not p.known and p.damaged is None and p.unknown
    assert lint("echo hi", "claude-code").received == "echo hi"
    assert lint("printf '\\u0041'", "claude-code").damaged is True  # Claude Code decodes \uXXXX itself
    assert lint("/sandbox/work/run.sh", "openai-agents").damaged is None
    assert lint("echo a | tr a b", "shell-quote-eval").damaged is None
    assert lint("echo a", "shell-quote-eval").damaged is False


def test_hazards_are_the_spans_with_the_rule_exec_prints() -> None:
    command = 'echo "a" $b'
    p = lint(command, "nested")
    assert [(h.start, h.end, h.kind) for h in p.hazards] == [(5, 6, "double quote"), (7, 8, "double quote"),
                                                             (9, 10, "dollar")]
    assert {h.rule for h in p.hazards} == set(rules_for("nested", command))
    assert lint("echo ok", "nested").hazards == []


@pytest.mark.parametrize("route, command", [
    ("nested", 'echo "a b" `x` $y \\ \\\\'), ("ssh", "-V"), ("ssh", 'printf "%s" "$HOME"'),
    ("nested-single", "echo 'it''s'"), ("docker-sh", 'a"b'), ("shlex-sh", 'a "b\\" c'),
    ("json-naive", 'say "hi"\n\t\\'), ("json-naive+ssh", 'echo "x" $y'), ("make", "echo $$x $HOME"),
    ("gha-run", "echo a: b # c\nnext ${{ x }}"),
])
def test_the_safe_text_is_predicted_to_arrive_as_r(route: str, command: str) -> None:
    p = lint(command, route, env=ENV)
    assert p.damaged is not False and p.safe is not None and p.safe.how == "escaped"
    again = lint(p.safe.text, route, env=ENV)  # type: ignore[arg-type]
    assert again.known and again.received == command and not again.split and again.transport_error is None


def test_where_no_text_survives_the_safe_delivery_is_the_twin() -> None:
    assert (lint("echo hi!", "tmux").safe.how, lint("echo hi!", "tmux").safe.transport) == ("script", "tmux-safe")
    block = lint("printf x", "gha-block").safe
    assert block.how == "script" and block.transport == "gha-block-safe" and block.text is None
    assert lint("echo a\necho b", "make").safe.transport == "make-safe"
    assert lint("echo hi", "nested").safe.how == "as-is"


def test_bad_input_is_one_line_and_no_traceback() -> None:
    with pytest.raises(LintError, match="must be text"):
        lint(b"echo", "nested")  # type: ignore[arg-type]
    with pytest.raises(LintError, match="unknown transport 'nope'") as info:
        lint("echo", "nope")
    assert "\n" not in str(info.value)
    with pytest.raises(LintError, match="longer than"):
        lint("x" * (10 << 20), "nested")


@pytest.mark.parametrize("command", ["$(" * 200_000, '"' * 500_001, "`" * 300_000, "a" * 1_000_000,
                                     "echo " + "x " * 400_000, "{" * 1_000_000, "'" + "b" * 999_000 + "'"])
def test_hostile_texts_end_in_bounded_time(command: str) -> None:
    for route in ("nested", "nested-single", "ssh", "make", "tmux", "gha-run", "json-naive", "shlex-sh"):
        p = lint(command, route)
        assert p.damaged in (True, False, None)


def test_the_library_api_starts_nothing() -> None:
    code = ("import sys, threading; import quotebench as q; p = q.lint('echo \"a b\"', 'ssh'); "
            "import os; print(p.received, q.deliver('echo \"a b\"', 'ssh').text, threading.active_count(), "
            "'mcp' in sys.modules, os.listdir(f'/proc/{os.getpid()}/task') == [str(os.getpid())])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["echo", "a", "b", 'echo', '\\"a', 'b\\"', "1", "False", "True"]


# ---------------------------------------------------------------- the command line


def test_lint_command_exit_status_follows_shellcheck(capsys, monkeypatch) -> None:
    code, out, _ = cli(capsys, monkeypatch, "lint", "--transport", "nested", "--command", "echo ok")
    assert code == 0 and "(intact)" in out
    code, out, _ = cli(capsys, monkeypatch, "lint", "--transport", "nested", "--command", 'echo "a b"')
    assert code == 1 and "(damaged)" in out and "echo [-\"-]a" in out and "safe" in out
    code, _, _ = cli(capsys, monkeypatch, "lint", "--transport", "gemini-cli", "--command", "echo")
    assert code == 0
    code, _, _ = cli(capsys, monkeypatch, "lint", "--transport", "gemini-cli", "--command", "echo", "--strict")
    assert code == 1


def test_lint_file_gives_one_json_object_per_line_in_order(tmp_path: Path, capsys, monkeypatch) -> None:
    commands = ["echo ok", 'echo "a b"', "", "x\u00e9\n"]
    f = tmp_path / "c.jsonl"
    f.write_text("\n".join(json.dumps(c) for c in commands) + "\n\n")
    code, out, _ = cli(capsys, monkeypatch, "lint", "--transport", "ssh", "--file", str(f), "--json")
    docs = [json.loads(line) for line in out.splitlines()]
    assert code == 1 and [d["command"] for d in docs] == commands
    assert {"command", "transport", "damaged", "received", "hazards", "safe"} <= set(docs[0])
    assert [d["damaged"] for d in docs] == [False, True, True, False]  # "" on ssh: no exec request at all


@pytest.mark.parametrize("content, said", [
    (b'"ok"\n42\n', ":2: a JSON int, not a string"),
    (b'"ok"\nnot json\n', ":2: not a JSON string"),
    (b'"\xff"\n', "not valid UTF-8"),
])
def test_a_bad_file_line_is_named_with_exit_2(tmp_path: Path, capsys, monkeypatch, content: bytes, said: str) -> None:
    f = tmp_path / "c.jsonl"
    f.write_bytes(content)
    code, out, err = cli(capsys, monkeypatch, "lint", "--transport", "nested", "--file", str(f))
    assert code == 2 and said in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_fifo_or_missing_file_is_refused_not_waited_on(tmp_path: Path, capsys, monkeypatch) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path / "missing"):
        code, _, err = cli(capsys, monkeypatch, "lint", "--transport", "nested", "--file", str(path))
        assert code == 2 and str(path) in err and "Traceback" not in err
    code, _, err = cli(capsys, monkeypatch, "lint", "--transport", "nested", "--command", "x", "--env", "novalue")
    assert code == 2 and "NAME=VALUE" in err
    code, _, err = cli(capsys, monkeypatch, "lint", "--transport", "bogus", "--command", "x")
    assert code == 2 and "unknown transport 'bogus'" in err


@pytest.mark.needs("bwrap")
def test_report_lint_sets_predictions_against_measured_damage(tmp_path: Path, capsys, monkeypatch) -> None:
    results = results_file(tmp_path / "results.jsonl", ('echo "hello world" > out.txt', "echo 'hello world' > out.txt", "echo `id`"), ("nested", "raw"))
    code, out, _ = cli(capsys, monkeypatch, "report", str(results), "--lint", "--json")
    rows = {row["transport"]: row for row in json.loads(out)["lint"]}
    assert code == 0
    assert (rows["nested"]["records"], rows["nested"]["damaged"], rows["nested"]["caught"]) == (3, 2, 2)
    assert rows["nested"]["recall"] == 1.0 and rows["nested"]["false_alarm_rate"] == 0.0
    assert rows["nested"]["missed"] == 0 and rows["raw"]["flagged"] == 0
    code, out, _ = cli(capsys, monkeypatch, "report", str(results), "--lint")
    assert "Lint predicted" in out and "recall" in out


def test_bench_lint_gives_throughput_per_transport_beside_the_goal(capsys, monkeypatch) -> None:
    code, out, _ = cli(capsys, monkeypatch, "bench", "lint", "--transports", "raw,nested", "--rounds", "1", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["goal_per_s"] == 20_000 and set(doc["transports"]) == {"raw", "nested"}
    assert doc["sources"] == {"reference": 112, "habits": 112, "hostile": 37}
    for row in doc["transports"].values():
        assert row["commands_per_s"] > 0 and row["within_goal"] == (row["commands_per_s"] >= 20_000)
    code, _, err = cli(capsys, monkeypatch, "bench", "lint", "--transports", "nope")
    assert code == 2 and "unknown transport 'nope'" in err and err.count("\n") == 1
