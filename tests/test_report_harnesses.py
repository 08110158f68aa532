"""The report's agent harness group: each harness route per contract, against raw on
the same final shell under the same contract, apart from the deployment paths, in the JSON, the terminal and
the HTML page. Exact values on a hand-sized results file whose baselines all differ, so a wrong baseline
(another contract's, or another shell's) changes the number. A harness record with a malformed field is one
line naming the file, the line and the field."""

from __future__ import annotations

import io
import json
from pathlib import Path

import anyio
import numpy as np
import pytest
from probes import cli_process, one_line_refusal
from rich.console import Console

from qb_client.report import fmt, stats
from qb_client.report.compute import compute
from qb_client.report.load import load_records
from qb_client.report.page import render_html
from qb_client.report.terminal import render_terminal
from tasks.load import get_task
from tasks.validate import Verdict
from transports.execute import execute
from transports.results.record import ConfigInfo, Output, Record
from transports.sandbox import Limits

TASKS = [(f"{f}/{k}", f) for f in ("fa", "fb", "fc", "fd") for k in (1, 2)]
HARNESS = {"claude-code": ("claude-code", "2.1.197"), "mini-swe-agent": ("mini-swe-agent", "2.4.6"),
           "some-agent": ("some-agent", "9.9")}  # some-agent: not registered; its records name it


def rec(task: str, family: str, transport: str, contract: str, passed: bool, *, shell: str = "bash",
        refused: bool = False, named: bool = True) -> dict:
    h = HARNESS.get(transport) if named else None
    return Record(run_id="r", reply_id=f"{task}-{contract}", config=ConfigInfo(provider="p", model="m"),
                  contract=contract, transport=transport, shell=shell, task_id=task, family=family, tier="control",
                  reply="x", command="x", received=None if refused else "x", damaged=refused,
                  exit_code=None if refused else 0, stdout=Output(), stderr=Output(), timed_out=False,
                  transport_error="a NUL byte" if refused else None, verdict=Verdict(passed=passed, checks=[]),
                  harness=h[0] if h else None, harness_version=h[1] if h else None).model_dump(mode="json")


OUTCOME = {  # (transport, contract, shell) -> pass per task, in TASKS order
    ("raw", "raw", "bash"): [1, 1, 1, 1, 1, 1, 1, 1],
    ("raw", "disclosed", "bash"): [1, 1, 1, 1, 0, 0, 0, 0],
    ("raw@dash", "raw", "dash"): [1, 1, 0, 0, 0, 0, 0, 0],
    ("claude-code", "raw", "bash"): [0, 1, 1, 1, 1, 1, 1, 1],
    ("claude-code", "disclosed", "bash"): [1, 1, 1, 1, 1, 0, 0, 0],
    ("mini-swe-agent", "raw", "dash"): [1, 1, 1, 0, 0, 0, 0, 0],
    ("some-agent", "raw", "bash"): [1, 1, 1, 1, 1, 1, 1, 1],
    ("docker-sh", "raw", "dash"): [1, 0, 0, 0, 0, 0, 0, 0],
}


def records() -> list[dict]:
    out = []
    for (transport, contract, shell), passes in OUTCOME.items():
        for (task, fam), p in zip(TASKS, passes):
            # mini-swe-agent's last task: refused before the harness started, so its record names no harness
            refused = transport == "mini-swe-agent" and task == "fd/2"
            out.append(rec(task, fam, transport, contract, bool(p), shell=shell, refused=refused, named=not refused))
    return out


def rows_of(doc: dict) -> dict[tuple[str, str], dict]:
    return {(r["transport"], r["contract"]): r for r in doc["configs"][0]["harnesses"]}


def expected_damage(a: list[int], b: list[int]) -> tuple[float, list[float]]:
    """The value and family-bootstrap interval of rate(a) - rate(b), from the statistics module directly."""
    counts = stats.resample_counts(4, stats.RESAMPLES, stats.SEED)
    sizes = np.full(4, 2.0)

    def sums(p: list[int]) -> np.ndarray:
        return np.array([p[0] + p[1], p[2] + p[3], p[4] + p[5], p[6] + p[7]], dtype=float)

    boot = stats.resampled_rates(counts, sums(a), sizes) - stats.resampled_rates(counts, sums(b), sizes)
    return sum(a) / 8 - sum(b) / 8, stats.percentile_ci(boot)


def test_harnesses_are_their_own_group_with_the_right_baselines() -> None:
    doc = compute(records())
    rows = rows_of(doc)
    assert list(rows) == [("claude-code", "raw"), ("claude-code", "disclosed"), ("mini-swe-agent", "raw"),
                          ("some-agent", "raw")]  # registered order, then by name; raw before disclosed
    # paths keep the deployment paths only: no harness there, registered or named by its records
    assert [p["transport"] for p in doc["configs"][0]["paths"]] == ["docker-sh"]
    cc = rows[("claude-code", "raw")]
    assert (cc["harness"], cc["version"], cc["shell"], cc["baseline"]) == ("claude-code", "2.1.197", "bash", "raw")
    assert (cc["passed"], cc["n"], cc["rate"], cc["refused"]) == (7, 8, 0.875, 0)
    cases = {  # row -> (its passes, the baseline it must be compared with: same contract, same final shell)
        ("claude-code", "raw"): ("claude-code", "raw", "bash", "raw", "raw", "bash"),
        ("claude-code", "disclosed"): ("claude-code", "disclosed", "bash", "raw", "disclosed", "bash"),
        ("mini-swe-agent", "raw"): ("mini-swe-agent", "raw", "dash", "raw@dash", "raw", "dash"),
    }
    for key, (t, c, s, bt, bc, bs) in cases.items():
        value, ci = expected_damage(OUTCOME[(t, c, s)], OUTCOME[(bt, bc, bs)])
        assert rows[key]["baseline"] == bt
        assert rows[key]["damage"]["value"] == stats.clean(value), key
        assert rows[key]["damage"]["ci95"] == ci, key
    assert rows[("claude-code", "disclosed")]["damage"]["value"] == 0.125  # vs (raw, raw) it would be -0.375
    mini = rows[("mini-swe-agent", "raw")]
    assert (mini["shell"], mini["version"], mini["refused"], mini["passed"]) == ("dash", "2.4.6", 1, 3)
    assert mini["damage"]["value"] == 0.125  # vs raw on bash it would be -0.625
    assert rows[("some-agent", "raw")]["version"] == "9.9"


def test_a_harness_whose_baseline_did_not_run_has_no_damage() -> None:
    doc = compute([r for r in records() if r["transport"] != "raw@dash"])
    mini = rows_of(doc)[("mini-swe-agent", "raw")]
    assert mini["damage"] is None and mini["rate"] == 3 / 8


def test_terminal_and_page_show_the_group_apart_from_the_paths(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records()))
    doc = compute(load_records([str(path)]))
    buf = io.StringIO()
    render_terminal(doc, Console(file=buf, width=250, color_system=None))
    text = buf.getvalue()
    paths_part = text[text.index("Damage by transport"):text.index("Agent harnesses")]
    harness_part = text[text.index("Agent harnesses"):text.index("Retention")]
    assert "docker-sh" in paths_part and "claude-code" not in paths_part and "mini-swe-agent" not in paths_part
    lines = [x for x in harness_part.splitlines() if "│" in x]
    cc_disclosed = next(x for x in lines if "disclosed" in x)
    assert "5/8" in cc_disclosed and "+12.5" in cc_disclosed
    mini = next(x for x in lines if "mini-swe-agent" in x)
    assert [c.strip() for c in mini.strip("│ ").split("│")] == [  # the config's key is blank below its first row
        "mini-swe-agent", "2.4.6", "raw", "dash", "37.5", "3/8", "raw@dash",
        fmt.interval({"value": 0.125, "ci95": expected_damage(OUTCOME[("mini-swe-agent", "raw", "dash")],
                                                              OUTCOME[("raw@dash", "raw", "dash")])[1]}), "1"]
    html = render_html(doc)
    paths_html = html[html.index('<section id="paths">'):html.index('<section id="harnesses">')]
    harness_html = html[html.index('<section id="harnesses">'):]
    harness_html = harness_html[:harness_html.index("</section>")]
    assert "docker-sh" in paths_html and "claude-code" not in paths_html
    assert harness_html.count("<tr>") == 5  # the head and four rows
    assert "<svg" in harness_html and "2.1.197" in harness_html and "some-agent" in harness_html
    assert 'class="num warn">1</td>' in harness_html  # mini-swe-agent's refused record


@pytest.mark.needs("bwrap")
def test_a_harness_record_with_a_non_string_harness_version_is_one_line_in_report(tmp_path: Path) -> None:
    """Attack (a hostile results file for ``quotebench report``): a real ``raw`` record, and a copy of it on
    ``claude-code`` whose optional ``harness_version`` is a list. Safe behaviour (docs/spec.md, Record format): the
    report refuses a malformed field with one line naming the file, the line and the field, exit 2."""
    task = get_task("file-write/control")
    r = anyio.run(lambda: execute(task, "raw", task.solution, limits=Limits(timeout_s=40)))
    good = r.model_dump(mode="json")
    bad = dict(good, transport="claude-code", harness="claude-code", harness_version=["2.1.197"])
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    done = cli_process("report", str(path), "--json")
    assert one_line_refusal(done) and str(path) in done.stderr, done.stderr[-400:]
