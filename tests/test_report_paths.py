"""The report's damage by deployment path: each path for raw replies against raw on
the same final shell, with exact values on a hand-sized results file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from qb_client.report.compute import compute
from tasks.validate import Verdict
from transports.results.record import ConfigInfo, Output, Record

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]


def rec(task: str, family: str, transport: str, shell: str, passed: bool, contract: str = "raw") -> dict:
    return Record(run_id="r", reply_id=f"{task}-{contract}", config=ConfigInfo(provider="p", model="m"),
                  contract=contract, transport=transport, shell=shell, task_id=task, family=family, tier="control",
                  reply="x", command="x", received="x", damaged=False, exit_code=0, stdout=Output(),
                  stderr=Output(), timed_out=False, transport_error=None,
                  verdict=Verdict(passed=passed, checks=[])).model_dump()


def records() -> list[dict]:
    out = []
    tasks = [("a/1", "a"), ("a/2", "a"), ("b/1", "b"), ("b/2", "b")]
    outcome = {  # transport -> pass per task
        "raw": [1, 1, 1, 1], "nested": [0, 1, 0, 0],
        "raw@dash": [1, 1, 1, 0], "docker-sh": [0, 0, 1, 0], "docker-sh-safe": [1, 1, 1, 0],
        "shlex-sh": [1, 0, 0, 0],
    }
    shells = {"raw@dash": "dash", "docker-sh": "dash", "docker-sh-safe": "dash", "shlex-sh": "dash"}
    for transport, passes in outcome.items():
        for (task, fam), p in zip(tasks, passes):
            out.append(rec(task, fam, transport, shells.get(transport, "bash"), bool(p)))
    out.append(rec("a/1", "a", "ssh@zsh", "zsh", True))  # no raw@zsh ran: no damage for it
    return out


def test_each_path_is_compared_with_raw_on_its_own_shell() -> None:
    rows = {r["transport"]: r for r in compute(records(), resamples=200)["configs"][0]["paths"]}
    assert set(rows) == {"nested", "docker-sh", "docker-sh-safe", "shlex-sh", "ssh@zsh"}  # baselines are not rows
    assert rows["nested"]["baseline"] == "raw" and rows["nested"]["damage"]["value"] == -0.75
    assert rows["docker-sh"]["baseline"] == "raw@dash" and rows["docker-sh"]["damage"]["value"] == -0.5
    assert rows["docker-sh-safe"]["damage"]["value"] == 0.0 and rows["docker-sh-safe"]["damage"]["ci95"] == [0.0, 0.0]
    assert rows["shlex-sh"]["rate"] == 0.25 and rows["shlex-sh"]["damage"]["value"] == -0.5
    assert rows["ssh@zsh"]["baseline"] == "raw@zsh" and rows["ssh@zsh"]["damage"] is None
    lo, hi = rows["docker-sh"]["damage"]["ci95"]
    assert -1.0 <= lo <= -0.5 <= hi <= 0.0 and lo < hi


def test_disclosed_replies_do_not_enter_the_path_table() -> None:
    recs = records() + [rec("a/1", "a", "make", "dash", False, contract="disclosed")]
    rows = compute(recs, resamples=50)["configs"][0]["paths"]
    assert "make" not in {r["transport"] for r in rows}


def test_the_terminal_report_prints_the_table(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records()))
    done = subprocess.run([*QB, "report", str(path)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "120"})
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Damage by transport and deployment path" in out
    line = next(x for x in out.splitlines() if "docker-sh " in x and "raw@dash" in x)
    assert "-50.0" in line
