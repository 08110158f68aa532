"""Promises that had no test: keys stay out of every output, `report` refuses bad input in one line, and
QB_NO_BWRAP=1 set the way a user sets it. All through the real command line in subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from fake_llm import FakeServer, Scripted, Seen, running_fake_server
from mcp import Client, StdioServerParameters

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]
KEY = "sk-test-SECRET-123"
NO_BWRAP_WARNING = ("quotebench: QB_NO_BWRAP is set: commands run WITHOUT namespace isolation "
                    "(records say isolation: none)\n")


def qb(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*QB, *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd)


def keyed_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "QB_NO_"))}
    return {**env, "ANTHROPIC_API_KEY": KEY, "OPENAI_API_KEY": KEY}


def every_output(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text(errors="replace") for p in sorted(directory.iterdir()) if p.is_file()}


# ---------------------------------------------------------------- keys


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    yield from running_fake_server()


def echoing_the_key(seen: Seen) -> Scripted:
    """A hostile (or merely careless) API that quotes the key it was sent in its error, as real ones do in part."""
    sent = (seen.headers.get("x-api-key") or seen.headers.get("authorization") or "").removeprefix("Bearer ")
    return Scripted(401, {"type": "error", "error": {"type": "authentication_error", "message": f"invalid key {sent}"}})


@pytest.mark.parametrize("provider", ["anthropic", "openai", "openai-chat"])
def test_keys_stay_out_of_errors_jsonl_stderr_and_every_campaign_file(fake: FakeServer, tmp_path: Path,
                                                                      provider: str) -> None:
    fake.reset()
    fake.responder = echoing_the_key
    r = qb("run", "--model", f"{provider}:m", "--base-url", fake.url, "--tasks", "file-write/control",
           "--contracts", "raw", "--out", str(tmp_path / "out"), "--max-tries", "1", env=keyed_env())
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert len(fake.seen) == 1 and KEY in json.dumps(fake.seen[0].headers)  # the key did go over the wire
    outputs = every_output(tmp_path / "out")
    assert set(outputs) >= {"errors.jsonl"}
    [error] = [json.loads(x) for x in outputs["errors.jsonl"].splitlines()]
    assert error["error"] == "HTTP 401: invalid key ***" or error["error"].endswith(": HTTP 401: invalid key ***")
    assert f"{provider}:m@unset: HTTP 401: invalid key ***" in r.stderr
    for name, text in {**outputs, "stdout": r.stdout, "stderr": r.stderr}.items():
        assert KEY not in text and "SECRET" not in text, name


def test_keys_stay_out_of_the_mcp_record_file_and_the_tool_results(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    params = StdioServerParameters(command=sys.executable,
                                   args=["-c", "from qb_client.cli import main; main()", "serve", "--record", str(record)],
                                   env=keyed_env(), cwd=str(tmp_path))
    probe = ("env; echo \"key=$ANTHROPIC_API_KEY$OPENAI_API_KEY\"; "
             "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c 'SEC''RET'")

    async def session() -> list[str]:
        async with Client(params) as client:
            first = await client.call_tool("bash", {"command": probe})
            second = await client.call_tool("bash", {"command": f"echo {KEY[:8]}; exit 3"})
        return [json.dumps(first.structured_content), json.dumps(second.structured_content)]

    results = anyio.run(session)
    assert "\\nkey=\\n0\\n" in results[0]  # the probe ran: both variables empty, no process environ holds it
    assert KEY not in "".join(results)
    text = record.read_text()
    assert len(text.splitlines()) >= 2 and "key=\\n" in text
    assert KEY not in text and "SECRET" not in text


# ---------------------------------------------------------------- report: bad input, one line, exit 2


def good_record() -> dict:
    r = qb("exec", "--task", "file-write/control", "--transport", "raw", "--command", "true", "--json")
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def record() -> dict:
    return good_record()


def with_field(rec: dict, dotted: str, value: object) -> dict:
    doc = json.loads(json.dumps(rec))
    *path, last = dotted.split(".")
    node = doc
    for k in path:
        node = node[k]
    node[last] = value
    return doc


@pytest.mark.parametrize("make, expect", [
    (None, "{f}: cannot read: No such file or directory"),
    (lambda rec: b"", "{f}: no records (a results file holds one JSON record per line)"),
    (lambda rec: b"\n\n", "{f}: no records (a results file holds one JSON record per line)"),
    (lambda rec: (json.dumps(rec) + "\nnot json\n" + json.dumps(rec) + "\n").encode(),
     "{f}: line 2: not valid JSON (Expecting value: line 1 column 1 (char 0))"),
    (lambda rec: b"[1, 2]\n", "{f}: line 1: not a JSON object (got list)"),
    (lambda rec: b"\xff\n", "{f}: line 1: not valid JSON (not valid UTF-8 at byte 0)"),
    (lambda rec: (json.dumps(rec) + "\n" + json.dumps(with_field(rec, "verdict.passed", "yes")) + "\n").encode(),
     "{f}: line 2: field 'verdict.passed': expected true or false, got str"),
    (lambda rec: (json.dumps(with_field(rec, "draw", "zero")) + "\n").encode(),
     "{f}: line 1: field 'draw': expected an integer, got str"),
    (lambda rec: (json.dumps(with_field(rec, "task_id", 7)) + "\n").encode(),
     "{f}: line 1: field 'task_id': expected a non-empty string, got int"),
    (lambda rec: (json.dumps(with_field(rec, "config", "p")) + "\n").encode(),
     "{f}: line 1: field 'config': expected an object, got str"),
    (lambda rec: b'{"a": 1}\n', "{f}: line 1: field 'run_id': missing"),
])
def test_report_refuses_bad_input_in_one_line(tmp_path: Path, record: dict, make, expect: str) -> None:
    f = tmp_path / "results.jsonl"
    if make is not None:
        f.write_bytes(make(record))
    r = qb("report", str(f), "--json", "--html", str(tmp_path / "r.html"))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"quotebench: error: {expect.format(f=f)}\n"
    assert not (tmp_path / "r.html").exists()


# ---------------------------------------------------------------- QB_NO_BWRAP=1, as a user sets it


@pytest.mark.needs("bwrap")  # the last part compares with an isolated run
def test_qb_no_bwrap_in_the_environment_runs_without_isolation_and_says_so_once(tmp_path: Path) -> None:
    env = {**keyed_env(), "QB_NO_BWRAP": "1"}
    r = qb("exec", "--task", "file-write/control", "--transport", "raw", "--command", "echo hello world > out.txt",
           "--json", env=env)
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["isolation"] == "none" and rec["verdict"]["passed"]
    assert r.stderr == NO_BWRAP_WARNING
    # many sandboxes in one process: still one warning, and every record says none
    store = tmp_path / "replies.jsonl"
    from tasks.load import suite

    store.write_text("".join(json.dumps({"task_id": t, "command": "echo hello world > out.txt",
                                         "suite": suite()[0].suite}) + "\n"
                             for t in ("file-write/control", "file-write/h1", "file-write/h2")))
    out = tmp_path / "results.jsonl"
    r = qb("replay", str(store), "--transports", "raw,nested", "--out", str(out), "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("WITHOUT namespace isolation") == 1 and r.stderr.startswith(NO_BWRAP_WARNING)
    records = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(records) == 6 and {x["isolation"] for x in records} == {"none"}
    # without the variable the same command is isolated (this machine has bubblewrap; see tests/conftest.py)
    r = qb("exec", "--task", "file-write/control", "--transport", "raw", "--command", "true", "--json",
           env=keyed_env())
    assert json.loads(r.stdout)["isolation"] == "bwrap" and "WITHOUT" not in r.stderr
