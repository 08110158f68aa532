"""The report on a terminal: rich tables built from the ``report --json`` document."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console, Group
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from ..console import safe, safe_text
from . import fmt, turns
from .compute import NEEDS_TWO, compared, comparison_note, selection_detail
from .groups import designs_note, heading

STYLE = {"neg": "red", "pos": "green", "": ""}


def _t(text: str, style: str = "") -> Text:
    """User text from the results (labels, families, contracts) as shown: escaped, never markup."""
    return safe_text(text, style)


def _diff(stat: dict[str, Any] | None) -> Text:
    if stat is None:
        return Text(fmt.MISSING, style="dim")
    return Text(fmt.interval(stat), style=STYLE[fmt.sign(stat["value"])])


def _rate(rate: float | None) -> Text:
    return Text(fmt.pct(rate), style="dim" if rate is None else "")


@dataclass
class Grid:
    """A table that fits the console: one wide table when it fits, else one block per row (stacked).

    Numbers are never cut: value columns do not wrap, so a table whose narrowest form is still wider than
    the console is stacked instead; in a block every value stands on its own line next to its column name.
    ``keys`` name a row (config, contract...); in the wide form a key equal to the row above is left blank.
    """

    title: str
    caption: str | None
    key_headers: list[str]
    value_headers: list[str]
    rows: list[tuple[list[Text], list[Text | str], bool]] = field(default_factory=list)

    def add(self, keys: list[Text], values: list[Text | str], end_section: bool = False) -> None:
        self.rows.append((keys, values, end_section))

    def wide(self, compact: bool = False) -> Table:
        t = _table(self.title, self.caption)
        if compact:  # no outer border, one space between columns
            t.box, t.show_edge, t.padding, t.collapse_padding = box.SIMPLE_HEAD, False, (0, 1), True
        for k, head in enumerate(self.key_headers):
            width = max([cell_len(head)] + [r[0][k].cell_len for r in self.rows])
            t.add_column(_t(head), no_wrap=True, min_width=width)
        for head in self.value_headers:
            t.add_column(_t(head), justify="right", no_wrap=True)
        previous: list[str] = []
        for keys, values, end in self.rows:
            shown = [Text("") if k < len(previous) and key.plain == previous[k] and k + 1 < len(keys) else key
                     for k, key in enumerate(keys)]
            previous = [key.plain for key in keys]
            t.add_row(*shown, *values, end_section=end)
        return t

    def transposed(self, compact: bool = False) -> Table:
        """Rows become columns (a config per column): for a few long-named rows with many values."""
        t = _table(self.title, self.caption)
        if compact:
            t.box, t.show_edge, t.padding, t.collapse_padding = box.SIMPLE_HEAD, False, (0, 1), True
        t.add_column("", no_wrap=True)
        for keys, _, _ in self.rows:
            t.add_column(Text("\n").join(keys), justify="right", no_wrap=True)
        for k, head in enumerate(self.value_headers):
            t.add_row(_t(head, "bold"), *[values[k] for _, values, _ in self.rows])
        return t

    def stacked(self) -> Group:
        parts: list[Any] = [_t(self.title, "bold")]
        if self.caption:
            parts.append(Text(self.caption, style="dim"))
        for keys, values, _ in self.rows:
            heading = Text("  ").join(keys)
            heading.stylize("bold")
            parts.append(heading)
            g = Table.grid(padding=(0, 2), pad_edge=False)
            g.add_column(overflow="fold")
            g.add_column(justify="right", no_wrap=True)
            for head, value in zip(self.value_headers, values):
                g.add_row(_t("  " + " ".join(head.split()), "dim"), value)
            parts.append(g)
        return Group(*parts)

    def fit(self, console: Console) -> Any:
        """The first layout that fits: the table (bordered, then compact), the table transposed (a column
        per row), else a block per row.

        Every column is no_wrap, so a table needs its full (maximum) measured width; narrower, rich
        would cut cells with an ellipsis (``(30/5…``)."""
        unbounded = console.options.update_width(10_000)  # Measurement.get clamps to the width it is given
        for layout in (self.wide, self.transposed):
            for compact in (False, True):
                table = layout(compact)
                if Measurement.get(console, unbounded, table).maximum <= console.width:
                    return table
        return self.stacked()


def _table(title: str, caption: str | None = None) -> Table:
    return Table(title=_t(title, "bold"), title_justify="left",
                 caption=Text(caption, style="dim") if caption else None, caption_justify="left",
                 header_style="bold", pad_edge=False)


def _cells(configs: list[dict[str, Any]]) -> Grid:
    g = Grid("Cells: pass rate % (passed/tasks)",
             "RR raw reply, raw transport; RN raw reply, nested; NR disclosed reply, raw; NN disclosed reply, nested. "
             "Draw-averaged; provider errors excluded.", ["config"], ["draws", *fmt.CELL_NAMES, "errors"])
    for c in configs:
        g.add([_t(c["label"])], [str(c["draws"]), *[Text(fmt.cell(c["cells"][n]), style="" if c["cells"][n] else "dim")
                                                     for n in fmt.CELL_NAMES],
                                 Text(str(c["errors"]), style="yellow" if c["errors"] else "dim")])
    return g


def _decomposition(configs: list[dict[str, Any]]) -> Grid:
    g = Grid("Decomposition, points [family-bootstrap 95% interval]",
             "matched gap = damage + compensation: Y_NN - Y_RR = (Y_RN - Y_RR) + (Y_NN - Y_RN). "
             "Boundary cost on raw = Y_NR - Y_RR: what writing for the disclosed boundary costs when the "
             "command in fact takes the raw transport.",
             ["config"], [f"{title}\n{formula}" for _, title, formula in fmt.DECOMPOSITION])
    for c in configs:
        g.add([_t(c["label"])], [_diff(c[key]) for key, _, _ in fmt.DECOMPOSITION])
    return g


def _paths(configs: list[dict[str, Any]]) -> Grid | None:
    rows = [(c, r) for c in configs for r in c.get("paths") or []]
    if not rows:
        return None
    g = Grid("Damage by transport and deployment path, raw replies, points [family-bootstrap 95% interval]",
             "damage = pass rate on the path - pass rate on raw with the same final shell (docker-sh vs raw@dash): "
             "what the route's own boundary does, apart from the shell.",
             ["config", "path", "shell"], ["pass %", "vs", "damage"])
    for c, r in rows:
        g.add([_t(c["label"]), _t(r["transport"]), _t(r["shell"])],
              [_rate(r["rate"]), _t(r["baseline"]), _diff(r["damage"])])
    return g


def _harnesses(configs: list[dict[str, Any]]) -> Grid | None:
    """The agent harness routes, apart from the deployment paths (:mod:`.harnesses`)."""
    rows = [(c, r) for c in configs for r in c.get("harnesses") or []]
    if not rows:
        return None
    g = Grid(HARNESS_TITLE, HARNESS_CAPTION, ["config", "harness", "version", "contract", "shell"],
             ["pass %", "passed", "vs", "damage", "refused"])
    for c, r in rows:
        g.add([_t(c["label"]), _t(r["transport"]), _t(r["version"] or fmt.MISSING), _t(r["contract"]), _t(r["shell"])],
              [_rate(r["rate"]), _t(f"{fmt.count(r['passed'])}/{r['n']}"), _t(r["baseline"]), _diff(r["damage"]),
               _t(str(r["refused"]))])
    return g


HARNESS_TITLE = "Agent harnesses, points [family-bootstrap 95% interval]"
HARNESS_CAPTION = ("damage = pass rate through the harness - pass rate on raw with the same final shell, for the same "
                   "contract's replies (claude-code vs raw, mini-swe-agent vs raw@dash); refused = records with a "
                   "transport error (nothing reached the harness's shell), counted as failures.")


ROUTE_GROUPS = ("paths", "harnesses")


def missing_baselines(configs: list[dict[str, Any]], groups: tuple[str, ...] = ROUTE_GROUPS) -> list[str]:
    """The baselines (``raw@dash``...) a path's or harness's damage needs that no record ran: its damage shows "—"."""
    return sorted({r["baseline"] for c in configs for key in groups for r in c.get(key) or []
                   if r["damage"] is None and r["rate"] is not None})


def baseline_hint(configs: list[dict[str, Any]], groups: tuple[str, ...] = ROUTE_GROUPS) -> Text | None:
    """How to get the missing baselines: the same replay or run with them added to --transports (the same
    --out: only what is missing runs)."""
    missing = missing_baselines(configs, groups)
    if not missing:
        return None
    return Text(f"damage \u2014: the baseline {', '.join(missing)} did not run. Add it: rerun the same replay or run "
                f"with --transports ...,{','.join(missing)} and the same --out (only the missing executions run).",
                style="yellow")


def _diagnostics(configs: list[dict[str, Any]]) -> Grid:
    g = Grid("Retention, exit codes and damage attribution",
             "retention: of RR passes, % still passing in RN (same task and draw). exit-0 wrong: of failing "
             "executions in which a shell ran, % that exited 0 (failures where no shell ran - transport errors, "
             "no tool call or no command - are left out). damaged/failures: executions whose received program "
             "differed from R.", ["config"],
             ["retention %", "exit-0 wrong %", *[f"{n} damaged/\nfailures" for n in fmt.CELL_NAMES],
              "lost RR->RN\ndamaged/n"])
    for c in configs:
        a = c["damage_attribution"]
        g.add([_t(c["label"])], [_rate(c["retention"]), _rate(c["exit_zero_wrong"]),
                                 *[fmt.attribution(a[n]) for n in fmt.CELL_NAMES], fmt.lost(a["lost"])])
    return g


def _ranks(doc: dict[str, Any]) -> list[Any]:
    ra = doc["rank_agreement"]
    note = comparison_note(doc)
    detail = compared(ra)
    if detail is None:
        why = ra.get("reason") or NEEDS_TWO
        return [_t(f"Rank agreement and selection regret: not computed: {why}.")]
    # the scores compared: each config over the tasks all of them share (see comparison_note)
    comp = [{"label": lab, "cells": {"RR": {"rate": r}, "NN": {"rate": n}}} for lab, r, n in zip(*detail)]
    rr_order = sorted(comp, key=lambda c: (-c["cells"]["RR"]["rate"], c["label"]))
    nn_rank = {c["label"]: 1 + sum(o["cells"]["NN"]["rate"] > c["cells"]["NN"]["rate"] + 1e-12 for o in comp)
               for c in comp}
    rr_rank = {c["label"]: 1 + sum(o["cells"]["RR"]["rate"] > c["cells"]["RR"]["rate"] + 1e-12 for o in comp)
               for c in comp}
    g = Grid(f"Rank agreement: Kendall tau-b (RR vs NN) = {fmt.tau_interval(ra)}",
             "interval: task-cluster bootstrap 95%. Ranks share a number when scores tie.",
             ["config"], ["RR %", "RR rank", "NN %", "NN rank"])
    for c in rr_order:
        lab = c["label"]
        move = rr_rank[lab] - nn_rank[lab]
        g.add([_t(lab)], [fmt.pct(c["cells"]["RR"]["rate"]), str(rr_rank[lab]), fmt.pct(c["cells"]["NN"]["rate"]),
                          Text(f"{nn_rank[lab]}" + (f" ({move:+d})" if move else ""),
                               style="green" if move > 0 else "red" if move < 0 else "")])
    out: list[Any] = [g]
    if why := fmt.restricted_why(ra):
        out.append(Text(why, style="yellow"))
    if note:
        out.append(_t(f"Note: {note}"))
    rev = ra["reversals"] or []
    if rev:
        lines = Text(f"Reversals ({len(rev)}): ahead on RR, behind on NN (strictly)\n", style="bold")
        by = {c["label"]: c for c in comp}
        for a, b in rev:
            ra_, rb_ = by[a]["cells"], by[b]["cells"]
            lines.append(_t(f"  {a} over {b}: RR {fmt.pct(ra_['RR']['rate'])} vs {fmt.pct(rb_['RR']['rate'])}, "
                            f"NN {fmt.pct(ra_['NN']['rate'])} vs {fmt.pct(rb_['NN']['rate'])}\n"))
        out.append(lines)
    else:
        out.append(Text("Reversals: none (no pair is strictly ahead on RR and strictly behind on NN)."))
    sel = selection_detail(doc)
    if sel:
        s = Text("Path-aware selection regret: ", style="bold")
        s.append(fmt.pts(doc["selection_regret"]), style=STYLE[fmt.sign(doc["selection_regret"])])
        s.append_text(_t(f" points. RR picks {', '.join(sel['rr_leaders'])} (NN {fmt.pct(sel['picked_nn'])}"
                         f"{', mean over the tied RR leaders' if len(sel['rr_leaders']) > 1 else ''}); "
                         f"best on NN: {', '.join(sel['nn_best'])} (NN {fmt.pct(sel['best_nn'])})."))
        out.append(s)
    return out


def _contracts(configs: list[dict[str, Any]]) -> list[Grid]:
    transports = fmt.transports_of(configs)
    if not transports:
        return []
    g = Grid("Contract x transport: pass rate %", "native - raw = Y(native, raw) - Y(raw, raw), in points.",
             ["config", "contract"], [*transports, "native - raw"])
    for c in configs:
        nmr = c["native_minus_raw"]
        for k, (contract, row) in enumerate(c["contracts"].items()):
            g.add([_t(c["label"]), _t(contract)],
                  [*[_rate(row.get(tr)) for tr in transports],
                   Text(fmt.pts(nmr), style=STYLE[fmt.sign(nmr)]) if k == 0 else ""],
                  end_section=k == len(c["contracts"]) - 1)
    out = [g]
    grammar = [c for c in configs if c["grammar"]]
    if grammar:
        gg = Grid("Grammar crossover: pass rate % (contract x transport)",
                  "diagonal advantage = mean(matched pairs) - mean(crossed pairs), points.",
                  ["config", "contract"], ["nested", "nested-single", "diagonal advantage"])
        for c in grammar:
            tab, d = c["grammar"]["table"], c["grammar"]["diagonal_advantage"]
            gg.add([_t(c["label"]), Text("disclosed")], [_rate(tab["disclosed"]["nested"]),
                                                         _rate(tab["disclosed"]["nested-single"]),
                                                         Text(fmt.pts(d), style=STYLE[fmt.sign(d)])])
            gg.add([_t(c["label"]), Text("disclosed-single")], [_rate(tab["disclosed-single"]["nested"]),
                                                                _rate(tab["disclosed-single"]["nested-single"]), ""],
                   end_section=True)
        out.append(gg)
    return out


def _families(c: dict[str, Any]) -> Grid:
    g = Grid(f"Per family: pass rate % - {safe(c['label'])}", None, ["family"], [*fmt.CELL_NAMES, "damage", "comp."])
    for fam, row in c["families"].items():
        dmg = row["RN"] - row["RR"] if row["RN"] is not None and row["RR"] is not None else None
        comp = row["NN"] - row["RN"] if row["NN"] is not None and row["RN"] is not None else None
        g.add([_t(fam)], [*[_rate(row[n]) for n in fmt.CELL_NAMES],
                          Text(fmt.pts(dmg), style=STYLE[fmt.sign(dmg)]), Text(fmt.pts(comp), style=STYLE[fmt.sign(comp)])])
    return g


def _turns(configs: list[dict[str, Any]]) -> Grid | None:
    """The multi-turn arm's table (None when no config has chains)."""
    if not any(c.get("turns") for c in configs):
        return None
    heads, rows = turns.table_rows(configs)
    g = Grid("Multi-turn arm: pass % by turn, recovery, silent failures", turns.CAPTION,
             ["config", "contract", "transport"], heads)
    for label, vals in rows:
        g.add([_t(label), _t(vals[0]), _t(vals[1])], [_t(v) for v in vals[2:]])
    return g


def render_terminal(doc: dict[str, Any], console: Console) -> None:
    """Print every table of the report to ``console``."""
    configs = doc["configs"]
    console.rule(Text("QuoteBench report", style="bold"))
    console.print(_t(f"{fmt.suites_line(configs)}{len(configs)} config(s), {sum(c['records'] for c in configs)} records, "
                     f"{sum(c['errors'] for c in configs)} error(s) (provider or harness) excluded from rates. "
                     "Rates in %, differences in points."))
    console.print()
    routes = [p for p in (_paths(configs), _harnesses(configs)) if p is not None]
    for part in [_cells(configs), _decomposition(configs), *routes, _turns(configs), _diagnostics(configs)]:
        if part is None:
            continue
        console.print(part.fit(console))
        if routes and part is routes[-1] and (hint := baseline_hint(configs)):  # once, after the last table that needs it
            console.print(hint)
        console.print()
    for part in _ranks(doc):
        console.print(part.fit(console) if isinstance(part, Grid) else part)
    strata = doc.get("strata") or []  # suites, userlands and designs are ranked within, never together
    if note := designs_note(strata):
        console.print(Text(note))
    for s in strata:
        console.print()
        console.print(_t(heading(s), "bold underline"))
        for part in _ranks(s):
            console.print(part.fit(console) if isinstance(part, Grid) else part)
    console.print()
    for part in _contracts(configs):
        console.print(part.fit(console))
        console.print()
    for c in configs:
        if c["families"]:
            console.print(_families(c).fit(console))
            console.print()
