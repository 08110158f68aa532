"""``--jobs N``: executions at once, with records that do not depend on N (qb_client/campaign/jobs.py).

A record made with ``--jobs 1`` and one made with ``--jobs 4`` differ only in the fields that measure the
invocation rather than the command (docs/spec.md#concurrency): ``run_id`` (one per invocation),
``timing.exec_ms`` (a wall clock: runs at once share the CPUs), ``jobs``. Their order in the results file is
completion order, which is not part of the contract: every reader finds a record by its key, and the report
is the same whatever the order of its lines.
"""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from qb_client.campaign.jobs import check_jobs, cpu_count, memory_jobs
from tasks.load import select
from transports.sandbox import Limits

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]
MEASURED = ("run_id", "timing.exec_ms", "jobs")
"""The fields a record may change with --jobs: the invocation's id, the run's wall clock, and the N itself."""
TRANSPORTS = "raw,nested,ssh,raw@dash,docker-sh"


def qb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*QB, *args], capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
                          env={**os.environ, "COLUMNS": "200"})


def one_line_error(r: subprocess.CompletedProcess[str], expect: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stdout == "" and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert expect in r.stderr, r.stderr


def without(record: dict, fields: tuple[str, ...]) -> dict:
    r = copy.deepcopy(record)
    for f in fields:
        *path, last = f.split(".")
        d = r
        for p in path:
            d = d[p]
        d.pop(last, None)
    return r


def store(path: Path) -> Path:
    """The reference solutions (raw and disclosed) of two families, every tier: 16 replies."""
    with path.open("w") as f:
        for t in select("file-write/*,hostile-filenames/*"):
            f.write(json.dumps({"task_id": t.id, "command": t.solution, "contract": "raw"}) + "\n")
            f.write(json.dumps({"task_id": t.id, "command": t.solution_disclosed, "contract": "disclosed"}) + "\n")
    return path


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


# ---------------------------------------------------------------- the option


@pytest.mark.parametrize("command", [["replay", "r.jsonl", "--out", "o.jsonl"],
                                     ["run", "--model", "habits", "--out", "o"], ["demo"],
                                     ["bench", "harnesses", "--sweep"]])
@pytest.mark.parametrize("n", ["0", "-1"])
def test_jobs_below_one_is_a_one_line_usage_error(command: list[str], n: str) -> None:
    one_line_error(qb(*command, "--jobs", n),
                   "Invalid value for '--jobs' / '-j': Input should be greater than or equal to 1")


def test_the_older_names_still_parse_and_disagreeing_with_jobs_is_refused(tmp_path: Path) -> None:
    one_line_error(qb("replay", str(store(tmp_path / "s.jsonl")), "--out", str(tmp_path / "o.jsonl"), "--jobs", "2",
                      "--concurrency", "3"),
                   "--jobs 2 and --concurrency 3 disagree: --concurrency is the older name of --jobs; give one")
    one_line_error(qb("run", "--model", "habits", "--out", str(tmp_path / "c"), "--jobs", "1",
                      "--exec-concurrency", "2"), "--exec-concurrency is the older name of --jobs")
    assert "--concurrency" not in qb("replay", "-h").stdout and "--jobs" in qb("replay", "-h").stdout
    assert "--exec-concurrency" not in qb("run", "-h").stdout


def test_the_default_is_the_cpus_this_process_may_use() -> None:
    one = subprocess.run([sys.executable, "-c", "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
                          "from qb_client.campaign.jobs import cpu_count; print(cpu_count())"],
                         capture_output=True, text=True, timeout=60)
    assert one.stdout == "1\n", one.stderr
    assert cpu_count() == len(os.sched_getaffinity(0))
    with pytest.raises(ValueError, match="--jobs must be a positive number of executions at once, not 0"):
        check_jobs(0)


def test_harness_runs_at_once_are_held_to_the_host_budget() -> None:
    g = 1 << 30
    caps = Limits(memory=g, disk=g)
    assert memory_jobs(8, caps, budget=5 * g) == 2  # each run: a sandbox (disk) and a running program (memory)
    assert memory_jobs(8, caps, runs=2, budget=5 * g) == 1  # ssh: two programs per delivery
    assert memory_jobs(3, caps, budget=100 * g) == 3  # never more than asked
    assert memory_jobs(4, caps, budget=g) == 1  # one run always goes


# ---------------------------------------------------------------- the records


@pytest.mark.needs("bwrap")
def test_replay_with_one_job_and_four_records_the_same(tmp_path: Path) -> None:
    replies = store(tmp_path / "replies.jsonl")
    outs = {}
    for n in (1, 4):
        outs[n] = tmp_path / f"jobs{n}.jsonl"
        r = qb("replay", str(replies), "--transports", TRANSPORTS, "--jobs", str(n), "--out", str(outs[n]), "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["jobs"] == n
    one, four = lines(outs[1]), lines(outs[4])
    assert len(one) == len(four) == 16 * 5
    assert {r["jobs"] for r in one} == {1} and {r["jobs"] for r in four} == {4}
    assert {r["cpus"] for r in one + four} == {cpu_count()}
    key = lambda r: (r["reply_id"], r["transport"])  # noqa: E731
    by_key = {key(r): without(r, MEASURED) for r in four}
    assert [without(r, MEASURED) for r in one] == [by_key[key(r)] for r in one]
    assert any(r["damaged"] for r in one) and any(r["verdict"]["passed"] for r in one)  # a mix, not all alike

    # the report: the same whatever the order of the lines, and never split by jobs
    shuffled = tmp_path / "shuffled.jsonl"
    first = {key(r) for r in one[:40]}
    mixed = one[:40] + [r for r in four if key(r) not in first]  # both invocations' records, each key once
    assert len(mixed) == len(one)
    random.Random(7).shuffle(mixed)
    shuffled.write_text("".join(json.dumps(r) + "\n" for r in mixed))
    reports = [qb("report", str(p), "--json") for p in (outs[1], shuffled)]
    assert all(r.returncode == 0 for r in reports), reports[1].stderr
    assert json.loads(reports[0].stdout) == json.loads(reports[1].stdout)


@pytest.mark.needs("memory-cgroup")
def test_sandboxes_made_at_once_by_a_fresh_process_all_get_their_cgroup() -> None:
    """The first sandboxes of a run are made at once, in worker threads: each must get the process and memory
    caps of its cgroup, none fall back to an rlimit because another thread is making the cgroup parents."""
    script = """
import threading
from transports.sandbox import cgroups
made, start = [], threading.Barrier(8)
def one():
    start.wait()
    g = cgroups.new_group(256)
    made.append(g is not None)
    cgroups.remove(g)
threads = [threading.Thread(target=one) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(sum(made))
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.stdout == "8\n", r.stderr


@pytest.mark.needs("bwrap")
def test_a_campaign_records_its_jobs_and_its_summary_says_them(tmp_path: Path) -> None:
    r = qb("run", "--model", "habits", "--tasks", "file-write/control,file-write/h1", "--contracts", "raw",
           "--transports", "raw,nested", "--jobs", "3", "--out", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["jobs"] == 3
    recs = lines(tmp_path / "results.jsonl")
    assert len(recs) == 4 and {(x["jobs"], x["cpus"]) for x in recs} == {(3, cpu_count())}
    assert all("jobs" not in x for x in lines(tmp_path / "replies.jsonl"))  # a reply does not depend on N
