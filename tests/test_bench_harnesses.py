"""`quotebench bench harnesses`: the cost of a run through each real agent harness,
against raw on the harness's final shell in the same run and against a bare `bash -c true`. One timed run on
claude-code (after its warm-up run): about 5 s idle, up to 40 s on a loaded machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from transports.harnesses import HARNESSES

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]


def qb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*QB, *args], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                          env={**os.environ, "COLUMNS": "200"})


@pytest.mark.needs("bwrap", "python3", "claude-code")
def test_bench_harnesses_json_times_claude_code_against_raw() -> None:
    r = qb("bench", "harnesses", "-n", "1", "--harnesses", "claude-code", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert set(doc) == {"isolation", "cores", "bash_c_true_ms", "harnesses", "peak_memory_mib"}  # no sweep asked
    assert doc["cores"] == os.cpu_count() and doc["isolation"] == "bwrap"
    h = doc["harnesses"]
    assert list(h) == ["claude-code"]
    cc = h["claude-code"]
    assert set(cc) == {"exec_ms", "min_ms", "max_ms", "runs", "baseline", "baseline_ms", "vs_baseline",
                       "exec_ratio", "baseline_ratio", "bare", "bare_ms", "vs_bare", "bare_goal", "within_bare_goal",
                       "frame_ms"}
    assert (cc["runs"], cc["baseline"]) == (1, "raw")
    assert cc["exec_ms"] == cc["min_ms"] == cc["max_ms"]  # one timed run
    # a harness run is a whole program's start: more than raw's sandboxed shell, which is more than bash -c true
    assert cc["exec_ms"] > cc["baseline_ms"] > doc["bash_c_true_ms"] > 0
    assert cc["vs_baseline"] == round(cc["exec_ms"] / cc["baseline_ms"], 2)
    assert cc["exec_ratio"] == round(cc["exec_ms"] / doc["bash_c_true_ms"], 2)
    assert cc["baseline_ratio"] == round(cc["baseline_ms"] / doc["bash_c_true_ms"], 2)
    # the harness's own bare start, in the same sandbox: less than a whole run, which adds a model round trip
    assert cc["bare"] == "claude --version" and 0 < cc["bare_ms"] < cc["exec_ms"]
    assert cc["vs_bare"] == round(cc["exec_ms"] / cc["bare_ms"], 2) and cc["bare_goal"] == 1.2
    assert cc["within_bare_goal"] == (cc["vs_bare"] <= 1.2)
    assert 0 < cc["frame_ms"] < cc["exec_ms"]  # our launcher and courier alone: part of a run, not all of it


def test_bench_harnesses_refuses_an_unknown_route_in_one_line() -> None:
    r = qb("bench", "harnesses", "--harnesses", "claude-code,nope", "--json")
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1
    assert f"--harnesses: unknown harness route 'nope'; known: {', '.join(HARNESSES)}" in r.stderr
