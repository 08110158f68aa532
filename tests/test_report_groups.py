"""Rank agreement within groups: each suite's on the page as on the terminal, a tau
on few shared tasks marked restricted, and multi-turn configs ranked apart from one-shot ones."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from qb_client.report import compute, render_html, render_terminal
from qb_client.report.fmt import MIN_SHARED_TASKS

from test_report import rec

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]


def scored(rr: list[int], nn: list[int], n: int, *, suite: str = "public", variant: str | None = None,
           prefix: str = "c") -> list[dict]:
    """Config k passes rr[k] of n tasks on RR and nn[k] on NN; with ``variant`` (``turns=3``) each record is
    a chain of the multi-turn arm."""
    records = []
    for k, (r, s) in enumerate(zip(rr, nn)):
        for i in range(n):
            for cell, passed in (("RR", i < r), ("NN", i < s)):
                x = rec(f"f{i}/control", passed, cell=cell, model=f"{prefix}{k + 1}")
                x["suite"] = suite
                if variant:
                    x["config"]["variant"] = variant
                    x["turns"] = [{"turn": 1, "passed": passed, "command": "echo hi", "exit_code": 0, "stop": None}]
                records.append(x)
    return records


def terminal(doc: dict) -> str:
    console = Console(record=True, width=200, file=io.StringIO())
    render_terminal(doc, console)
    return " ".join(console.export_text().split())


def page_text(doc: dict) -> str:
    """The page's text, tags and plots removed, entities decoded."""
    import html

    body = re.sub(r"<svg.*?</svg>", " ", render_html(doc), flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


# ---------------------------------------------------------------- per-suite rank agreement on the page


def two_suites() -> dict:
    """On public the three configs agree (tau 1); on the private split they reverse (tau -1)."""
    return compute(scored([1, 3, 5], [1, 3, 5], 6) + scored([1, 3, 5], [5, 3, 1], 6, suite="private-1"),
                   resamples=200)


def test_each_suite_has_its_own_rank_agreement_in_json() -> None:
    doc = two_suites()
    assert doc["rank_agreement"]["kendall_tau_b"] is None
    assert [(s["suite"], s["design"], s["rank_agreement"]["kendall_tau_b"]) for s in doc["strata"]] == [
        ("public", "one-shot", 1.0), ("private-1", "one-shot", -1.0)]


def test_the_page_shows_each_suites_rank_agreement_as_the_terminal_does() -> None:
    doc = two_suites()
    term, page = terminal(doc), page_text(doc)
    for text in (term, page):
        pub = text.index("Suite public, userland gnu, one-shot (3 config(s))")
        priv = text.index("Suite private-1, userland gnu, one-shot (3 config(s))")
        assert pub < priv
        # each group's own ranking, with the configs' labels and its own selection
        assert "p:c3@high [private-1, gnu]" in text[priv:]
        assert "p:c3@high [public, gnu]" in text[pub:priv]
    assert "Kendall tau-b (RR vs NN) = 1 [" in term[:term.index("Suite private-1")]
    assert "Kendall tau-b (RR vs NN) = -1 [" in term[term.index("Suite private-1"):]
    groups = page[page.index("Suite public, userland gnu"):]
    # the page's stat boxes: tau 1 for public, then tau -1 for the private split, with the regret it implies
    assert re.search(r"Kendall τ b , RR vs NN 1 95% CI", groups[:groups.index("Suite private-1")])
    assert re.search(r"Kendall τ b , RR vs NN -1 95% CI", groups[groups.index("Suite private-1"):])
    assert "Path-aware selection regret -66.7" in groups[groups.index("Suite private-1"):]
    html = render_html(doc)
    assert len(re.findall(r'aria-label="Rank by RR', html)) == 2  # a rank plot per group
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids))  # the two plots' ids do not collide


# ---------------------------------------------------------------- a tau on few shared tasks


def test_a_tau_on_fewer_than_five_shared_tasks_is_marked_restricted() -> None:
    few = compute(scored([1, 2, 3], [1, 3, 2], MIN_SHARED_TASKS - 1), resamples=200)
    assert few["rank_agreement"]["shared_tasks"] == 4 and few["rank_agreement"]["kendall_tau_b"] is not None
    assert "Restricted: tau computed on 4 shared tasks only." in terminal(few)
    assert "restricted: computed on 4 shared tasks only" in page_text(few)
    assert "Restricted: tau computed on 4 shared tasks only." in page_text(few)
    enough = compute(scored([1, 2, 3], [1, 3, 2], MIN_SHARED_TASKS), resamples=200)
    assert enough["rank_agreement"]["shared_tasks"] == 5
    assert "restricted" not in terminal(enough).lower() and "restricted" not in page_text(enough).lower()


def test_the_note_counts_the_shared_tasks_not_each_configs_own() -> None:
    # c1 ran 8 tasks, c2 and c3 only the first 3: compared on 3, so the tau is restricted
    records = scored([4], [4], 8) + [r for r in scored([1, 2, 3], [1, 3, 2], 3) if r["config"]["model"] != "c1"]
    doc = compute(records, resamples=200)
    assert doc["rank_agreement"]["shared_tasks"] == 3
    assert "Restricted: tau computed on 3 shared tasks only." in terminal(doc)


def test_a_restricted_group_is_marked_in_its_own_section() -> None:
    doc = compute(scored([1, 3, 5], [1, 3, 5], 6) + scored([1, 2], [2, 1], 2, suite="private-1"), resamples=200)
    term = terminal(doc)
    private = term.index("Suite private-1")
    assert "Restricted: tau computed on 2 shared tasks only." in term[private:]
    assert "Restricted" not in term[:private]
    page = page_text(doc)
    assert "restricted: computed on 2 shared tasks only" in page[page.index("Suite private-1"):]


# ---------------------------------------------------------------- multi-turn configs ranked apart


def test_multi_turn_configs_are_ranked_apart_from_one_shot_configs() -> None:
    # one-shot: c1 < c2 on both (tau 1). turns=3: t1 ahead on RR, behind on NN (tau -1). Pooled, the four
    # would give one tau mixing a chain's budget with a reply's quality.
    doc = compute(scored([1, 4], [1, 4], 6) + scored([5, 2], [2, 5], 6, variant="turns=3", prefix="t"),
                  resamples=200)
    assert doc["rank_agreement"]["kendall_tau_b"] is None
    assert doc["rank_agreement"]["reason"] == ("the results span 2 designs (one-shot, turns=3), which are never "
                                               "ranked together; see each group's rank agreement")
    assert [(s["design"], s["configs"], s["rank_agreement"]["kendall_tau_b"]) for s in doc["strata"]] == [
        ("one-shot", ["p:c1@high", "p:c2@high"], 1.0),
        ("turns=3", ["p:t1@high+turns=3", "p:t2@high+turns=3"], -1.0)]
    assert {c["label"]: c["design"] for c in doc["configs"]}["p:t1@high+turns=3"] == "turns=3"
    for text in (terminal(doc), page_text(doc)):
        assert "Multi-turn configs (+turns=K) are ranked apart from one-shot configs" in text
        assert "Suite public, userland gnu, multi-turn, turns=3 (2 config(s))" in text
        assert text.index("Suite public, userland gnu, one-shot (2 config(s))") < text.index("multi-turn, turns=3")


def test_each_turn_budget_is_its_own_ranking() -> None:
    doc = compute(scored([1, 4], [1, 4], 6, variant="turns=5", prefix="u")
                  + scored([5, 2], [2, 5], 6, variant="turns=3", prefix="t"), resamples=200)
    assert [s["design"] for s in doc["strata"]] == ["turns=3", "turns=5"]


def test_multi_turn_configs_alone_are_one_ranking() -> None:
    doc = compute(scored([5, 2], [2, 5], 6, variant="turns=3", prefix="t"), resamples=200)
    assert "strata" not in doc and doc["rank_agreement"]["kendall_tau_b"] == -1.0
    assert "ranked apart" not in terminal(doc)


def test_the_real_report_command_keeps_designs_apart(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    records = scored([1, 4], [1, 4], 6) + scored([5, 2], [2, 5], 6, variant="turns=3", prefix="t")
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    page = tmp_path / "page.html"
    r = subprocess.run([*QB, "report", str(results), "--html", str(page)], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())
    assert "Multi-turn configs (+turns=K) are ranked apart" in out and "multi-turn, turns=3 (2 config(s))" in out
    assert "multi-turn, turns=3 (2 config(s))" in page.read_text()
