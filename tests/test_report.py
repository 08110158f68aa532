"""The report: loading, every statistic on small hand-computed cases, the JSON shape, the renderers."""

from __future__ import annotations

import io
import json
import re
import time

import numpy as np
import pytest
from rich.console import Console
from scipy import stats as scipy_stats

from qb_client.report import (
    ReportInputError, compute, load_records, render_html, render_terminal, report_command, write_html,
)
from qb_client.report import stats

CELL = {"RR": ("raw", "raw"), "RN": ("raw", "nested"), "NR": ("disclosed", "raw"), "NN": ("disclosed", "nested")}


def rec(task: str, passed: bool, *, cell: str | None = None, contract: str = "raw", transport: str = "raw",
        draw: int = 0, damaged: bool = False, exit_code: int | None = 0, error: str | None = None,
        transport_error: str | None = None, model: str = "m", provider: str = "p", effort: str = "high") -> dict:
    """A record dict with every Record field; ``cell`` ('RN', ...) sets contract and transport."""
    if cell:
        contract, transport = CELL[cell]
    family, tier = task.split("/")
    return {
        "run_id": "run", "reply_id": f"r-{task}-{contract}-{draw}",
        "config": {"provider": provider, "model": model, "effort": effort, "params": {}},
        "contract": contract, "transport": transport, "task_id": task, "family": family, "tier": tier,
        "draw": draw, "reply": "echo hi", "command": "echo hi", "received": "echo hi", "damaged": damaged,
        "exit_code": exit_code, "stdout": {"text": "", "truncated": False}, "stderr": {"text": "", "truncated": False},
        "timed_out": False, "transport_error": transport_error,
        "verdict": {"passed": passed, "checks": [{"check": "file-bytes", "ok": passed, "detail": ""}]},
        "usage": {"input_tokens": None, "output_tokens": None, "reasoning_tokens": None},
        "timing": {"generate_ms": None, "exec_ms": 1.0}, "versions": {"quotebench": "0"}, "isolation": None,
        "error": error,
    }


def write(tmp_path, name: str, records: list[dict], tail: str = "") -> str:
    p = tmp_path / name
    p.write_text("".join(json.dumps(r) + "\n" for r in records) + tail, encoding="utf-8")
    return str(p)


def one(doc: dict, label: str | None = None) -> dict:
    configs = doc["configs"]
    return configs[0] if label is None else next(c for c in configs if c["label"] == label)


# A tiny config by hand: families a and b, two tasks each.
#   RR: 4/4 pass.  RN: only a/control passes (a/h1 damaged exit 0, b/control damaged exit 0, b/h1 undamaged exit 1).
#   NR: b/h1 fails (exit 0).  NN: a/h1 fails (exit 2).
# Y_RR = 1, Y_RN = 1/4, Y_NR = 3/4, Y_NN = 3/4 -> damage -3/4, compensation +1/2, gap -1/4, boundary -1/4.
# retention: 1 of 4 RR passes still passes in RN = 1/4.
# exit-zero-wrong: failing executions in which a shell ran: RN x3 (0, 0, 1), NR (0), NN (2) -> 3/5.
#   Excluded: a json-naive transport error (nothing ran) and a provider-error record (exit 0).
def tiny() -> list[dict]:
    return [
        *[rec(t, True, cell="RR") for t in ("a/control", "a/h1", "b/control", "b/h1")],
        rec("a/control", True, cell="RN"),
        rec("a/h1", False, cell="RN", damaged=True, exit_code=0),
        rec("b/control", False, cell="RN", damaged=True, exit_code=0),
        rec("b/h1", False, cell="RN", damaged=False, exit_code=1),
        rec("a/control", True, cell="NR"), rec("a/h1", True, cell="NR"), rec("b/control", True, cell="NR"),
        rec("b/h1", False, cell="NR", exit_code=0),
        rec("a/control", True, cell="NN"), rec("a/h1", False, cell="NN", exit_code=2, damaged=True),
        rec("b/control", True, cell="NN"), rec("b/h1", True, cell="NN"),
        rec("a/control", False, contract="raw", transport="json-naive", exit_code=None, damaged=True,
            transport_error="json: Invalid control character"),
        rec("b/h1", False, contract="native", transport="raw", exit_code=0, error="provider: 529 overloaded"),
    ]


# ---------------------------------------------------------------- records and loading


def test_helper_makes_valid_records():
    from transports.results.record import Record

    Record.model_validate(rec("a/control", True))


def test_load_tolerates_torn_last_line(tmp_path, capsys):
    path = write(tmp_path, "r.jsonl", tiny(), tail='{"run_id": "x", "reply_id": "y", "conf')
    records = load_records([path])
    assert len(records) == len(tiny())
    assert "torn" in capsys.readouterr().err


def test_load_refuses_garbage_in_the_middle(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps(rec("a/control", True)) + "\nnot json\n" + json.dumps(rec("a/h1", True)) + "\n")
    with pytest.raises(ReportInputError, match=r"r\.jsonl: line 2: not valid JSON"):
        load_records([str(p)])


def test_load_names_file_line_and_missing_field(tmp_path):
    bad = rec("a/h1", True)
    del bad["verdict"]["passed"]
    path = write(tmp_path, "r.jsonl", [rec("a/control", True), bad])
    with pytest.raises(ReportInputError) as e:
        load_records([path])
    msg = str(e.value)
    assert "\n" not in msg and "r.jsonl" in msg and "line 2" in msg and "verdict.passed" in msg
    assert isinstance(e.value, ValueError)
    bad = rec("a/h1", True)
    del bad["task_id"]
    with pytest.raises(ReportInputError, match=r"line 1: field 'task_id': missing"):
        load_records([write(tmp_path, "s.jsonl", [bad])])


def test_load_refuses_a_file_without_records(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ReportInputError, match="empty.jsonl: no records"):
        load_records([str(empty)])
    with pytest.raises(ReportInputError, match="cannot read"):
        load_records([str(tmp_path / "absent.jsonl")])


def test_duplicates_are_resolved_last_one_wins(tmp_path):
    first = write(tmp_path, "a.jsonl", [rec("a/control", False)])
    again = write(tmp_path, "b.jsonl", [rec("a/control", True)])
    records = load_records([first, again], warn=lambda m: None)
    assert len(records) == 1 and records[0]["verdict"]["passed"] is True


# ---------------------------------------------------------------- statistics by hand


def test_cells_and_decomposition_by_hand():
    c = one(compute(tiny(), resamples=200))
    assert c["label"] == "p:m@high"
    assert c["cells"]["RR"] == {"passed": 4, "n": 4, "rate": 1.0}
    assert c["cells"]["RN"] == {"passed": 1, "n": 4, "rate": 0.25}
    assert c["cells"]["NR"]["rate"] == 0.75 and c["cells"]["NN"]["rate"] == 0.75
    assert c["damage"]["value"] == pytest.approx(-0.75)
    assert c["compensation"]["value"] == pytest.approx(0.5)
    assert c["matched_gap"]["value"] == pytest.approx(-0.25)
    assert c["boundary_cost"]["value"] == pytest.approx(-0.25)
    assert c["matched_gap"]["value"] == pytest.approx(c["damage"]["value"] + c["compensation"]["value"])
    for key in ("damage", "compensation", "matched_gap", "boundary_cost"):
        lo, hi = c[key]["ci95"]
        assert lo <= c[key]["value"] <= hi


def test_retention_exit_zero_wrong_and_attribution_by_hand():
    c = one(compute(tiny(), resamples=200))
    assert c["retention"] == pytest.approx(0.25)
    assert c["exit_zero_wrong"] == pytest.approx(3 / 5)
    a = c["damage_attribution"]
    assert a["RN"] == {"failures": 3, "damaged": 2}
    assert a["RR"] == {"failures": 0, "damaged": 0}
    assert a["NN"] == {"failures": 1, "damaged": 1}
    assert a["lost"] == {"n": 3, "damaged": 2}


def test_per_family_table_by_hand():
    fam = one(compute(tiny(), resamples=200))["families"]
    assert list(fam) == ["a", "b"]
    assert fam["a"] == {"RR": 1.0, "RN": 0.5, "NR": 1.0, "NN": 0.5}
    assert fam["b"] == {"RR": 1.0, "RN": 0.0, "NR": 0.5, "NN": 1.0}


def test_error_records_are_excluded_and_counted():
    records = tiny() + [rec("c/control", True, cell="RR", error="provider: timeout"),
                        rec("a/control", False, cell="RR", draw=1, error="provider: 500")]
    c = one(compute(records, resamples=200))
    assert c["errors"] == 3  # the native one in tiny() and these two
    assert c["cells"]["RR"] == {"passed": 4, "n": 4, "rate": 1.0}  # c/control is absent, not a pass
    assert c["draws"] == 1
    assert "native" not in c["contracts"]  # its only record was a provider error
    assert "c" not in c["families"]


def test_draws_are_averaged_per_task():
    # t1: pass, pass, fail over three draws (share 2/3); t2: one draw, pass (share 1).
    # Y = (2/3 + 1) / 2 = 5/6, not the pooled 3/4.
    records = [rec("a/control", True, cell="RR", draw=0), rec("a/control", True, cell="RR", draw=1),
               rec("a/control", False, cell="RR", draw=2), rec("a/h1", True, cell="RR", draw=0)]
    c = one(compute(records, resamples=100))
    assert c["cells"]["RR"]["rate"] == pytest.approx(5 / 6)
    assert c["cells"]["RR"]["n"] == 2
    assert c["cells"]["RR"]["passed"] == pytest.approx(5 / 3, abs=1e-6)
    assert c["draws"] == 3


def test_retention_pairs_by_task_and_draw():
    # draw 0 passes RR and RN; draw 1 passes RR and fails RN; draw 2 fails RR (not counted) -> 1/2.
    records = [rec("a/control", True, cell="RR", draw=0), rec("a/control", True, cell="RN", draw=0),
               rec("a/control", True, cell="RR", draw=1), rec("a/control", False, cell="RN", draw=1),
               rec("a/control", False, cell="RR", draw=2), rec("a/control", True, cell="RN", draw=2)]
    assert one(compute(records, resamples=100))["retention"] == pytest.approx(0.5)


def test_missing_cells_are_null_not_zero():
    doc = compute([rec("a/control", True, cell="RR"), rec("a/h1", False, cell="RR", exit_code=1)], resamples=100)
    c = one(doc)
    assert c["cells"]["RR"]["rate"] == 0.5
    for name in ("RN", "NR", "NN"):
        assert c["cells"][name] is None
    for key in ("damage", "compensation", "matched_gap", "boundary_cost", "retention", "native_minus_raw", "grammar"):
        assert c[key] is None
    assert c["exit_zero_wrong"] == 0.0  # one failing execution, exit 1: a real zero
    assert c["families"]["a"]["RN"] is None
    assert c["damage_attribution"]["RN"] is None and c["damage_attribution"]["lost"] is None
    assert doc["rank_agreement"] == {"kendall_tau_b": None, "ci95": None, "reversals": None, "shared_tasks": None,
                                     "restricted": [], "scores": None,
                                     "reason": "needs at least two configs with both RR and NN cells"}
    assert doc["selection_regret"] is None
    assert "null" in json.dumps(doc)


def test_contract_by_transport_and_native_minus_raw():
    records = [rec("a/control", True, cell="RR"), rec("a/h1", True, cell="RR"),
               rec("a/control", True, contract="native", transport="raw"),
               rec("a/h1", False, contract="native", transport="raw"),
               rec("a/control", False, contract="raw", transport="json-naive+ssh"),
               rec("a/h1", True, contract="raw", transport="json-naive+ssh")]
    c = one(compute(records, resamples=100))
    assert c["contracts"] == {"raw": {"raw": 1.0, "json-naive+ssh": 0.5}, "native": {"raw": 0.5}}
    assert c["native_minus_raw"] == pytest.approx(-0.5)


def test_grammar_crossover_by_hand():
    def four(contract, transport, k):  # k of 4 tasks pass
        return [rec(t, i < k, contract=contract, transport=transport)
                for i, t in enumerate(("a/control", "a/h1", "b/control", "b/h1"))]
    records = (four("disclosed", "nested", 3) + four("disclosed", "nested-single", 1)
               + four("disclosed-single", "nested", 2) + four("disclosed-single", "nested-single", 4))
    g = one(compute(records, resamples=100))["grammar"]
    assert g["table"] == {"disclosed": {"nested": 0.75, "nested-single": 0.25},
                          "disclosed-single": {"nested": 0.5, "nested-single": 1.0}}
    # matched (0.75 + 1.0) / 2 = 0.875; crossed (0.25 + 0.5) / 2 = 0.375 -> +0.5
    assert g["diagonal_advantage"] == pytest.approx(0.5)


def test_grammar_is_null_without_its_contract_and_transport():
    records = [rec("a/control", True, contract="disclosed", transport="nested-single")]
    assert one(compute(records, resamples=100))["grammar"] is None


# ---------------------------------------------------------------- bootstrap


def test_resampled_rates_by_hand():
    # family A: 2 tasks, both pass; family B: 2 tasks, both fail.
    counts = np.array([[2, 0], [1, 1], [0, 2], [1, 1]])
    rates = stats.resampled_rates(counts, np.array([2.0, 0.0]), np.array([2.0, 2.0]))
    assert rates.tolist() == [1.0, 0.5, 0.0, 0.5]
    # a drawn family with no task in the cell brings nothing; drawing none at all is NaN
    rates = stats.resampled_rates(np.array([[2, 0], [0, 2]]), np.array([0.0, 1.0]), np.array([0.0, 1.0]))
    assert np.isnan(rates[0]) and rates[1] == 1.0


def test_resample_counts_are_seeded_multinomial_draws():
    a = stats.resample_counts(14, 10_000, seed=7)
    b = stats.resample_counts(14, 10_000, seed=7)
    assert a.shape == (10_000, 14) and (a == b).all()
    assert (a.sum(axis=1) == 14).all()
    assert a.mean() == pytest.approx(1.0, abs=0.02)  # each family is drawn once on average


def test_family_bootstrap_degenerate_case_has_zero_width():
    # three identical families: control passes RR and fails RN, h1 fails both -> damage -0.5 in every resample
    records = []
    for f in ("a", "b", "c"):
        records += [rec(f"{f}/control", True, cell="RR"), rec(f"{f}/h1", False, cell="RR", exit_code=1),
                    rec(f"{f}/control", False, cell="RN"), rec(f"{f}/h1", False, cell="RN")]
    c = one(compute(records))
    assert c["damage"] == {"value": -0.5, "ci95": [-0.5, -0.5]}


def test_family_bootstrap_hand_checkable_interval():
    # family a passes RR everywhere, family b fails everywhere, RN fails everywhere: damage = -Y_RR.
    # Resampled Y_RR is 1, 1/2, 0 with probabilities 1/4, 1/2, 1/4, so the 95% interval is [-1, 0]
    # and about half of the resamples give -1/2.
    records = [rec("a/control", True, cell="RR"), rec("a/h1", True, cell="RR"),
               rec("b/control", False, cell="RR"), rec("b/h1", False, cell="RR")]
    records += [rec(t, False, cell="RN") for t in ("a/control", "a/h1", "b/control", "b/h1")]
    c = one(compute(records))
    assert c["damage"] == {"value": -0.5, "ci95": [-1.0, 0.0]}
    counts = stats.resample_counts(2)
    share = np.mean(stats.resampled_rates(counts, np.array([2.0, 0.0]), np.array([2.0, 2.0])) == 0.5)
    assert share == pytest.approx(0.5, abs=0.02)


def test_bootstrap_is_reproducible():
    assert compute(tiny()) == compute(tiny())


def test_bootstrap_is_fast():
    records = []
    families = [f"f{k:02d}" for k in range(14)]
    for f in families:
        for i, tier in enumerate(("control", "h1", "h2", "h3")):
            for name in CELL:
                records.append(rec(f"{f}/{tier}", (i + len(name) + len(f)) % 3 != 0, cell=name))
    t0 = time.perf_counter()
    c = one(compute(records))
    assert time.perf_counter() - t0 < 1.0
    assert c["cells"]["RR"]["n"] == 56


# ---------------------------------------------------------------- rank agreement and regret


def test_kendall_tau_b_with_ties_by_hand():
    # x = (1, 2, 2, 3), y = (2, 1, 3, 3); the six pairs:
    # (0,1) discordant, (0,2) concordant, (0,3) concordant, (1,2) tied in x, (1,3) concordant, (2,3) tied in y.
    # tau_b = (C - D) / sqrt((n0 - n1)(n0 - n2)) = (3 - 1) / sqrt((6 - 1)(6 - 1)) = 0.4
    x, y = [1, 2, 2, 3], [2, 1, 3, 3]
    assert stats.kendall_tau_b(x, y) == pytest.approx(0.4)
    assert scipy_stats.kendalltau(x, y, variant="b").statistic == pytest.approx(0.4)
    rows = stats.kendall_tau_b_rows(np.array([x, [1, 2, 3, 4]], float), np.array([y, [4, 3, 2, 1]], float))
    assert rows.tolist() == pytest.approx([0.4, -1.0])
    assert np.isnan(stats.kendall_tau_b_rows(np.array([[1.0, 1.0]]), np.array([[1.0, 2.0]])))[0]
    assert stats.kendall_tau_b([1, 1], [1, 2]) is None


def configs_with_scores(rr: list[int], nn: list[int], n: int = 4, tasks: list[str] | None = None) -> list[dict]:
    """Config k passes rr[k] of n tasks on RR and nn[k] on NN (one family per task, unless ``tasks`` names them)."""
    tasks = tasks or [f"f{i}/control" for i in range(n)]
    records = []
    for k, (r, s) in enumerate(zip(rr, nn)):
        for i, task in enumerate(tasks):
            records.append(rec(task, i < r, cell="RR", model=f"c{k + 1}"))
            records.append(rec(task, i < s, cell="NN", model=f"c{k + 1}"))
    return records


TINY_TASKS = ["a/control", "a/h1", "b/control", "b/h1"]  # the tasks of tiny(), so configs compare with it


def test_rank_agreement_and_reversals_by_hand():
    doc = compute(configs_with_scores([1, 2, 2, 3], [2, 1, 3, 3]), resamples=500)
    ra = doc["rank_agreement"]
    assert ra["kendall_tau_b"] == pytest.approx(0.4)
    # only c2 vs c1 reverses strictly (c2 ahead on RR, behind on NN); the other pairs tie on a side or agree
    assert ra["reversals"] == [["p:c2@high", "p:c1@high"]]
    lo, hi = ra["ci95"]
    assert -1.0 <= lo <= hi <= 1.0
    # RR picks c4 (NN 3/4), which is also the best NN score
    assert doc["selection_regret"] == 0.0


def test_selection_regret_breaks_rr_ties_by_averaging():
    # c1 and c2 tie for the RR lead (3/4); their NN scores are 1/4 and 3/4, the best NN is c3's 4/4.
    # regret = mean(1/4, 3/4) - 1 = -1/2
    doc = compute(configs_with_scores([3, 3, 1], [1, 3, 4]), resamples=200)
    assert doc["selection_regret"] == pytest.approx(-0.5)


# ---------------------------------------------------------------- outputs


SPEC_CONFIG_KEYS = {"config", "draws", "cells", "damage", "compensation", "matched_gap", "boundary_cost", "retention",
                    "exit_zero_wrong", "contracts", "native_minus_raw", "grammar", "families"}


def test_json_shape():
    doc = compute(tiny() + configs_with_scores([1, 2], [2, 1], tasks=TINY_TASKS), resamples=200)
    text = json.dumps(doc, allow_nan=False)
    doc = json.loads(text)
    assert set(doc) == {"configs", "rank_agreement", "selection_regret"}
    assert set(doc["rank_agreement"]) == {"kendall_tau_b", "ci95", "reversals", "shared_tasks", "restricted", "scores",
                                          "reason"}
    for c in doc["configs"]:
        assert SPEC_CONFIG_KEYS <= set(c)
        assert set(c["config"]) == {"provider", "model", "effort", "params"}
        assert set(c["cells"]) == {"RR", "RN", "NR", "NN"}
        for cell in c["cells"].values():
            assert cell is None or set(cell) == {"passed", "n", "rate"}
        for key in ("damage", "compensation", "matched_gap", "boundary_cost"):
            assert c[key] is None or (set(c[key]) == {"value", "ci95"} and len(c[key]["ci95"]) == 2)
        for row in c["families"].values():
            assert set(row) == {"RR", "RN", "NR", "NN"}
    c = one(doc, "p:m@high")
    assert 0 <= c["cells"]["RR"]["rate"] <= 1 and -1 <= c["damage"]["value"] <= 1


def test_report_command_json_prints_one_document(tmp_path, capsys):
    path = write(tmp_path, "r.jsonl", tiny())
    assert report_command([path], None, True) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)
    assert one(doc)["cells"]["RN"]["rate"] == 0.25


def test_terminal_renders_intervals_as_points():
    console = Console(record=True, width=220, file=io.StringIO())
    render_terminal(compute(tiny() + configs_with_scores([1, 2], [2, 1], tasks=TINY_TASKS), resamples=200), console)
    text = console.export_text()
    assert re.search(r"-75\.0 \[-?\d+\.\d, -?\d+\.\d\]", text)
    assert "p:m@high" in text and "Kendall tau-b" in text and "regret" in text


def test_html_is_self_contained(tmp_path):
    doc = compute(tiny() + configs_with_scores([1, 2, 3], [2, 1, 3], tasks=TINY_TASKS), resamples=200)
    page = render_html(doc)
    assert "<svg" in page and page.count("<svg") == 4  # decomposition, deployment paths, ranks, families
    assert "http://" not in page and "https://" not in page
    assert "<script" not in page and "<link" not in page and " src=" not in page
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))  # several plots on one page never share an id
    out = tmp_path / "report.html"
    write_html(doc, out)
    assert out.read_text(encoding="utf-8") == page


def test_html_with_missing_cells_still_renders():
    page = render_html(compute([rec("a/control", True, cell="RR")], resamples=50))
    assert "\u2014" in page and "http" not in page


def test_write_html_to_a_bad_path_is_bad_input(tmp_path):
    with pytest.raises(ReportInputError, match="cannot write"):
        write_html(compute(tiny(), resamples=50), tmp_path / "missing-dir" / "r.html")


def test_mcp_session_end_records_are_not_counted_as_errors(tmp_path) -> None:
    import json as _json

    from qb_client.report import compute, load_records

    base = rec("file-write/control", True, contract="native")
    end = {**base, "command": None, "error": "session-end: shutdown", "reply_id": "mcp-stdio-session-end"}
    f = tmp_path / "calls.jsonl"
    f.write_text(_json.dumps(base) + "\n" + _json.dumps(end) + "\n")
    warnings: list[str] = []
    records = load_records([f], warn=warnings.append)
    assert len(records) == 1 and records[0]["error"] is None
    assert any("session-end" in w for w in warnings)
    assert compute(records)["configs"][0]["errors"] == 0


def test_separate_mcp_sessions_are_kept_apart(tmp_path) -> None:
    def call(reply_id: str, passed: bool) -> dict:
        return {**rec("file-write/control", passed, contract="native", provider="mcp", model="claude-code"),
                "reply_id": reply_id}

    # two sessions that reused one _meta id, and a session of another server run: all draw 0 of one task
    calls = [call("mcp-meta-h-1a2b3c4d-1", False), call("mcp-meta-h-1a2b3c4d-2", True),
             call("mcp-meta-h-5e6f7a8b-1", False), call("mcp-stdio-9c0d1e2f-1", True)]
    path = write(tmp_path, "calls.jsonl", calls)
    warnings: list[str] = []
    records = load_records([path], warn=warnings.append)
    assert [r["reply_id"] for r in records] == [c["reply_id"] for c in calls] and warnings == []
    # the same file given twice still counts each call once
    records = load_records([path, path], warn=warnings.append)
    assert len(records) == 4 and any("4 duplicate execution(s)" in w for w in warnings)
    # other providers still collapse one execution read twice, whatever its reply_id
    a, b = rec("a/control", False), {**rec("a/control", True), "reply_id": "another"}
    assert len(load_records([write(tmp_path, "x.jsonl", [a, b])], warn=lambda m: None)) == 1


def test_report_html_to_a_bad_path_prints_nothing(tmp_path, capsys):
    path = write(tmp_path, "r.jsonl", tiny())
    with pytest.raises(ReportInputError, match="cannot write"):
        report_command([path], str(tmp_path / "missing-dir" / "r.html"), True)
    assert capsys.readouterr().out == ""


def test_report_json_is_valid_utf8_with_a_lone_surrogate(tmp_path, capsys):
    path = write(tmp_path, "r.jsonl", [rec("a/control", True, model="m\udcff")])
    assert report_command([path], None, True) == 0
    out = capsys.readouterr().out
    out.encode("utf-8")  # strict
    assert one(json.loads(out))["label"] == "p:m\udcff@high"


def test_exit_zero_wrong_says_what_it_counts():
    c = one(compute(tiny(), resamples=50))
    # tiny(): 5 failing executions where a shell ran (3 exited 0); the json-naive transport error is left out,
    # and the provider-error record is no execution of the config at all
    assert c["exit_zero_wrong"] == pytest.approx(3 / 5)
    assert c["exit_zero_wrong_counts"] == {"exit_zero": 3, "failing_with_shell": 5, "failing_without_shell": 1}
    no_call = rec("b/control", False, contract="native", exit_code=None, damaged=False)
    c = one(compute(tiny() + [no_call], resamples=50))
    assert c["exit_zero_wrong_counts"]["failing_without_shell"] == 2 and c["exit_zero_wrong"] == pytest.approx(3 / 5)
    console = Console(record=True, width=400, file=io.StringIO())
    render_terminal(compute(tiny(), resamples=50), console)
    text = " ".join(console.export_text().split())
    assert "exit-0 wrong: of failing executions in which a shell ran, % that exited 0" in text
    assert "transport errors, no tool call or no command - are left out" in text
    page = render_html(compute(tiny(), resamples=50))
    assert "of the failing executions in which a shell ran" in page and "are left out" in page


def test_the_suite_and_userland_are_said_first_in_terminal_and_html() -> None:
    """A single-suite report once named its suite nowhere; a private split must read as one."""
    private = [dict(r, suite="private-1234abcd", userland="busybox") for r in tiny()]
    doc = compute(private, resamples=50)
    console = Console(record=True, width=400, file=io.StringIO())
    render_terminal(doc, console)
    assert "Suite private-1234abcd, userland busybox." in console.export_text()
    assert "Suite private-1234abcd, userland busybox." in render_html(doc)
    both = compute(tiny() + private, resamples=50)
    console = Console(record=True, width=400, file=io.StringIO())
    render_terminal(both, console)
    assert "2 suite/userland combinations, never pooled." in console.export_text()
