"""Configs that ran different task sets are compared only on the tasks they share (the real `quotebench report`).

Rank agreement, reversals and selection regret compare configs; a 4-task run
must not be ranked against an 8-task run on their own task sets. Per-config
cells stay over each config's own tasks and say their n.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from test_report import rec

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]


def report(*paths: Path, as_json: bool = True) -> subprocess.CompletedProcess[str]:
    args = [*QB, "report", *map(str, paths), *(["--json"] if as_json else [])]
    return subprocess.run(args, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})


def run_file(path: Path, model: str, rr: dict[str, bool], nn: dict[str, bool]) -> Path:
    """A results file of one config: its RR and NN verdicts per task."""
    records = [rec(t, ok, cell="RR", model=model) for t, ok in rr.items()]
    records += [rec(t, ok, cell="NN", model=model) for t, ok in nn.items()]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def verdicts(tasks: range, passing: set[int]) -> dict[str, bool]:
    return {f"f{i}/control": i in passing for i in tasks}


def three_runs(tmp_path: Path) -> list[Path]:
    """a ran tasks 1-4; b and c ran 1-8. On their own tasks the order flips (tau 0, regret -12.5 points);
    on the 4 tasks all three share, RR and NN agree exactly (tau 1, no reversal, regret 0)."""
    return [
        run_file(tmp_path / "a.jsonl", "a", verdicts(range(1, 5), {1, 2, 3, 4}), verdicts(range(1, 5), {1, 2})),
        run_file(tmp_path / "b.jsonl", "b", verdicts(range(1, 9), {1, 2, 3, 5, 6, 7, 8}),
                 verdicts(range(1, 9), {1, 5, 6, 7, 8})),
        run_file(tmp_path / "c.jsonl", "c", verdicts(range(1, 9), {1, 2}), verdicts(range(1, 9), {5, 6, 7, 8})),
    ]


def test_configs_are_compared_on_the_tasks_they_share(tmp_path: Path) -> None:
    r = report(*three_runs(tmp_path))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    ra = doc["rank_agreement"]
    assert ra["shared_tasks"] == 4
    assert ra["restricted"] == [{"config": "p:b@high", "tasks": {"RR": 8, "NN": 8}},
                                {"config": "p:c@high", "tasks": {"RR": 8, "NN": 8}}]
    assert ra["scores"] == {"p:a@high": {"RR": 1.0, "NN": 0.5}, "p:b@high": {"RR": 0.75, "NN": 0.25},
                            "p:c@high": {"RR": 0.5, "NN": 0.0}}
    assert ra["kendall_tau_b"] == 1.0 and ra["reversals"] == [] and ra["reason"] is None
    assert doc["selection_regret"] == 0.0
    # each config's own cells are untouched, over its own tasks
    cells = {c["label"]: (c["cells"]["RR"], c["cells"]["NN"]) for c in doc["configs"]}
    assert cells["p:b@high"] == ({"passed": 7, "n": 8, "rate": 0.875}, {"passed": 5, "n": 8, "rate": 0.625})
    assert cells["p:a@high"] == ({"passed": 4, "n": 4, "rate": 1.0}, {"passed": 2, "n": 4, "rate": 0.5})


def test_the_terminal_says_what_was_compared(tmp_path: Path) -> None:
    r = report(*three_runs(tmp_path), as_json=False)
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "Kendall tau-b (RR vs NN) = 1 [" in text
    assert ("Note: Configs are compared on the 4 task(s) all of them ran in both RR and NN; restricted to those: "
            "p:b@high (8 RR, 8 NN tasks), p:c@high (8 RR, 8 NN tasks). Per-config cells are each over their own "
            "tasks (n).") in text
    assert "Reversals: none" in text
    assert "87.5 (7/8)" in text  # b's own RR cell, with its n


def test_configs_without_a_shared_task_are_not_compared(tmp_path: Path) -> None:
    a = run_file(tmp_path / "a.jsonl", "a", verdicts(range(1, 5), {1, 2, 3, 4}), verdicts(range(1, 5), {1}))
    b = run_file(tmp_path / "b.jsonl", "b", verdicts(range(5, 9), {5}), verdicts(range(5, 9), {5, 6, 7, 8}))
    r = report(a, b)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    reason = ("the configs share no task with both RR and NN (p:a@high 4 RR / 4 NN, p:b@high 4 RR / 4 NN), so they "
              "cannot be compared")
    assert doc["rank_agreement"] == {"kendall_tau_b": None, "ci95": None, "reversals": None, "shared_tasks": 0,
                                     "restricted": [{"config": "p:a@high", "tasks": {"RR": 4, "NN": 4}},
                                                    {"config": "p:b@high", "tasks": {"RR": 4, "NN": 4}}],
                                     "scores": None, "reason": reason}
    assert doc["selection_regret"] is None
    assert [c["cells"]["RR"]["rate"] for c in doc["configs"]] == [1.0, 0.25]  # each still reported alone
    text = " ".join(report(a, b, as_json=False).stdout.split())
    assert f"Rank agreement and selection regret: not computed: {reason}." in text
    assert "Kendall" not in text and "regret: -" not in text and "regret: +" not in text


def test_a_perfect_agreement_is_exactly_1(tmp_path: Path) -> None:
    # five configs on the same six tasks passing 0..4 of them on both RR and NN: scipy's tau-b is
    # 0.9999999999999999 here; the report says 1 (JSON 1.0), with no restriction note
    paths = [run_file(tmp_path / f"{k}.jsonl", f"m{k}", verdicts(range(6), set(range(k))), verdicts(range(6), set(range(k))))
             for k in range(5)]
    doc = json.loads(report(*paths).stdout)
    assert repr(doc["rank_agreement"]["kendall_tau_b"]) == "1.0"
    assert doc["rank_agreement"]["shared_tasks"] == 6 and doc["rank_agreement"]["restricted"] == []
    text = " ".join(report(*paths, as_json=False).stdout.split())
    assert "Kendall tau-b (RR vs NN) = 1 [" in text and "Note: Configs are compared" not in text
