"""Reply stores and results files as real JSONL on disk, read through the real CLI (a subprocess).

The rule (transports/results/store.py): only an unterminated last line that is not
complete JSON is a write torn by a kill; it is skipped (readers) or removed
(a writer resuming), and stderr says so. Any other bad line is bad input: exit 2,
one line naming the file and the line, before anything runs. In a reply store a
line repeating an earlier one exactly is dropped with a note; a different reply
under the same key (reply_id, or config + task + contract + draw) is refused,
naming both lines. The replay summary has one row per config.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]
WRITE = "echo hello world > out.txt"


def qb(*args: str, columns: int = 200) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run([*QB, *args], capture_output=True, text=True, timeout=300, env=env)


def line(**fields: object) -> str:
    return json.dumps(fields) + "\n"


def one_error(r: subprocess.CompletedProcess[str], expect: str) -> None:
    """Exit 2, nothing on stdout, exactly one line on stderr: the error, starting with ``expect``."""
    assert r.returncode == 2, r.stderr
    assert r.stdout == "" and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"quotebench: error: {expect}"), r.stderr


def records(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


# ---------------------------------------------------------------- torn and malformed lines in a reply store


def test_a_malformed_middle_line_stops_replay_before_anything_runs(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    store.write_text(line(task_id="file-write/control", command=WRITE) + '{"task_id": "file-write/h1", "comm\n'
                     + line(task_id="file-write/h2", command=WRITE))
    out = tmp_path / "results.jsonl"
    r = qb("replay", str(store), "--transports", "raw", "--out", str(out))
    one_error(r, f"{store}: line 2: not valid JSON (Unterminated string starting at: line 1 column 30 (char 29))")
    assert not out.exists()


def test_a_torn_last_line_of_a_store_is_skipped_and_said(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    store.write_text(line(task_id="file-write/control", command=WRITE) + "\n"
                     + line(task_id="file-write/h1", command=WRITE) + '{"task_id": "file-write/h2", "comm')
    out = tmp_path / "results.jsonl"
    r = qb("replay", str(store), "--transports", "raw", "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["replies"] == 2
    assert (f"quotebench: warning: {store}: skipped the torn last line 4 (no newline, not complete JSON: a write "
            "cut short by a kill)\n") in r.stderr
    assert sorted(x["task_id"] for x in records(out)) == ["file-write/control", "file-write/h1"]


def test_a_bad_last_line_with_its_newline_is_not_taken_for_a_torn_write(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    store.write_text(line(task_id="file-write/control", command=WRITE) + '{"task_id": "file-write/h1", "comm\n')
    r = qb("replay", str(store), "--transports", "raw", "--out", str(tmp_path / "results.jsonl"))
    one_error(r, f"{store}: line 2: not valid JSON (")


# ---------------------------------------------------------------- duplicate replies


def test_exact_repeats_are_dropped_with_a_note_and_run_once(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    a = line(task_id="file-write/control", command=WRITE)
    b = line(task_id="file-write/h1", command=WRITE, reply_id="mine-1")
    store.write_text(a + b + a + b + a)  # a store concatenated with itself
    out = tmp_path / "results.jsonl"
    r = qb("replay", str(store), "--transports", "raw,nested", "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["replies"] == 2 and doc["executed_now"] == 4
    assert (f"quotebench: warning: {store}: dropped 3 line(s) repeating an earlier line exactly: "
            "3 (= line 1), 4 (= line 2), 5 (= line 1)\n") in r.stderr
    got = records(out)
    assert len(got) == 4 and len({(x["reply_id"], x["transport"]) for x in got}) == 4


def test_two_different_replies_for_one_key_are_refused_naming_both_lines(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    store.write_text(line(task_id="file-write/control", command=WRITE)
                     + line(task_id="file-write/h1", command=WRITE)
                     + line(task_id="file-write/control", command="echo other > out.txt"))
    out = tmp_path / "results.jsonl"
    r = qb("replay", str(store), "--transports", "raw", "--out", str(out))
    one_error(r, f"{store}: line 3: a second reply for task file-write/control, contract raw, draw 0 of config "
                 "replay:replies.jsonl@unset (line 1 has a different one; give each reply its own 'draw', "
                 "or remove one)")
    assert not out.exists()
    # as the message says: under distinct draws both replies run, and both are kept apart in the records
    store.write_text(line(task_id="file-write/control", command=WRITE)
                     + line(task_id="file-write/control", command="echo other > out.txt", draw=1))
    r = qb("replay", str(store), "--transports", "raw", "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    assert sorted((x["draw"], x["verdict"]["passed"]) for x in records(out)) == [(0, True), (1, False)]


def test_a_reply_id_used_twice_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    store.write_text(line(task_id="file-write/control", command=WRITE, reply_id="r-7")
                     + line(task_id="file-write/h1", command=WRITE, reply_id="r-7"))
    r = qb("replay", str(store), "--transports", "raw", "--out", str(tmp_path / "results.jsonl"))
    one_error(r, f"{store}: line 2: a second reply for reply_id 'r-7' (line 1 has a different one;")


def test_the_replay_provider_follows_the_same_duplicate_rule(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    store.write_text(line(task_id="file-write/control", command=WRITE)
                     + line(task_id="file-write/control", command="echo other > out.txt"))
    r = qb("run", "--model", f"replay:{store}", "--tasks", "file-write/control", "--contracts", "raw",
           "--transports", "raw", "--out", str(tmp_path / "run"))
    one_error(r, f"{store}: line 2: a second reply for task file-write/control, contract raw, draw 0 of config "
                 "replay:replies.jsonl@unset (line 1 has a different one;")


# ---------------------------------------------------------------- the summary: one row per config


def test_the_replay_summary_has_one_row_per_config(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    good = {"provider": "anthropic", "model": "m", "effort": "high", "params": {}}
    bad = {"provider": "openai", "model": "g", "effort": "unset", "params": {}}
    store.write_text(line(task_id="file-write/control", command=WRITE, config=good)
                     + line(task_id="file-write/control", command='echo "hello world" > out.txt', draw=1, config=good)
                     + line(task_id="file-write/control", command="true", config=bad))
    out = tmp_path / "results.jsonl"
    r = qb("replay", str(store), "--transports", "raw,nested", "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    rows = [(c["config"], c["contract"], c["transport"], c["passed"], c["n"], c["rate"])
            for c in json.loads(r.stdout)["cells"]]
    assert rows == [("anthropic:m@high", "raw", "raw", 2, 2, 1.0), ("anthropic:m@high", "raw", "nested", 1, 2, 0.5),
                    ("openai:g@unset", "raw", "raw", 0, 1, 0.0), ("openai:g@unset", "raw", "nested", 0, 1, 0.0)]
    table = qb("replay", str(store), "--transports", "raw,nested", "--out", str(out))
    assert table.returncode == 0, table.stderr
    body = [ln.split("│")[1:-1] for ln in table.stdout.splitlines() if "@" in ln]
    assert [[cell.strip() for cell in row] for row in body] == [
        ["anthropic:m@high", "raw x raw", "2/2", "100.0%", "0", "0", "0"],
        ["anthropic:m@high", "raw x nested", "1/2", "50.0%", "1", "0", "0"],
        ["openai:g@unset", "raw x raw", "0/1", "0.0%", "0", "0", "0"],
        ["openai:g@unset", "raw x nested", "0/1", "0.0%", "0", "0", "0"]], table.stdout


# ---------------------------------------------------------------- results files: resume and report


def _campaign(out: Path) -> subprocess.CompletedProcess[str]:
    return qb("run", "--model", "reference", "--tasks", "file-write/*", "--contracts", "raw", "--transports", "raw",
              "--out", str(out), "--json")


def test_a_resumed_campaign_removes_a_torn_last_line_and_redoes_it(tmp_path: Path) -> None:
    assert _campaign(tmp_path).returncode == 0
    results = tmp_path / "results.jsonl"
    kept = results.read_text().splitlines(keepends=True)
    assert len(kept) == 4
    results.write_text("".join(kept[:3]) + kept[3][:50])  # killed while writing the fourth record
    r = _campaign(tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["executed"] == 1
    assert (f"quotebench: warning: {results}: removed the torn last line 4 (no newline, not complete JSON: a write "
            "cut short by a kill); what it held is done again\n") in r.stderr
    got = records(results)  # every line parses: the torn one did not stay in the middle
    assert len(got) == 4 and len({x["task_id"] for x in got}) == 4


def test_a_campaign_refuses_a_malformed_middle_line_of_its_results(tmp_path: Path) -> None:
    assert _campaign(tmp_path).returncode == 0
    results = tmp_path / "results.jsonl"
    kept = results.read_text().splitlines(keepends=True)
    results.write_text(kept[0] + kept[1][:50] + "\n" + "".join(kept[2:]))
    before = results.read_bytes()
    r = _campaign(tmp_path)
    one_error(r, f"{results}: line 2: not valid JSON (")
    assert results.read_bytes() == before  # nothing was run, nothing was appended


def test_replay_refuses_a_malformed_middle_line_of_its_out_file(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    store.write_text(line(task_id="file-write/control", command=WRITE))
    out = tmp_path / "results.jsonl"
    out.write_text("garbage\n" + line(task_id="x"))
    one_error(qb("replay", str(store), "--transports", "raw", "--out", str(out)), f"{out}: line 1: not valid JSON (")


def test_report_refuses_a_torn_line_that_is_not_last(tmp_path: Path) -> None:
    assert _campaign(tmp_path).returncode == 0
    results = tmp_path / "results.jsonl"
    kept = results.read_text().splitlines(keepends=True)
    results.write_text("".join(kept[:2]) + kept[2][:60] + "\n" + kept[3])  # an old writer's repaired tear
    one_error(qb("report", str(results), "--json"), f"{results}: line 3: not valid JSON (")
    results.write_text("".join(kept[:3]) + kept[3][:60] + "\n")  # a bad last line, but with its newline
    one_error(qb("report", str(results), "--json"), f"{results}: line 4: not valid JSON (")
    results.write_text("".join(kept[:3]) + kept[3][:60])  # torn: skipped, and said
    r = qb("report", str(results), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["configs"][0]["cells"]["RR"]["n"] == 3
    assert f"{results}: skipped the torn last line 4 (no newline, not complete JSON" in r.stderr


def test_bad_usage_or_timing_in_a_store_is_one_line_at_load(tmp_path) -> None:
    import subprocess
    import sys

    for field, value, message in (("usage", {"input_tokens": "x"}, "field 'usage.input_tokens'"),
                                  ("timing", {"generate_ms": "slow"}, "field 'timing.generate_ms': not a number")):
        store = tmp_path / f"{field}.jsonl"
        store.write_text(json.dumps({"task_id": "file-write/control", "command": "true", field: value}) + "\n")
        out = tmp_path / f"{field}-results.jsonl"
        done = subprocess.run([sys.executable, "-c", "from qb_client.cli import main; main()", "replay", str(store),
                               "--transports", "raw", "--out", str(out)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert f"{store}: line 1: {message}" in done.stderr and not out.exists()


def test_report_given_a_reply_store_says_so(tmp_path: Path) -> None:
    """A newcomer's ``report replies.jsonl`` once read "field 'run_id': missing"."""
    store = tmp_path / "replies.jsonl"
    store.write_text(json.dumps({"task_id": "file-write/control", "command": "echo hi > out.txt"}) + "\n")
    r = qb("report", str(store))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "this is a reply store" in r.stderr and "quotebench replay" in r.stderr and "run_id" not in r.stderr
