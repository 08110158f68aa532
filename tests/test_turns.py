"""The multi-turn arm (``run --turns K``) offline with the habits baseline: chains in one sandbox, what the
model is shown, the report's recovery table, and resume after a SIGKILL of a real ``quotebench run``."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from qb_client.adapters.agents.habits import escape_for_double, habitual_command
from qb_client.report.turns import cell_row
from tasks.load import get_task

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]


def qb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*QB, *args], capture_output=True, text=True, timeout=600)


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def test_habits_chains_retry_once_in_the_same_sandbox_and_the_report_shows_recovery(tmp_path: Path) -> None:
    r = qb("run", "--model", "habits", "--turns", "3", "--transports", "raw,nested", "--contracts", "raw",
           "--tasks", "sed-replace/*,file-append/*", "--out", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["configs"] == ["habits:human-habits@unset+turns=3"] and doc["executed"] == 16
    assert not (tmp_path / "replies.jsonl").exists()  # on-policy: no reply store for K > 1
    records = lines(tmp_path / "results.jsonl")
    assert len({(x["reply_id"], x["transport"]) for x in records}) == 16
    for x in records:
        turns = x["turns"]
        task = get_task(x["task_id"])
        assert turns[0]["command"] == habitual_command(task) and [t["turn"] for t in turns] == list(range(1, len(turns) + 1))
        assert x["versions"]["prompt"] == "p1+loop1" and x["config"]["variant"] == "turns=3"
        first_noticed = turns[0]["exit_code"] != 0 or turns[0]["stderr"]["text"].strip()
        if first_noticed:  # the retry is the escaped form, then DONE
            assert [t["command"] for t in turns] == [habitual_command(task), escape_for_double(habitual_command(task)), None]
            assert x["command"] == turns[1]["command"] and x["exit_code"] == turns[1]["exit_code"]
        else:
            assert [t["command"] for t in turns] == [habitual_command(task), None]
        assert turns[-1]["stop"] == "done" and turns[-1]["reply"] == "DONE"
        assert x["verdict"]["passed"] == turns[-1]["passed"]
    seq = {(x["task_id"], x["transport"]): ([t["passed"] for t in x["turns"]], [t["exit_code"] for t in x["turns"]])
           for x in records}
    # sed-replace/control on nested: sed fails (exit 1), the escaped retry repairs it in the same sandbox
    assert seq[("sed-replace/control", "nested")] == ([False, True, True], [1, 0, None])
    # file-append/control on nested fails with exit 0 and no stderr: the baseline never notices (silent)
    assert seq[("file-append/control", "nested")] == ([False, False], [0, None])
    assert seq[("file-append/control", "raw")] == ([True, True], [0, None])
    rep = qb("report", str(tmp_path / "results.jsonl"), "--json")
    assert rep.returncode == 0, rep.stderr
    [config] = json.loads(rep.stdout)["configs"]
    rows = {(t["contract"], t["transport"]): t for t in config["turns"]}
    want = {("raw", "raw"): ([0.5, 0.5, 0.5], 4, 0, 4, 3, 0), ("raw", "nested"): ([0.0, 0.125, 0.125], 8, 1, 7, 3, 0)}
    assert {k: (r["pass_by_turn"], r["first_turn_failures"], r["recovered"], r["silent_failures"],
                r["exit_zero_first_failures"], r["exit_zero_noticed"]) for k, r in rows.items()} == want
    assert rows[("raw", "nested")]["mean_turns_to_pass"] == 2.0 and rows[("raw", "raw")]["mean_turns_to_pass"] == 1.0
    text = qb("report", str(tmp_path / "results.jsonl"))
    assert text.returncode == 0 and "Multi-turn arm" in text.stdout and "recovered" in text.stdout


def test_recovery_metrics_on_hand_made_chains() -> None:
    def chain(passed: list[bool], commands: list[str | None], exit0: bool, stop: str | None, final: bool) -> dict:
        turns = [{"turn": i + 1, "passed": p, "command": c, "exit_code": 0 if exit0 and i == 0 else 1,
                  "stop": stop if i == len(passed) - 1 else None} for i, (p, c) in enumerate(zip(passed, commands))]
        return {"turns": turns, "verdict": {"passed": final}}

    chains = [
        chain([True, True], ["a", None], True, "done", True),                   # passes at once
        chain([False, True, True], ["a", "b", None], True, "done", True),       # exit-0 failure noticed, recovered
        chain([False, False], ["a", None], True, "done", False),                # exit-0 failure, silent
        chain([False, False, False], ["a", "b", "c"], False, None, False),      # out of turns
        chain([False, False, True], ["a", "a", "b"], False, None, True),        # recovered at turn 3
    ]
    row = cell_row("raw", "nested", chains, 3)
    assert row["pass_by_turn"] == [0.2, 0.4, 0.6]
    assert (row["first_turn_failures"], row["recovered"], row["recovery"]) == (4, 2, 0.5)
    assert row["mean_turns_to_pass"] == (1 + 2 + 3) / 3
    assert (row["silent_failures"], row["exhausted"]) == (1, 1)
    assert (row["exit_zero_first_failures"], row["exit_zero_noticed"]) == (2, 1)


def test_turns_refuses_a_reply_store(tmp_path: Path) -> None:
    store = tmp_path / "s.jsonl"
    from tasks.load import suite

    store.write_text(json.dumps({"task_id": "file-write/control", "command": "true", "suite": suite()[0].suite}) + "\n")
    r = qb("run", "--model", f"replay:{store}", "--turns", "2", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "--turns 2: a reply store cannot answer a chain" in r.stderr
    assert not (tmp_path / "o").exists()


def test_killed_multi_turn_campaign_resumes_without_losing_or_duplicating_a_chain(tmp_path: Path) -> None:
    args = [*QB, "run", "--model", "habits", "--turns", "3", "--transports", "raw,nested", "--contracts", "raw,native",
            "--out", str(tmp_path), "--exec-concurrency", "1", "--api-concurrency", "1"]
    total = 56 * 2 * 2
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    results = tmp_path / "results.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if results.exists() and results.read_text().count("\n") >= 20:
            break
        time.sleep(0.01)
    killed = proc.poll() is None
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = len(lines(results)) if results.read_text().endswith("\n") else results.read_text().count("\n")
    assert killed and 20 <= before < total, "the campaign finished before it could be killed"
    kept = {(x["reply_id"], x["transport"]): x["turns"] for x in lines(results)[:before]}
    r = qb("run", "--model", "habits", "--turns", "3", "--transports", "raw,nested", "--contracts", "raw,native",
           "--out", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    records = lines(results)
    keys = collections.Counter((x["reply_id"], x["transport"]) for x in records)
    assert len(records) == len(keys) == total and max(keys.values()) == 1
    assert doc["executed"] == total - before and doc["reused"] == before
    assert all(x["turns"] and x["turns"][-1]["stop"] in ("done", "no-tool-call") for x in records)
    assert all({(x["reply_id"], x["transport"]): x["turns"] for x in records}[k] == v for k, v in kept.items())
    again = json.loads(qb("run", "--model", "habits", "--turns", "3", "--transports", "raw,nested",
                          "--contracts", "raw,native", "--out", str(tmp_path), "--json").stdout)
    assert again["executed"] == 0 and again["reused"] == total
