"""The main job: `quotebench demo` offline, end to end, and its report recomputed by hand from the JSONL."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]


def test_demo_runs_offline_and_its_report_matches_a_recount(tmp_path: Path) -> None:
    out, html = tmp_path / "demo", tmp_path / "report.html"
    r = subprocess.run([*QB, "demo", "--out", str(out), "--html", str(html)], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "QuoteBench report" in r.stdout and "transport damage" in r.stdout
    page = html.read_text()
    assert page.count("<svg") >= 3 and "http://" not in page.replace("http://www.w3.org", "")
    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2 * 56 * 2 * 8
    assert {x["transport"] for x in records} == {"raw", "nested", "ssh", "escaped", "tempscript", "raw@dash",
                                                 "docker-sh", "shlex-sh"}
    assert "Damage by transport and deployment path" in r.stdout

    doc = json.loads(subprocess.run([*QB, "report", str(out / "results.jsonl"), "--json"], capture_output=True,
                                    text=True, timeout=120).stdout)
    # recount by hand: pass share of the 56 tasks per cell, per config
    passed: dict[tuple[str, str], int] = defaultdict(int)
    n: dict[tuple[str, str], int] = defaultdict(int)
    failing: dict[str, list[dict]] = defaultdict(list)
    cell_of = {("raw", "raw"): "RR", ("raw", "nested"): "RN", ("disclosed", "raw"): "NR", ("disclosed", "nested"): "NN"}
    for x in records:
        label = f"{x['config']['provider']}:{x['config']['model']}@{x['config']['effort']}"
        if not x["verdict"]["passed"]:
            failing[label].append(x)
        cell = cell_of.get((x["contract"], x["transport"]))
        if cell:
            n[label, cell] += 1
            passed[label, cell] += x["verdict"]["passed"]
    for cfg in doc["configs"]:
        label = cfg["label"]
        y = {c: passed[label, c] / n[label, c] for c in ("RR", "RN", "NR", "NN")}
        for c in y:
            assert n[label, c] == 56 and abs(cfg["cells"][c]["rate"] - y[c]) < 1e-9, (label, c)
        assert abs(cfg["damage"]["value"] - (y["RN"] - y["RR"])) < 1e-9
        assert abs(cfg["compensation"]["value"] - (y["NN"] - y["RN"])) < 1e-9
        assert abs(cfg["matched_gap"]["value"] - (y["NN"] - y["RR"])) < 1e-9
        assert abs(cfg["boundary_cost"]["value"] - (y["NR"] - y["RR"])) < 1e-9
        lo, hi = cfg["damage"]["ci95"]
        assert lo <= cfg["damage"]["value"] <= hi
        ran = [x for x in failing[label] if x["exit_code"] is not None or x["timed_out"]]
        assert abs(cfg["exit_zero_wrong"] - sum(x["exit_code"] == 0 for x in ran) / len(ran)) < 1e-9
    ref = next(c for c in doc["configs"] if c["label"].startswith("reference"))
    assert ref["cells"]["RR"]["rate"] == ref["cells"]["NN"]["rate"] == 1.0
    assert ref["damage"]["value"] < -0.5 and ref["compensation"]["value"] > 0.5
