"""Harness runs with mini-swe-agent: the courier's script through the recording proxy, its replay, and a rerun that
has nothing to do (docs/harness-runs.md). A mini-swe-agent run costs 6 to 30 s (litellm's import, on a loaded
machine); the file runs two."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qb_client.campaign.harness_run import comparable
from qb_client.campaign.harness_script import courier_script
from tasks.load import get_task
from transports.harnesses.mini_swe_agent import VERSION
from probes import cli

HARNESS = pytest.mark.needs("bwrap", "python3", "dash", "mini-swe-agent")
TASK = "json-edit/control"


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@HARNESS
def test_record_then_replay_gives_identical_records(tmp_path: Path, capsys, monkeypatch) -> None:
    code, _, _ = cli(capsys, monkeypatch, "run", "--harness", "mini-swe-agent", "--model", "courier", "--tasks", TASK,
                  "--out", str(tmp_path / "rec"), "--wall", "90")
    (r,) = lines(tmp_path / "rec" / "results.jsonl")
    script = [c for turn in courier_script(get_task(TASK)) for c in turn] + ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]
    assert code == 0 and r["verdict"]["passed"] and r["shell"] == "dash", r
    assert [s["command"] for s in r["steps"]] == script  # the submit command is the model's last tool call
    assert [s["received"] for s in r["steps"]] == script  # Popen(shell=True): /bin/sh -c R, from the trace
    assert [s["exit_code"] for s in r["steps"]] == [0, 2, 0, 0]  # dash's cd fails with 2
    assert r["agent"]["turns"] == 4 and r["agent"]["stop"] == "end"
    code, out, _ = cli(capsys, monkeypatch, "run", "--harness", "mini-swe-agent", "--model", f"replay:{tmp_path / 'rec'}",
                    "--out", str(tmp_path / "rep"), "--wall", "90", "--json")
    assert code == 0 and json.loads(out)["replay"] == {"identical": 1, "different": 0, "diverged": [],
                                                       "recorded_with": [VERSION], "replayed_with": VERSION}
    (again,) = lines(tmp_path / "rep" / "results.jsonl")
    assert comparable(again) == comparable(r)
    # a rerun into the same --out does nothing: the run is recorded
    code, out, _ = cli(capsys, monkeypatch, "run", "--harness", "mini-swe-agent", "--model", "courier", "--tasks", TASK,
                    "--out", str(tmp_path / "rec"), "--json")
    assert code == 0 and json.loads(out)["executed"] == 0 and json.loads(out)["already_recorded"] == 1
