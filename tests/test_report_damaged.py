"""`report --damaged TRANSPORT` and `report --csv FILE` list the damaged commands without jq; a path whose
baseline did not run says how to add it."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

from qb_client.report.compute import compute
from qb_client.report.terminal import baseline_hint
from tasks.validate import Verdict
from transports.results.record import ConfigInfo, Output, Record

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]


def rec(task: str, transport: str, command: str, received: str | None, shell: str = "bash") -> dict:
    return Record(run_id="r", reply_id=f"{task}-{transport}", config=ConfigInfo(provider="p", model="m"),
                  contract="raw", transport=transport, shell=shell, task_id=task, family=task.split("/")[0],
                  tier="control", reply=command, command=command, received=received, damaged=received != command,
                  exit_code=0, stdout=Output(), stderr=Output(), timed_out=False, transport_error=None,
                  verdict=Verdict(passed=received == command, checks=[])).model_dump(mode="json")


def results(tmp_path: Path) -> Path:
    rows = [rec("a/1", "raw", 'echo "a b"', 'echo "a b"'), rec("a/1", "nested", 'echo "a b"', "echo a"),
            rec("b/1", "raw", "printf 'x\\n'\n", "printf 'x\\n'\n"),
            rec("b/1", "docker-sh", "printf 'x\\n'\n", "printf 'x\\n'", shell="dash")]
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def qb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*QB, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"}, stdin=subprocess.DEVNULL)


def test_damaged_lists_the_commands_of_one_transport(tmp_path: Path) -> None:
    r = qb("report", str(results(tmp_path)), "--damaged", "nested")
    assert r.returncode == 0, r.stderr
    assert "Damaged commands on nested: 1" in r.stdout
    line = next(x for x in r.stdout.splitlines() if "a/1" in x)
    assert [c.strip() for c in line.strip("│ ").split("│")] == ["a/1", "raw", "nested", 'echo "a b"', "echo a"]
    rows = json.loads(qb("report", str(results(tmp_path)), "--damaged", "all", "--json").stdout)
    assert [(x["task"], x["transport"], x["received"]) for x in rows] == [
        ("a/1", "nested", "echo a"), ("b/1", "docker-sh", "printf 'x\\n'")]


def test_damaged_on_a_transport_that_never_ran_is_one_line(tmp_path: Path) -> None:
    r = qb("report", str(results(tmp_path)), "--damaged", "nestd")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "--damaged nestd: no record ran on it (these did: docker-sh, nested, raw; or all)" in r.stderr


def test_csv_holds_the_damaged_commands_exactly(tmp_path: Path) -> None:
    out = tmp_path / "new" / "damaged.csv"
    r = qb("report", str(results(tmp_path)), "--csv", str(out))
    assert r.returncode == 0 and "wrote 2 damaged command(s)" in r.stderr
    assert "QuoteBench report" in r.stdout  # the report is still printed
    with out.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(x["task"], x["contract"], x["transport"], x["command"], x["received"]) for x in rows] == [
        ("a/1", "raw", "nested", 'echo "a b"', "echo a"), ("b/1", "raw", "docker-sh", "printf 'x\\n'\n", "printf 'x\\n'")]


def test_a_missing_baseline_names_the_transport_to_add(tmp_path: Path) -> None:
    doc = compute([json.loads(x) for x in results(tmp_path).read_text().splitlines()], resamples=50)
    hint = baseline_hint(doc["configs"])
    assert hint is not None and "--transports ...,raw@dash" in hint.plain
    r = qb("report", str(results(tmp_path)))
    assert "the baseline raw@dash did not run" in " ".join(r.stdout.split())
