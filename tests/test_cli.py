"""The command line as a user runs it: a real subprocess, exit codes, one-line errors, clean --json stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]


def qb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*QB, *args], capture_output=True, text=True, timeout=120)


def test_exec_shows_the_phenomenon() -> None:
    cmd = 'echo "hello world" > out.txt'
    nested = qb("exec", "--task", "file-write/control", "--transport", "nested", "--command", cmd, "--json")
    rec = json.loads(nested.stdout)
    assert nested.returncode == 1
    assert rec["received"] == "echo hello" and rec["exit_code"] == 0 and rec["damaged"]
    assert not rec["verdict"]["passed"]
    assert "out.txt: missing" in rec["verdict"]["checks"][0]["detail"]
    raw = qb("exec", "--task", "file-write/control", "--transport", "raw", "--command", cmd, "--json")
    assert raw.returncode == 0 and json.loads(raw.stdout)["verdict"]["passed"]


def test_record_has_every_spec_field() -> None:
    rec = json.loads(qb("exec", "--task", "argv-pass/h1", "--transport", "raw", "--command", "true", "--json").stdout)
    for field in ("run_id", "reply_id", "config", "contract", "transport", "task_id", "family", "tier", "draw", "reply",
                  "command", "received", "damaged", "exit_code", "stdout", "stderr", "timed_out", "transport_error",
                  "verdict", "usage", "timing", "versions"):
        assert field in rec, field
    assert set(rec["config"]) >= {"provider", "model", "effort", "params"}
    assert set(rec["stdout"]) == {"text", "truncated"}
    assert set(rec["verdict"]) == {"passed", "checks"}
    assert set(rec["timing"]) == {"generate_ms", "exec_ms"}
    assert rec["versions"]["suite"].startswith("v1-")


def test_command_file_is_read_verbatim(tmp_path: Path) -> None:
    f = tmp_path / "cmd.sh"
    f.write_bytes(b"printf 'hello world\\n' > out.txt\n\n")
    rec = json.loads(qb("exec", "--task", "file-write/control", "--transport", "raw", "--command-file", str(f),
                        "--json").stdout)
    assert rec["command"] == "printf 'hello world\\n' > out.txt\n\n"
    assert rec["verdict"]["passed"]


@pytest.mark.parametrize("content, expect", [
    (b"echo \xff\xfe > out.txt", "not valid UTF-8"),
    (b"echo a\x00b", "NUL byte at offset 6"),
])
def test_bad_command_files_are_one_line_errors(tmp_path: Path, content: bytes, expect: str) -> None:
    f = tmp_path / "cmd.sh"
    f.write_bytes(content)
    r = qb("exec", "--task", "file-write/control", "--transport", "raw", "--command-file", str(f))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and str(f) in r.stderr and expect in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


@pytest.mark.parametrize("args, expect", [
    (["exec", "--task", "nope/h9", "--transport", "raw", "--command", "x"], "unknown task 'nope/h9'"),
    (["exec", "--task", "file-write/h1", "--transport", "carrier-pigeon", "--command", "x"],
     "unknown transport 'carrier-pigeon' (known: raw, nested"),
    (["exec", "--task", "file-write/h1", "--transport", "ssh+raw", "--command", "x"], "cannot wrap another"),
    (["exec", "--task", "file-write/h1", "--transport", "raw"], "exactly one of --command, --command-file"),
    (["tasks", "show", "file-write/h7"], "unknown task"),
    (["tasks", "check", "--tasks", "zzz*"], "matches no task"),
])
def test_bad_input_exits_2_with_one_line(args: list[str], expect: str) -> None:
    r = qb(*args)
    assert r.returncode == 2, r.stderr
    assert expect in r.stderr and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_tasks_list_and_show_json() -> None:
    tasks = json.loads(qb("tasks", "list", "--json").stdout)
    assert len(tasks) == 56 and set(tasks[0]) == {"id", "family", "tier", "instruction"}
    shown = json.loads(qb("tasks", "show", "json-edit/h2", "--json").stdout)
    for key in ("id", "family", "tier", "instruction", "payload", "fixture", "checks", "solution", "solution_disclosed"):
        assert key in shown


def test_tasks_check_json_for_a_family() -> None:
    r = qb("tasks", "check", "--tasks", "heredoc/*", "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["tasks"] == 4 and doc["ok"] == 4
    assert doc["near_misses"] == doc["near_misses_rejected"] > 0


def test_transports_list() -> None:
    rows = json.loads(qb("transports", "list", "--json").stdout)
    names = [r["name"] for r in rows]
    assert names[:9] == ["raw", "nested", "nested-single", "escaped", "tempscript", "json-naive", "json-correct",
                         "ssh", "ssh-safe"]  # the paper's transports first, then the deployment paths
    assert {"docker-sh", "docker-sh-safe", "shlex-sh", "shlex-sh-safe", "ssh@zsh", "ssh-safe@zsh"} <= set(names)
    for r in rows:
        assert set(r) >= {"name", "boundary", "source", "component", "shell"}
        assert ("fixes" in r) == ("-safe" in r["name"])


def test_bench_reports_ratios_to_bare_bash() -> None:
    """Checked against facts from outside the bench: the suite's size, what `exec` records, this machine."""
    r = qb("bench", "-n", "5", "--no-mcp", "--transports", "raw", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    n_tasks = len(json.loads(qb("tasks", "list", "--json").stdout))
    record = json.loads(qb("exec", "--task", "file-write/control", "--transport", "raw", "--command", "true",
                           "--json").stdout)
    assert doc["isolation"] == record["isolation"] and doc["cores"] == os.cpu_count()
    assert set(doc["transports"]) == {"raw"}
    paths = doc["paths"]  # every deployment path, timed against raw on its own final shell
    assert {"docker-sh", "tmux", "make", "ssh@zsh"} <= set(paths)
    assert paths["docker-sh"]["baseline"] == "raw@dash" and paths["ssh@zsh"]["baseline"] == "raw@zsh"
    assert paths["tmux"]["goal"] == 10.0 and paths["make"]["goal"] == 3.0
    # a sandboxed `true` runs bash -c true and more (the limit wrapper, the sandbox), never less
    assert doc["transports"]["raw"]["exec_ratio"] > 1 and doc["transports"]["raw"]["record_ratio"] > 1
    # every reference solution (raw and disclosed) on raw: the 56 raw ones pass by `tasks check`; 23 of the
    # disclosed ones (those with nothing to escape, or whose escapes survive unquoted) pass too
    assert doc["full_replay"]["executions"] == 2 * n_tasks == 112
    failed = doc["full_replay"]["failed"]
    assert doc["full_replay"]["passed"] == n_tasks + 23, failed
    assert {f["solution"] for f in failed} == {"solution_disclosed"} and len(failed) == n_tasks - 23


def test_replay_records_unrepresentable_replies_as_transport_errors(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    store.write_bytes(b'{"task_id": "file-write/control", "command": "echo \xff > out.txt"}\n'
                      b'{"task_id": "file-write/control", "command": "echo a\\u0000b", "draw": 1}\n'
                      b'{"task_id": "file-write/control", "reply": "```bash\\necho hello world > out.txt\\n```", '
                      b'"draw": 2}\n')
    out = tmp_path / "results.jsonl"
    r = qb("replay", str(store), "--transports", "raw,nested", "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    records = [json.loads(x) for x in out.read_bytes().decode("utf-8").splitlines()]
    assert len(records) == 6
    errors = [x for x in records if x["transport_error"]]
    assert len(errors) == 4 and all(not x["verdict"]["passed"] and x["exit_code"] is None for x in errors)
    assert {x["command"] for x in errors} == {"echo \udcff > out.txt", "echo a\x00b"}
    good = [x for x in records if not x["transport_error"]]
    assert [x["verdict"]["passed"] for x in sorted(good, key=lambda x: x["transport"])] == [True, True]


@pytest.mark.parametrize("content, expect", [
    (b"[not json\n", "line 1: not valid JSON"),
    (b"not json\n", "line 1: not valid JSON"),
    (b"{not json}\n", "line 1: not valid JSON"),
    (b'{"task_id": "file-w', "skipped the torn last line 1 (no newline, not complete JSON: a write cut short by "
                            "a kill), and holds no replies"),
    (b'{"command": "true"}\n', "line 1: field 'task_id'"),
    (b'{"task_id": "nope/x", "command": "true"}\n', "unknown task 'nope/x'"),
    (b'{"task_id": "file-write/h1"}\n', "needs a 'command' or a 'reply'"),
    (b"", "holds no replies"),
])
def test_bad_reply_stores_are_one_line_errors(tmp_path: Path, content: bytes, expect: str) -> None:
    store = tmp_path / "replies.jsonl"
    store.write_bytes(content)
    r = qb("replay", str(store), "--transports", "raw", "--out", str(tmp_path / "out.jsonl"))
    assert r.returncode == 2 and expect in r.stderr and str(store) in r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_replay_resumes_after_a_torn_kill(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    store.write_text("".join(json.dumps({"task_id": f"file-write/{tier}", "command": "echo hello world > out.txt"}) + "\n"
                             for tier in ("control", "h1", "h2", "h3")))
    out = tmp_path / "results.jsonl"
    first = json.loads(qb("replay", str(store), "--transports", "raw,nested", "--out", str(out), "--json").stdout)
    assert first["executed_now"] == 8
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:5]) + lines[5][:40])  # as if killed while writing the sixth record
    again = json.loads(qb("replay", str(store), "--transports", "raw,nested", "--out", str(out), "--json").stdout)
    assert again["executed_now"] == 3 and again["already_recorded"] == 5
    records = [json.loads(x) for x in out.read_text().splitlines() if x.startswith("{") and x.endswith("}")]
    assert len({(r["reply_id"], r["transport"]) for r in records}) == len(records) == 8
    assert sum(c["n"] for c in again["cells"]) == 8


def test_replay_refuses_a_torn_line_in_the_middle_of_the_store(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    good = json.dumps({"task_id": "file-write/control", "command": "echo hello world > out.txt"})
    # line 2 is cut short but has its newline, with a line after it: bad input, not a torn last write
    store.write_text(good + "\n" + '{"task_id": "file-write/h1", "comm\n'
                     + json.dumps({"task_id": "file-write/h1", "command": "echo x > out.txt"}) + "\n")
    out = tmp_path / "results.jsonl"
    r = qb("replay", str(store), "--transports", "raw", "--out", str(out), "--json")
    assert r.returncode == 2 and r.stdout == "" and not out.exists()
    assert r.stderr.startswith(f"quotebench: error: {store}: line 2: not valid JSON (")
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


@pytest.mark.parametrize("content, expect", [
    (b'{"task_id": "file-write/h1", "command": "true"}\ngarbage\n', "line 2: not valid JSON"),
    (b'{"task_id": "file-write/h1", "command": "true", "contract": "nested"}\n',
     "line 1: field 'contract': unknown contract 'nested'"),
    (b'{"task_id": "file-write/h1", "reply": "true", "contract": "telepathy"}\n',
     "line 1: field 'contract': unknown contract 'telepathy'"),
    (b'{"task_id": "file-write/h1", "contract": "native", "tool_calls": [{"name": 3}]}\n',
     "line 1: field 'tool_calls.0.name'"),
])
def test_bad_store_lines_name_the_file_and_line(tmp_path: Path, content: bytes, expect: str) -> None:
    store = tmp_path / "replies.jsonl"
    store.write_bytes(content)
    r = qb("replay", str(store), "--transports", "raw", "--out", str(tmp_path / "out.jsonl"))
    assert r.returncode == 2 and f"{store}: {expect}" in r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_replay_uses_a_native_lines_tool_calls(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    call = {"name": "bash", "arguments": json.dumps({"command": "echo hello world > out.txt"})}
    store.write_text(json.dumps({"task_id": "file-write/control", "contract": "native", "reply": "",
                                 "tool_calls": [call]}) + "\n")
    out = tmp_path / "results.jsonl"
    r = qb("replay", str(store), "--transports", "raw", "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    [rec] = [json.loads(x) for x in out.read_text().splitlines()]
    assert rec["command"] == "echo hello world > out.txt" and rec["verdict"]["passed"]
    assert json.loads(rec["reply"]) == {"text": "", "tool_calls": [{**call, "id": None}]}


def test_exec_json_is_valid_utf8_even_for_a_command_that_is_not() -> None:
    r = subprocess.run([*QB, "exec", "--task", "file-write/control", "--transport", "raw", "--command",
                        b"echo \xff > out.txt", "--json"], capture_output=True, timeout=120)
    assert r.returncode == 1 and b"Traceback" not in r.stderr
    doc = json.loads(r.stdout.decode("utf-8"))  # strict: no lone surrogate reached stdout
    assert doc["command"] == "echo \udcff > out.txt" and doc["transport_error"]


def test_serve_record_into_a_directory_is_a_one_line_error(tmp_path: Path) -> None:
    r = subprocess.run([*QB, "serve", "--record", str(tmp_path)], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and f"--record {tmp_path}: is a directory" in r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_replay_out_into_a_directory_is_a_one_line_error(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    store.write_text(json.dumps({"task_id": "file-write/control", "command": "true"}) + "\n")
    r = qb("replay", str(store), "--transports", "raw", "--out", str(tmp_path))
    assert r.returncode == 2 and "is a directory" in r.stderr and r.stderr.count("\n") == 1
