"""SIGKILL a real `quotebench run` while it generates and while it writes replies.jsonl, then resume: nothing
written is lost, nothing is generated or executed twice. The fake LLM server makes the timing controllable."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_llm import FakeServer, Scripted, body_for, running_fake_server

from qb_client.replies.contracts import fence

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]
COMMAND = "echo hello world > out.txt"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    yield from running_fake_server()


def env() -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    return {**clean, "ANTHROPIC_API_KEY": "sk-ant-kill-test"}


def run_args(fake: FakeServer, out: Path, tasks: str) -> list[str]:
    return [*QB, "run", "--model", "anthropic:m", "--base-url", fake.url, "--tasks", tasks, "--contracts", "raw",
            "--transports", "raw", "--api-concurrency", "1", "--exec-concurrency", "1", "--out", str(out)]


def complete_lines(path: Path) -> list[dict]:
    """Every line of a JSONL file; a torn (unterminated) last line is returned separately by ``tail``."""
    data = path.read_bytes() if path.exists() else b""
    body = data[: data.rfind(b"\n") + 1]
    return [json.loads(x) for x in body.decode().splitlines() if x.strip()]


def tail(path: Path) -> bytes:
    data = path.read_bytes() if path.exists() else b""
    return data[data.rfind(b"\n") + 1:]


def kill(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def resume(fake: FakeServer, out: Path, tasks: str) -> dict:
    r = subprocess.run([*run_args(fake, out, tasks), "--json"], capture_output=True, text=True, timeout=300, env=env())
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    return {**json.loads(r.stdout), "stderr": r.stderr}


def assert_whole(out: Path, n: int) -> None:
    """n replies and n records, each exactly once, and every line complete JSON."""
    for name in ("replies.jsonl", "results.jsonl"):
        assert tail(out / name) == b"", f"{name} ends in a torn line"
    replies = complete_lines(out / "replies.jsonl")
    assert len(replies) == len({x["key"] for x in replies}) == n
    records = complete_lines(out / "results.jsonl")
    assert len(records) == n
    assert collections.Counter((x["reply_id"], x["transport"]) for x in records).most_common(1)[0][1] == 1
    assert {x["reply_id"] for x in records} == {x["reply_id"] for x in replies}
    assert {x["command"] for x in records} == {COMMAND}


def test_killed_during_generation_resumes_without_loss_or_duplicates(fake: FakeServer, tmp_path: Path) -> None:
    fake.reset()
    fake.responder = lambda seen: Scripted(200, body_for("anthropic", text=fence(COMMAND) + "\n"), delay=0.4)
    tasks = "file-write/*,file-append/*"
    out = tmp_path / "out"
    proc = subprocess.Popen(run_args(fake, out, tasks), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env(), start_new_session=True)
    replies = out / "replies.jsonl"
    deadline = time.monotonic() + 60
    stored = 0
    while time.monotonic() < deadline and proc.poll() is None:
        stored = len(complete_lines(replies))
        if stored >= 2 and len(fake.seen) > stored:  # a generation is in flight, its reply not yet written
            break
        time.sleep(0.01)
    in_flight = len(fake.seen) - stored
    kill(proc)
    assert proc.returncode == -signal.SIGKILL and in_flight == 1, "the kill did not land during a generation"
    before = complete_lines(replies)
    assert len(before) == stored and 2 <= stored < 8 and tail(replies) == b""
    requests_before = len(fake.seen)
    fake.responder = lambda seen: Scripted(200, body_for("anthropic", text=fence(COMMAND) + "\n"))
    doc = resume(fake, out, tasks)
    assert (doc["generated"], doc["reused"]) == (8 - stored, stored)
    assert len(fake.seen) - requests_before == 8 - stored  # the stored replies were not asked for again
    assert_whole(out, 8)
    assert complete_lines(replies)[:stored] == before  # what was written before the kill is untouched


def test_killed_while_writing_replies_jsonl_resumes_without_loss_or_duplicates(fake: FakeServer,
                                                                               tmp_path: Path) -> None:
    """A reply of 8 MB takes long enough to write that the kill can land inside the write; the resumed
    writer cuts the torn line (saying so) and the reply is generated again."""
    big = COMMAND + " # " + "x" * (8 << 20)
    tasks = "file-write/control,file-write/h1"
    for attempt in range(12):
        fake.reset()
        fake.responder = lambda seen: Scripted(200, body_for("anthropic", text=fence(big) + "\n"))
        out = tmp_path / f"out{attempt}"
        replies = out / "replies.jsonl"
        proc = subprocess.Popen(run_args(fake, out, tasks), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=env(), start_new_session=True)
        torn = False
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                size = os.stat(replies).st_size
            except FileNotFoundError:
                continue
            if size and size < len(big):  # the first line is being written
                os.killpg(proc.pid, signal.SIGKILL)
                torn = True
                break
        proc.wait(30)
        if torn and tail(replies) != b"":
            break
    else:
        pytest.fail("no kill landed inside a write of replies.jsonl in 12 attempts")
    # torn: no whole line, some bytes of one (a line holds the reply's text and its command, twice len(big))
    assert complete_lines(replies) == [] and len(tail(replies)) > 0
    assert not (out / "results.jsonl").exists() or complete_lines(out / "results.jsonl") == []
    fake.responder = lambda seen: Scripted(200, body_for("anthropic", text=fence(COMMAND) + "\n"))
    doc = resume(fake, out, tasks)
    assert (doc["generated"], doc["reused"], doc["executed"]) == (2, 0, 2)
    assert f"{replies}: removed the torn last line 1" in doc["stderr"]
    assert_whole(out, 2)
