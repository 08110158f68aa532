"""Failures provoked through real inputs, never by patching our own code: a bad task file and a real version change.

The suite and the package version are part of the installed package, so these tests copy the package into
a temporary directory, change a file there the way a task author or a release would, and run the real
``quotebench`` from that copy in a subprocess (PYTHONPATH puts the copy first).

The bad task file: ``file-append/h1``'s second fixture file is put *inside* its first
(``contacts.csv/README.md``), which the loader accepts but no sandbox can build (``File exists``). If the
loader learns to refuse it, pick another fixture that only fails when it is materialized.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tasks", "transports", "qb_server", "qb_client")
QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]
GOOD_H1 = 'payload = { path = "contacts.csv", other = "README.md",'
BAD_H1 = 'payload = { path = "contacts.csv", other = "contacts.csv/README.md",'


def copied_package(tmp_path: Path) -> Path:
    """A private copy of the package's source (no caches), importable with PYTHONPATH=<copy>."""
    pkg = tmp_path / "pkg"
    for name in PACKAGES:
        shutil.copytree(ROOT / name, pkg / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return pkg


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{path}: {old!r} not found once"
    path.write_text(text.replace(old, new))


def qb_from(pkg: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(pkg), "PYTHONDONTWRITEBYTECODE": "1"}
    probe = subprocess.run([sys.executable, "-c", "import tasks; print(tasks.__file__)"], env=env, cwd=cwd,
                           capture_output=True, text=True, check=True)
    assert probe.stdout.startswith(str(pkg)), "the copy is not the package that runs"
    return subprocess.run([*QB, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def test_a_sandbox_that_cannot_be_built_is_a_harness_error_record_exit_1_and_retried(tmp_path: Path) -> None:
    pkg = copied_package(tmp_path)
    family = pkg / "tasks" / "families" / "file-append.toml"
    edit(family, GOOD_H1, BAD_H1)
    store = tmp_path / "replies.jsonl"
    store.write_text("".join(json.dumps({"task_id": t, "command": "true"}) + "\n"
                             for t in ("file-append/control", "file-append/h1")))
    out = tmp_path / "results.jsonl"
    r = qb_from(pkg, "replay", str(store), "--transports", "raw,nested", "--out", str(out), "--json", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    doc = json.loads(r.stdout)
    assert (doc["executed_now"], doc["already_recorded"], doc["errors"]) == (4, 0, 2)
    assert "2 execution(s) failed in the harness" in r.stderr
    records = lines(out)
    assert len(records) == 4
    bad = sorted((x for x in records if x["error"]), key=lambda x: x["transport"])
    assert [(x["task_id"], x["transport"]) for x in bad] == [("file-append/h1", "nested"), ("file-append/h1", "raw")]
    for x in bad:
        assert x["error"].startswith("harness: SandboxError: cannot build the sandbox: [Errno 17] File exists: ")
        assert x["error"].endswith("/contacts.csv'")
        assert not x["verdict"]["passed"] and x["transport_error"] is None and x["received"] is None
        assert x["command"] == "true" and not x["damaged"] and x["exit_code"] is None
    assert all(x["error"] is None for x in records if x["task_id"] == "file-append/control")
    # the task file repaired, a rerun executes exactly the two failed pairs
    edit(family, BAD_H1, GOOD_H1)
    r = qb_from(pkg, "replay", str(store), "--transports", "raw,nested", "--out", str(out), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    again = json.loads(r.stdout)
    assert (again["executed_now"], again["already_recorded"], again["errors"]) == (2, 2, 0)
    retried = lines(out)[4:]
    assert sorted((x["task_id"], x["transport"], x["error"]) for x in retried) == [
        ("file-append/h1", "nested", None), ("file-append/h1", "raw", None)]


def test_a_known_error_raised_inside_a_task_group_is_one_line(tmp_path: Path) -> None:
    """`tasks check` checks tasks in an anyio task group; the SandboxError of the one bad task reaches main
    wrapped in an exception group, and must still come out as one line, exit 2."""
    pkg = copied_package(tmp_path)
    edit(pkg / "tasks" / "families" / "file-append.toml", GOOD_H1, BAD_H1)
    r = qb_from(pkg, "tasks", "check", "--tasks", "file-append/h1", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    [line] = [x for x in r.stderr.splitlines() if x.strip()]  # (the progress display may leave a blank line)
    assert line.startswith("quotebench: error: cannot build the sandbox: [Errno 17] File exists: ")
    assert line.endswith("/contacts.csv'") and "Traceback" not in r.stderr


def test_resume_never_reuses_replies_of_another_prompt_or_suite_version(tmp_path: Path) -> None:
    """A real prompt-version bump and a real task-file edit: the suite digest is computed from the files."""
    pkg = copied_package(tmp_path)
    out = tmp_path / "run"
    args = ("run", "--model", "reference", "--tasks", "file-write/*", "--contracts", "raw", "--transports", "raw",
            "--out", str(out), "--json")

    def run() -> dict:
        r = qb_from(pkg, *args, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    assert (run()["generated"], run()["generated"]) == (4, 0)  # the second run reuses all four
    edit(pkg / "qb_client" / "replies" / "contracts.py", 'PROMPT_VERSION = "p1"', 'PROMPT_VERSION = "p2"')
    assert run()["generated"] == 4
    heredoc = pkg / "tasks" / "families" / "heredoc.toml"  # another family: the whole suite is versioned
    heredoc.write_text(heredoc.read_text() + "\n# edited\n")
    assert run()["generated"] == 4
    replies = lines(out / "replies.jsonl")
    assert len(replies) == len({x["reply_id"] for x in replies}) == 12
    seen = [(x["versions"]["prompt"], x["versions"]["suite"]) for x in replies]
    assert [p for p, _ in seen] == ["p1"] * 4 + ["p2"] * 8
    assert len({s for _, s in seen[:8]}) == 1 and seen[8][1] != seen[0][1] and len({s for _, s in seen[8:]}) == 1
    records = lines(out / "results.jsonl")
    assert len(records) == 12 and {x["versions"]["prompt"] for x in records} == {"p1", "p2"}
