"""The report as one self-contained HTML page: inline CSS, inline SVG plots, no scripts, no network."""

from __future__ import annotations

import os
import re
from html import escape
from types import ModuleType
from typing import Any

from . import fmt, turns
from .compute import NEEDS_TWO, comparison_note, selection_detail
from .groups import designs_note, heading
from .load import ReportInputError
from .style import CSS


def _plots() -> ModuleType:
    """The figures' module, imported on the first page rendered: it imports matplotlib (about 0.4 s of CPU),
    which a terminal or JSON report, and every command that imports the report package, never needs."""
    from . import plots

    return plots


def _e(x: Any) -> str:
    return escape(str(x), quote=True)


def _td(text: str, cls: str = "", style: str = "", title: str = "") -> str:
    attrs = (f' class="{cls}"' if cls else "") + (f' style="{style}"' if style else "") + (
        f' title="{_e(title)}"' if title else "")
    return f"<td{attrs}>{text}</td>"


# "not run" in a heat cell: hatched, like the heatmap, so it cannot be read as a colour of the scale
NOT_RUN_BG = "background:repeating-linear-gradient(45deg,#fff 0 4px,#d1d5db 4px 5.5px)"


def _formula(text: str) -> str:
    """'Y_NR - Y_RR' as the headings write it: Y<sub>NR</sub> &minus; Y<sub>RR</sub>."""
    return re.sub(r"Y_(\w+)", r"Y<sub>\1</sub>", _e(text)).replace(" - ", " &minus; ")


def _rate_td(rate: float | None, heat: bool = False) -> str:
    if rate is None:
        return _td(fmt.MISSING, "num missing", NOT_RUN_BG if heat else "", "not run" if heat else "")
    style = ""
    if heat:
        from matplotlib.colors import to_hex

        bg = _plots().PASS_CMAP(rate)
        dark = 0.299 * bg[0] + 0.587 * bg[1] + 0.114 * bg[2] < 0.55
        style = f"background:{to_hex(bg)};color:{'#fff' if dark else '#1f2937'}"
    return _td(fmt.pct(rate), "num", style)


def _diff_td(value: float | None) -> str:
    return _td(fmt.pts(value), f"num {fmt.sign(value)}".strip() if value is not None else "num missing")


def _stat_td(stat: dict[str, Any] | None) -> str:
    if stat is None:
        return _td(fmt.MISSING, "num missing")
    ci = stat.get("ci95")
    ci_html = f' <span class="ci">[{fmt.pts(ci[0])}, {fmt.pts(ci[1])}]</span>' if ci else ""
    return _td(f'<span class="v">{fmt.pts(stat["value"])}</span>{ci_html}', f"num {fmt.sign(stat['value'])}".strip())


def _table(head: list[str], rows: list[str], cls: str = "") -> str:
    th = "".join(f"<th>{h}</th>" for h in head)
    body = "".join(f"<tr>{r}</tr>" for r in rows)
    return f'<div class="scroll"><table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'


def _figure(svg: str | None, caption: str) -> str:
    if svg is None:
        return ""
    return f'<figure>{svg}<figcaption>{caption}</figcaption></figure>'


def _cells(configs: list[dict[str, Any]]) -> str:
    head = ["config", "draws"] + [f'{n}<small>{fmt.CELL_HELP[n]}</small>' for n in fmt.CELL_NAMES] + ["provider errors"]
    rows = []
    for c in configs:
        cells = "".join(
            _td(fmt.MISSING, "num missing") if c["cells"][n] is None else
            _td(f'{fmt.pct(c["cells"][n]["rate"])} <span class="ci">{fmt.count(c["cells"][n]["passed"])}/'
                f'{c["cells"][n]["n"]}</span>', "num") for n in fmt.CELL_NAMES)
        rows.append(_td(_e(c["label"]), "label") + _td(str(c["draws"]), "num") + cells
                    + _td(str(c["errors"]), "num" + (" warn" if c["errors"] else " missing")))
    return _table(head, rows)


def _decomposition(configs: list[dict[str, Any]]) -> str:
    head = ["config"] + [f"{t}<small>{_formula(f)}</small>" for _, t, f in fmt.DECOMPOSITION]
    rows = [_td(_e(c["label"]), "label") + "".join(_stat_td(c[k]) for k, _, _ in fmt.DECOMPOSITION) for c in configs]
    return _table(head, rows)


def _paths(configs: list[dict[str, Any]]) -> str:
    rows = [(c, r) for c in configs for r in c.get("paths") or []]
    if not rows:
        return "<p>No raw-contract records on a transport other than raw.</p>"
    head = ["config", "transport or path", "final shell", "pass %", "compared with",
            "damage<small>Y(path) &minus; Y(raw on the same shell)</small>"]
    body = [_td(_e(c["label"]), "label") + _td(_e(r["transport"]), "label") + _td(_e(r["shell"])) + _rate_td(r["rate"])
            + _td(_e(r["baseline"])) + _stat_td(r["damage"]) for c, r in rows]
    return (_figure(_plots().paths_svg(configs), "Bars: damage of each transport or deployment path for raw replies, "
                                                 "relative to raw on the same final shell, with family-bootstrap 95% "
                                                 "intervals.") + _table(head, body) + _baseline_hint(configs))


def _harnesses(configs: list[dict[str, Any]]) -> str:
    rows = [(c, r) for c in configs for r in c.get("harnesses") or []]
    if not rows:
        return "<p>No records of an agent harness route.</p>"
    head = ["config", "harness", "version", "contract", "final shell", "pass %", "compared with",
            "damage<small>Y(harness) &minus; Y(raw on the same shell), same contract</small>",
            "refused<small>transport errors</small>"]
    body = [_td(_e(c["label"]), "label") + _td(_e(r["transport"]), "label") + _td(_e(r["version"] or fmt.MISSING))
            + _td(_e(r["contract"])) + _td(_e(r["shell"]))
            + _td(f'{fmt.pct(r["rate"])} <span class="ci">{fmt.count(r["passed"])}/{r["n"]}</span>', "num")
            + _td(_e(r["baseline"])) + _stat_td(r["damage"]) + _td(str(r["refused"]), "num" + (" warn" if r["refused"] else ""))
            for c, r in rows]
    return (_figure(_plots().harnesses_svg(configs), "Bars: damage of each agent harness for each contract's replies, "
                                                     "relative to raw on the same final shell under the same contract, "
                                                     "with family-bootstrap 95% intervals.") + _table(head, body))


def _baseline_hint(configs: list[dict[str, Any]], group: str = "paths") -> str:
    from .terminal import baseline_hint

    hint = baseline_hint(configs, (group,))
    return f"<p class=\"note\">{_e(hint.plain)}</p>" if hint is not None else ""


def _diagnostics(configs: list[dict[str, Any]]) -> str:
    head = ["config", "retention<small>RR passes still passing in RN</small>",
            "exit-0 wrong<small>failing executions in which a shell ran that exited 0</small>"] + [
        f"{n}<small>damaged / failures</small>" for n in fmt.CELL_NAMES] + ["lost RR&rarr;RN<small>damaged / lost</small>"]
    rows = []
    for c in configs:
        a = c["damage_attribution"]
        rows.append(_td(_e(c["label"]), "label") + _rate_td(c["retention"]) + _rate_td(c["exit_zero_wrong"])
                    + "".join(_td(fmt.attribution(a[n]), "num" + ("" if a[n] else " missing")) for n in fmt.CELL_NAMES)
                    + _td(fmt.lost(a["lost"]), "num" + ("" if a["lost"] else " missing")))
    return _table(head, rows)


def _ranks(doc: dict[str, Any], key: str = "rank") -> str:
    """The rank-agreement section of ``doc`` (the report, or one of its ``strata``); ``key`` names its plot."""
    ra = doc["rank_agreement"]
    sel = selection_detail(doc)
    if sel is None:
        return f'<p class="missing">Rank agreement and selection regret: not computed: {_e(ra.get("reason") or NEEDS_TWO)}.</p>'
    note = comparison_note(doc)
    ci = ra["ci95"]
    short = fmt.restricted(ra)
    parts = ['<div class="stats">',
             f'<div class="stat"><div class="k">Kendall &tau;<sub>b</sub>, RR vs NN</div><div class="big">{fmt.tau(ra["kendall_tau_b"])}</div>'
             f'<div class="ci">{"95% CI [" + fmt.tau(ci[0]) + ", " + fmt.tau(ci[1]) + "]" if ci else "no interval"}'
             ' &middot; task-cluster bootstrap</div>'
             + (f'<div class="ci"><span class="warn">restricted: {_e(short)}</span></div>' if short else "") + '</div>',
             f'<div class="stat"><div class="k">Strict reversals</div><div class="big">{len(ra["reversals"] or [])}</div>'
             '<div class="ci">ahead on RR, behind on NN</div></div>',
             f'<div class="stat"><div class="k">Path-aware selection regret</div><div class="big {fmt.sign(doc["selection_regret"])}">'
             f'{fmt.pts(doc["selection_regret"])}</div><div class="ci">points of NN score lost by picking on RR</div></div>',
             "</div>"]
    tie = " (mean of the tied RR leaders' NN scores)" if len(sel["rr_leaders"]) > 1 else ""
    parts.append(f'<p>Selecting on RR picks <b>{_e(", ".join(sel["rr_leaders"]))}</b>, which reaches '
                 f'{fmt.pct(sel["picked_nn"])}% on NN{tie}; the best on NN is <b>{_e(", ".join(sel["nn_best"]))}</b> '
                 f'at {fmt.pct(sel["best_nn"])}%.</p>')
    if why := fmt.restricted_why(ra):
        parts.append(f'<p class="note">{_e(why)}</p>')
    parts.append(_figure(_plots().rank_svg(doc, key), "Rank by RR (left) and by NN (right). Highlighted lines belong to a pair "
                                                  "whose order strictly reverses; ranks share a number when scores tie."))
    if note:
        parts.append(f'<p class="note">{_e(note)}</p>')
    if ra["reversals"]:
        by = ra["scores"]  # the scores compared, on the shared tasks
        rows = [_td(_e(a), "label") + _td(_e(b), "label")
                + _td(f'{fmt.pct(by[a]["RR"])} vs {fmt.pct(by[b]["RR"])}', "num")
                + _td(f'{fmt.pct(by[a]["NN"])} vs {fmt.pct(by[b]["NN"])}', "num")
                for a, b in ra["reversals"]]
        parts.append(_table(["ahead on RR", "ahead on NN", "RR %", "NN %"], rows))
    return "".join(parts)


def _strata(doc: dict[str, Any]) -> str:
    """Each group's own rank agreement (suite, userland, design), as the terminal shows it; "" for one group."""
    strata = doc.get("strata") or []
    out = [f'<p class="note">{_e(note)}</p>'] if (note := designs_note(strata)) else []
    for k, s in enumerate(strata):
        out.append(f"<h3>{_e(heading(s))}</h3>" + _ranks(s, f"rank-{k + 1}"))
    return "".join(out)


def _contracts(configs: list[dict[str, Any]]) -> str:
    transports = fmt.transports_of(configs)
    if not transports:
        return '<p class="missing">No contract x transport pair present.</p>'
    head = ["config", "contract"] + [_e(t) for t in transports] + ["native &minus; raw<small>Y(native,raw) &minus; Y(raw,raw)</small>"]
    rows = []
    for c in configs:
        items = list(c["contracts"].items())
        for k, (contract, row) in enumerate(items):
            first = (f'<td class="label" rowspan="{len(items)}">{_e(c["label"])}</td>' if k == 0 else "")
            last = (f'<td class="num {fmt.sign(c["native_minus_raw"])}" rowspan="{len(items)}">'
                    f'{fmt.pts(c["native_minus_raw"])}</td>' if k == 0 else "")
            rows.append(first + _td(_e(contract)) + "".join(_rate_td(row.get(t), heat=True) for t in transports) + last)
    out = [_table(head, rows, "grouped")]
    grammar = [c for c in configs if c["grammar"]]
    if grammar:
        out.append("<h3>Grammar crossover</h3><p>Replies written for one declared wrapper, replayed on both. The diagonal "
                   "advantage is the mean of the matched pairs minus the mean of the crossed pairs.</p>")
        rows = []
        for c in grammar:
            tab, d = c["grammar"]["table"], c["grammar"]["diagonal_advantage"]
            rows.append(f'<td class="label" rowspan="2">{_e(c["label"])}</td>' + _td("disclosed <small>bash -c \"R\"</small>")
                        + _rate_td(tab["disclosed"]["nested"], True) + _rate_td(tab["disclosed"]["nested-single"], True)
                        + f'<td class="num {fmt.sign(d)}" rowspan="2">{fmt.pts(d)}</td>')
            rows.append(_td("disclosed-single <small>bash -c 'R'</small>") + _rate_td(tab["disclosed-single"]["nested"], True)
                        + _rate_td(tab["disclosed-single"]["nested-single"], True))
        out.append(_table(["config", "contract", "nested", "nested-single", "diagonal advantage"], rows, "grouped"))
    return "".join(out)


def _families(configs: list[dict[str, Any]]) -> str:
    out = [_figure(_plots().heatmap_svg(configs), "Pass rate % per family (rows) and cell (columns), grouped by config. "
                                                  "Hatched: the cell was not run for that family.")]
    for c in configs:
        if not c["families"]:
            continue
        rows = []
        for fam, row in c["families"].items():
            dmg = row["RN"] - row["RR"] if row["RN"] is not None and row["RR"] is not None else None
            comp = row["NN"] - row["RN"] if row["NN"] is not None and row["RN"] is not None else None
            rows.append(_td(_e(fam), "label") + "".join(_rate_td(row[n], heat=True) for n in fmt.CELL_NAMES)
                        + _diff_td(dmg) + _diff_td(comp))
        out.append(f'<details><summary>{_e(c["label"])}</summary>'
                   + _table(["family"] + list(fmt.CELL_NAMES) + ["damage", "compensation"], rows) + "</details>")
    return "".join(out)


def _headline(configs: list[dict[str, Any]]) -> str:
    items = []
    for c in configs:
        d, k, g = c["damage"], c["compensation"], c["matched_gap"]
        if d and k and g:
            items.append(f'<li><b>{_e(c["label"])}</b>: matched gap <span class="{fmt.sign(g["value"])}">{fmt.pts(g["value"])}</span>'
                         f' = damage <span class="{fmt.sign(d["value"])}">{fmt.pts(d["value"])}</span>'
                         f' + compensation <span class="{fmt.sign(k["value"])}">{fmt.pts(k["value"])}</span></li>')
    return f'<ul class="headline">{"".join(items)}</ul>' if items else ""


BOUNDARY_COST = (
    '<p class="note"><b>Boundary cost on raw</b> = Y<sub>NR</sub> &minus; Y<sub>RR</sub>: what the disclosed contract '
    'costs when the command in fact takes the raw transport. The model was told its reply goes into '
    '<code>bash -c "R"</code> and escaped for that boundary; run as <code>bash -c R</code>, that escaping is '
    'wrong. A negative value is the price of declaring a boundary the command does not cross.</p>')

NOTES = """<ul>
<li><b>Cells.</b> The first letter is the generation contract (R raw, N disclosed boundary: the model is told its reply
R goes into <code>bash -c "R"</code>), the second the execution transport (R raw <code>bash -c R</code>, N nested,
R pasted unescaped between double quotes). Each reply is generated once and replayed on every transport.</li>
<li><b>Rates.</b> A task's pass share is averaged over its draws; a cell's rate is the mean over the tasks present in it.
Records with a provider error are not model failures: they are counted and left out of every rate.</li>
<li><b>Intervals.</b> Decomposition intervals come from a family bootstrap (families resampled with replacement, each
bringing all its tasks; 10,000 resamples, fixed seed, percentile 95%). The rank-agreement interval resamples tasks and
recomputes every config's RR and NN score.</li>
<li><b>Retention</b> pairs RR and RN by task and draw. <b>Exit-0 wrong</b> counts failing executions in which a shell ran.
<b>Selection regret</b>: when several configs tie for the RR lead, the regret is the mean over them (a random pick).</li>
<li><b>Boundary cost on raw</b> (Y<sub>NR</sub> &minus; Y<sub>RR</sub>): the disclosed-boundary reply run on the raw
transport, against the raw reply there; what declaring a boundary costs when the command does not cross it.</li>
<li>A dash means the results hold no data for that statistic; it is never read as zero. In a coloured table or the
heatmap, a hatched cell was not run.</li>
</ul>"""


def _turns(configs: list[dict[str, Any]]) -> str:
    """The multi-turn arm's table ("" when no config has chains)."""
    if not any(c.get("turns") for c in configs):
        return ""
    heads, rows = turns.table_rows(configs)
    body = [_td(_e(label), "label") + "".join(_td(_e(v)) for v in vals[:2]) + "".join(_td(_e(v), "num") for v in vals[2:])
            for label, vals in rows]
    return f"<p>{_e(turns.CAPTION)}</p>" + _table(["config", "contract", "transport", *heads], body)


def render_html(doc: dict[str, Any]) -> str:
    """The whole page as a string."""
    configs = doc["configs"]
    n_rec = sum(c["records"] for c in configs)
    n_err = sum(c["errors"] for c in configs)
    sections = [
        ("cells", "Cells", "<p>Pass rate % (passed / tasks) in each contract &times; transport cell.</p>" + _cells(configs)),
        ("decomposition", "Decomposition",
         '<p class="formula">Y<sub>NN</sub> &minus; Y<sub>RR</sub> = (Y<sub>RN</sub> &minus; Y<sub>RR</sub>) + '
         '(Y<sub>NN</sub> &minus; Y<sub>RN</sub>): <b>matched gap</b> = <b>transport damage</b> + <b>compensation</b></p>'
         + _headline(configs)
         + _figure(_plots().decomposition_svg(configs), "Bars: transport damage and compensation with family-bootstrap 95% "
                                                         "intervals. Diamond: matched gap, the sum of the two.")
         + _decomposition(configs) + BOUNDARY_COST),
        ("paths", "Deployment paths", "<p>For raw replies: what each transport or deployment path does, compared "
                                      "with raw on the same final shell, so that the route's own boundary is "
                                      "measured apart from the shell.</p>" + _paths(configs)),
        ("harnesses", "Agent harnesses", "<p>The released agent harnesses themselves (docs/harnesses.md), each "
                                         "driven offline with one tool call carrying R: each contract's replies "
                                         "through the harness, compared with the same replies on raw with the "
                                         "harness's final shell.</p>" + _harnesses(configs) + _baseline_hint(configs, "harnesses")),
        *([("turns", "Multi-turn arm", _turns(configs))] if _turns(configs) else []),
        ("ranks", "Rank agreement and selection", _ranks(doc) + _strata(doc)),
        ("families", "Per family", _families(configs)),
        ("contracts", "Contract &times; transport", _contracts(configs)),
        ("diagnostics", "Retention, exit codes, damage attribution",
         "<p><b>exit-0 wrong</b>: of the failing executions in which a shell ran (an exit code, or a timeout), "
         "the share whose exit code was 0. Failures where no shell ran (transport errors, no tool call or no "
         "command extracted) are left out.</p>" + _diagnostics(configs)),
        ("notes", "How to read this", NOTES),
    ]
    nav = "".join(f'<a href="#{k}">{t}</a>' for k, t, _ in sections)
    body = "".join(f'<section id="{k}"><h2>{t}</h2>{b}</section>' for k, t, b in sections)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>QuoteBench report</title><style>{CSS}</style></head><body><main>"
            f'<header><h1>QuoteBench report</h1><p class="lede">{escape(fmt.suites_line(configs))}'
            f'{len(configs)} config(s) &middot; {n_rec} records &middot; '
            f'{n_err} error(s) (provider or harness) excluded from rates &middot; rates in %, differences in percentage points</p>'
            f"<nav>{nav}</nav></header>{body}</main></body></html>\n")


def write_html(doc: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Write the page to ``path`` (UTF-8); an unwritable path is bad input."""
    text = render_html(doc)
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as e:
        raise ReportInputError(f"{os.fspath(path)}: cannot write: {e.strerror or e}") from None
