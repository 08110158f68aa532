"""Reply stores say which suite their replies were made on.

Task ids are the same in every suite, so a store made on a generated (private)
suite and replayed without its ``--suite`` was silently scored against the
public suite: 0/56 everywhere. Now every reply line a campaign (or
``import-inspect``) writes carries ``suite`` and ``userland``; ``replay`` and
``run --model replay:FILE`` refuse a line made on another suite than the active
one, naming both ids, unless ``--allow-suite-mismatch``; a store without suite
ids (older, or written by hand) still works, with one warning line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]
TASKS = "file-write/control,file-write/h1"


def qb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*QB, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"}, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def private(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """A generated suite, its id, and a campaign made on it (the reference agent, raw x raw)."""
    d = tmp_path_factory.mktemp("store-suite")
    r = qb("tasks", "generate", "--seed", "store-suite-1", "--out", str(d / "suite"), "--json")
    assert r.returncode == 0, r.stderr
    sid = json.loads(r.stdout)["suite"]
    r = qb("run", "--model", "reference", "--suite", str(d / "suite"), "--out", str(d / "camp"), "--tasks", TASKS,
           "--contracts", "raw", "--transports", "raw")
    assert r.returncode == 0, r.stderr
    return d / "suite", sid, d / "camp"


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_a_campaign_store_records_its_suite_and_userland(private: tuple[Path, str, Path]) -> None:
    _, sid, camp = private
    assert {(x["suite"], x["userland"]) for x in lines(camp / "replies.jsonl")} == {(sid, "gnu")}


def test_replaying_it_without_its_suite_is_refused_naming_both_ids(private: tuple[Path, str, Path],
                                                                   tmp_path: Path) -> None:
    _, sid, camp = private
    store = camp / "replies.jsonl"
    out = tmp_path / "results.jsonl"
    r = qb("replay", str(store), "--transports", "raw", "--out", str(out))
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"quotebench: error: {store}: line 1: made on suite {sid}, but the active suite "
                               "is public;"), r.stderr
    assert "--allow-suite-mismatch" in r.stderr and not out.exists()
    r = qb("run", "--model", f"replay:{store}", "--out", str(tmp_path / "camp2"), "--tasks", TASKS,
           "--contracts", "raw", "--transports", "raw")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and f"made on suite {sid}, but the active suite is " \
        "public" in r.stderr, r.stderr
    assert not (tmp_path / "camp2").exists()


def test_with_its_suite_it_replays_and_passes(private: tuple[Path, str, Path], tmp_path: Path) -> None:
    suite, sid, camp = private
    out = tmp_path / "results.jsonl"
    r = qb("replay", str(camp / "replies.jsonl"), "--suite", str(suite), "--transports", "raw", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "suite" not in r.stderr  # nothing to warn about
    recs = lines(out)
    assert len(recs) == 2 and all(x["suite"] == sid and x["verdict"]["passed"] for x in recs)


def test_the_flag_scores_it_on_the_active_suite_with_a_note(private: tuple[Path, str, Path], tmp_path: Path) -> None:
    _, sid, camp = private
    out = tmp_path / "results.jsonl"
    r = qb("replay", str(camp / "replies.jsonl"), "--transports", "raw", "--out", str(out), "--allow-suite-mismatch")
    assert r.returncode == 0, r.stderr
    assert f"replies made on suite {sid} (2) are scored on suite public (--allow-suite-mismatch)" in r.stderr
    assert {x["suite"] for x in lines(out)} == {"public"}
    r = qb("run", "--model", f"replay:{camp / 'replies.jsonl'}", "--out", str(tmp_path / "camp2"), "--tasks", TASKS,
           "--contracts", "raw", "--transports", "raw", "--allow-suite-mismatch")
    assert r.returncode == 0, r.stderr


def test_an_older_store_without_suite_ids_still_works_with_one_warning(private: tuple[Path, str, Path],
                                                                        tmp_path: Path) -> None:
    _, _, camp = private
    old = tmp_path / "old.jsonl"
    old.write_text("".join(json.dumps({k: v for k, v in x.items() if k not in ("suite", "userland")}) + "\n"
                           for x in lines(camp / "replies.jsonl")))
    out = tmp_path / "results.jsonl"
    r = qb("replay", str(old), "--transports", "raw", "--out", str(out))
    assert r.returncode == 0, r.stderr
    warnings = [x for x in r.stderr.splitlines() if "suite id" in x]
    assert warnings == [f"quotebench: warning: {old}: 2 line(s) carry no suite id (written before stores recorded "
                        "one); scored on the active suite public"], r.stderr
    assert len(lines(out)) == 2


def test_a_suite_field_that_is_not_an_id_is_bad_input(tmp_path: Path) -> None:
    store = tmp_path / "s.jsonl"
    store.write_text(json.dumps({"task_id": "file-write/control", "command": "true", "suite": 7}) + "\n")
    r = qb("replay", str(store), "--transports", "raw", "--out", str(tmp_path / "r.jsonl"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert f"{store}: line 1: field 'suite' is not a suite id" in r.stderr
