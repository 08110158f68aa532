"""The report on a terminal: rich tables built from the ``report --json`` document."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from . import fmt
from .compute import selection_detail

STYLE = {"neg": "red", "pos": "green", "": ""}


def _diff(stat: dict[str, Any] | None) -> Text:
    if stat is None:
        return Text(fmt.MISSING, style="dim")
    return Text(fmt.interval(stat), style=STYLE[fmt.sign(stat["value"])])


def _rate(rate: float | None) -> Text:
    return Text(fmt.pct(rate), style="dim" if rate is None else "")


def _table(title: str, caption: str | None = None) -> Table:
    return Table(title=Text(title, style="bold"), title_justify="left",
                 caption=Text(caption, style="dim") if caption else None, caption_justify="left",
                 header_style="bold", pad_edge=False)


def _label_column(t: Table, configs: list[dict[str, Any]], title: str = "config") -> None:
    """Labels are never cut: the column is as wide as the longest one."""
    width = max([len(title)] + [len(c["label"]) for c in configs])
    t.add_column(title, no_wrap=True, min_width=width)


def _cells(configs: list[dict[str, Any]]) -> Table:
    t = _table("Cells: pass rate % (passed/tasks)",
               "RR raw reply, raw transport; RN raw reply, nested; NR disclosed reply, raw; NN disclosed reply, nested. "
               "Draw-averaged; provider errors excluded.")
    _label_column(t, configs)
    t.add_column("draws", justify="right")
    for name in fmt.CELL_NAMES:
        t.add_column(name, justify="right")
    t.add_column("errors", justify="right")
    for c in configs:
        t.add_row(Text(c["label"]), str(c["draws"]), *[Text(fmt.cell(c["cells"][n]), style="" if c["cells"][n] else "dim")
                                                  for n in fmt.CELL_NAMES],
                  Text(str(c["errors"]), style="yellow" if c["errors"] else "dim"))
    return t


def _decomposition(configs: list[dict[str, Any]]) -> Table:
    t = _table("Decomposition, points [family-bootstrap 95% interval]",
               "matched gap = damage + compensation: Y_NN - Y_RR = (Y_RN - Y_RR) + (Y_NN - Y_RN).")
    _label_column(t, configs)
    for _, title, formula in fmt.DECOMPOSITION:
        t.add_column(f"{title}\n{formula}", justify="right")
    for c in configs:
        t.add_row(Text(c["label"]), *[_diff(c[key]) for key, _, _ in fmt.DECOMPOSITION])
    return t


def _diagnostics(configs: list[dict[str, Any]]) -> Table:
    t = _table("Retention, exit codes and damage attribution",
               "retention: of RR passes, % still passing in RN (same task and draw). exit-0 wrong: of failing "
               "executions in which a shell ran, % that exited 0 (failures where no shell ran - transport errors, "
               "no tool call or no command - are left out). damaged/failures: executions whose received program "
               "differed from R.")
    _label_column(t, configs)
    t.add_column("retention %", justify="right")
    t.add_column("exit-0 wrong %", justify="right")
    for n in fmt.CELL_NAMES:
        t.add_column(f"{n} damaged/\nfailures", justify="right")
    t.add_column("lost RR->RN\ndamaged/n", justify="right")
    for c in configs:
        a = c["damage_attribution"]
        t.add_row(Text(c["label"]), _rate(c["retention"]), _rate(c["exit_zero_wrong"]),
                  *[fmt.attribution(a[n]) for n in fmt.CELL_NAMES], fmt.lost(a["lost"]))
    return t


def _ranks(doc: dict[str, Any]) -> list[Any]:
    ra = doc["rank_agreement"]
    comp = [c for c in doc["configs"] if c["cells"]["RR"] and c["cells"]["NN"]]
    if len(comp) < 2:
        return [Text("Rank agreement: needs at least two configs with both RR and NN cells.", style="dim")]
    rr_order = sorted(comp, key=lambda c: (-c["cells"]["RR"]["rate"], c["label"]))
    nn_rank = {c["label"]: 1 + sum(o["cells"]["NN"]["rate"] > c["cells"]["NN"]["rate"] + 1e-12 for o in comp)
               for c in comp}
    rr_rank = {c["label"]: 1 + sum(o["cells"]["RR"]["rate"] > c["cells"]["RR"]["rate"] + 1e-12 for o in comp)
               for c in comp}
    t = _table(f"Rank agreement: Kendall tau-b (RR vs NN) = {fmt.tau_interval(ra)}",
               "interval: task-cluster bootstrap 95%. Ranks share a number when scores tie.")
    _label_column(t, comp)
    t.add_column("RR %", justify="right")
    t.add_column("RR rank", justify="right")
    t.add_column("NN %", justify="right")
    t.add_column("NN rank", justify="right")
    for c in rr_order:
        lab = c["label"]
        move = rr_rank[lab] - nn_rank[lab]
        t.add_row(Text(lab), fmt.pct(c["cells"]["RR"]["rate"]), str(rr_rank[lab]), fmt.pct(c["cells"]["NN"]["rate"]),
                  Text(f"{nn_rank[lab]}" + (f" ({move:+d})" if move else ""),
                       style="green" if move > 0 else "red" if move < 0 else ""))
    out: list[Any] = [t]
    rev = ra["reversals"] or []
    if rev:
        lines = Text(f"Reversals ({len(rev)}): ahead on RR, behind on NN (strictly)\n", style="bold")
        by = {c["label"]: c for c in comp}
        for a, b in rev:
            ra_, rb_ = by[a]["cells"], by[b]["cells"]
            lines.append(f"  {a} over {b}: RR {fmt.pct(ra_['RR']['rate'])} vs {fmt.pct(rb_['RR']['rate'])}, "
                         f"NN {fmt.pct(ra_['NN']['rate'])} vs {fmt.pct(rb_['NN']['rate'])}\n")
        out.append(lines)
    else:
        out.append(Text("Reversals: none (no pair is strictly ahead on RR and strictly behind on NN)."))
    sel = selection_detail(doc)
    if sel:
        s = Text("Path-aware selection regret: ", style="bold")
        s.append(fmt.pts(doc["selection_regret"]), style=STYLE[fmt.sign(doc["selection_regret"])])
        s.append(f" points. RR picks {', '.join(sel['rr_leaders'])} (NN {fmt.pct(sel['picked_nn'])}"
                 f"{', mean over the tied RR leaders' if len(sel['rr_leaders']) > 1 else ''}); "
                 f"best on NN: {', '.join(sel['nn_best'])} (NN {fmt.pct(sel['best_nn'])}).")
        out.append(s)
    return out


def _contracts(configs: list[dict[str, Any]]) -> list[Table]:
    transports = fmt.transports_of(configs)
    if not transports:
        return []
    t = _table("Contract x transport: pass rate %", "native - raw = Y(native, raw) - Y(raw, raw), in points.")
    _label_column(t, configs)
    t.add_column("contract")
    for tr in transports:
        t.add_column(tr, justify="right")
    t.add_column("native - raw", justify="right")
    for c in configs:
        for k, (contract, row) in enumerate(c["contracts"].items()):
            nmr = c["native_minus_raw"]
            t.add_row(Text(c["label"]) if k == 0 else "", Text(contract), *[_rate(row.get(tr)) for tr in transports],
                      Text(fmt.pts(nmr), style=STYLE[fmt.sign(nmr)]) if k == 0 else "",
                      end_section=k == len(c["contracts"]) - 1)
    out = [t]
    grammar = [c for c in configs if c["grammar"]]
    if grammar:
        g = _table("Grammar crossover: pass rate % (contract x transport)",
                   "diagonal advantage = mean(matched pairs) - mean(crossed pairs), points.")
        g.add_column("config")
        g.add_column("contract")
        g.add_column("nested", justify="right")
        g.add_column("nested-single", justify="right")
        g.add_column("diagonal advantage", justify="right")
        for c in grammar:
            tab, d = c["grammar"]["table"], c["grammar"]["diagonal_advantage"]
            g.add_row(Text(c["label"]), "disclosed", _rate(tab["disclosed"]["nested"]),
                      _rate(tab["disclosed"]["nested-single"]), Text(fmt.pts(d), style=STYLE[fmt.sign(d)]))
            g.add_row("", "disclosed-single", _rate(tab["disclosed-single"]["nested"]),
                      _rate(tab["disclosed-single"]["nested-single"]), "", end_section=True)
        out.append(g)
    return out


def _families(c: dict[str, Any]) -> Table:
    t = _table(f"Per family: pass rate % - {c['label']}")
    t.add_column("family", no_wrap=True)
    for n in fmt.CELL_NAMES:
        t.add_column(n, justify="right")
    t.add_column("damage", justify="right")
    t.add_column("comp.", justify="right")
    for fam, row in c["families"].items():
        dmg = row["RN"] - row["RR"] if row["RN"] is not None and row["RR"] is not None else None
        comp = row["NN"] - row["RN"] if row["NN"] is not None and row["RN"] is not None else None
        t.add_row(Text(fam), *[_rate(row[n]) for n in fmt.CELL_NAMES],
                  Text(fmt.pts(dmg), style=STYLE[fmt.sign(dmg)]), Text(fmt.pts(comp), style=STYLE[fmt.sign(comp)]))
    return t


def render_terminal(doc: dict[str, Any], console: Console) -> None:
    """Print every table of the report to ``console``."""
    configs = doc["configs"]
    console.rule("[bold]QuoteBench report")
    console.print(f"{len(configs)} config(s), {sum(c['records'] for c in configs)} records, "
                  f"{sum(c['errors'] for c in configs)} error(s) (provider or harness) excluded from rates. "
                  "Rates in %, differences in points.")
    console.print()
    for part in [_cells(configs), _decomposition(configs), _diagnostics(configs)]:
        console.print(part)
        console.print()
    for part in _ranks(doc):
        console.print(part)
    console.print()
    for part in _contracts(configs):
        console.print(part)
        console.print()
    for c in configs:
        if c["families"]:
            console.print(_families(c))
            console.print()
