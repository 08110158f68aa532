"""The report's three plots as inline SVG strings (matplotlib, Agg canvas, no pyplot state).

Each SVG is made ready to sit inside an HTML page: no XML prolog, no namespace
URLs (an HTML parser gives inline ``<svg>`` its namespace), ``href`` instead of
``xlink:href``, every ``id`` prefixed so several plots can share a page, and a
width that shrinks with the page.
"""

from __future__ import annotations

import io
import re
import textwrap
from typing import Any

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from . import fmt
from .compute import compared
from .order import family_order

DAMAGE = "#d55e00"
COMPENSATION = "#0072b2"
GAP = "#111827"
MUTED = "#9ca3af"
ACCENT = "#cc3d8a"
INK = "#1f2937"
GRID = "#e5e7eb"
PASS_CMAP = LinearSegmentedColormap.from_list("qb_pass", ["#b2182b", "#ef8a62", "#fddbc7", "#d1e5f0", "#67a9cf", "#2166ac"])
# Text sizes in points; a plot is shown at its natural size (1 pt = 1.33 px), so 9 pt is 12 px: the
# smallest text on a plot (heatmap cell values) is 8.5 pt, 11.3 px.
LABEL_PT = 10.0
SMALL_PT = 9.0
CELL_PT = 8.5
RC = {
    "svg.fonttype": "none", "svg.hashsalt": "quotebench", "font.size": LABEL_PT,
    "mathtext.default": "regular",
    "font.family": ["sans-serif"], "axes.edgecolor": "#9ca3af", "axes.labelcolor": INK,
    "xtick.color": "#4b5563", "ytick.color": INK, "text.color": INK,
    "axes.spines.top": False, "axes.spines.right": False,
}


def _svg(fig: Figure | None, key: str, label: str) -> str | None:
    if fig is None:
        return None
    buf = io.StringIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buf, format="svg", bbox_inches="tight", pad_inches=0.08,
                metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
        s = buf.getvalue()
    s = s[s.index("<svg"):]
    s = re.sub(r'\s+xmlns(:xlink)?="[^"]*"', "", s)
    s = s.replace("xlink:href=", "href=")
    s = re.sub(r'(\bid="|href="#|url\(#)', lambda m: m.group(1) + key + "-", s)
    label = label.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    # natural size (the figure scrolls when narrower): shrunk to fit, 9 pt labels would fall below 11 px
    return s.replace("<svg ", f'<svg class="plot" style="max-width:none" role="img" aria-label="{label}" ', 1).strip()


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def _xerr(stat: dict[str, Any]) -> list[list[float]] | None:
    ci = stat.get("ci95")
    if not ci:
        return None
    v = stat["value"] * 100
    return [[max(0.0, v - ci[0] * 100)], [max(0.0, ci[1] * 100 - v)]]


def _bar_axes(ax: Any, labels: list[str], lo: float, hi: float, pad: float, xlabel: str) -> None:
    """The frame both horizontal-bar plots share: a zero line, one row per label (top down), a padded
    x range, a vertical grid."""
    ax.axvline(0, color="#6b7280", lw=1, zorder=1)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(len(labels) - 0.4, -0.6)
    margin = pad * (hi - lo)
    ax.set_xlim(lo - margin, hi + margin)
    ax.xaxis.grid(True, color=GRID, zorder=0)
    ax.set_xlabel(xlabel)
    ax.tick_params(axis="y", length=0)


def decomposition_figure(configs: list[dict[str, Any]]) -> Figure | None:
    """Per config: damage and compensation as opposing bars with intervals, the matched gap as a diamond."""
    rows = [c for c in configs if c["damage"] or c["compensation"] or c["matched_gap"]]
    if not rows:
        return None
    with matplotlib.rc_context(RC):
        fig = _figure(8.2, 0.62 * len(rows) + 1.3)
        ax = fig.add_subplot()
        h = 0.34
        lo, hi = -10.0, 10.0
        for i, c in enumerate(rows):
            for key, dy, color in (("damage", -h / 2, DAMAGE), ("compensation", h / 2, COMPENSATION)):
                st = c[key]
                if not st:
                    continue
                v = st["value"] * 100
                ax.barh(i + dy, v, height=h, color=color, alpha=0.9, zorder=2)
                err = _xerr(st)
                if err:
                    ax.errorbar(v, i + dy, xerr=err, fmt="none", ecolor="#374151", elinewidth=1, capsize=2.5, zorder=3)
                ends = [v] + ([st["ci95"][0] * 100, st["ci95"][1] * 100] if st.get("ci95") else [])
                lo, hi = min(lo, *ends), max(hi, *ends)
                edge = min(ends) if v < 0 else max(ends)
                ax.text(edge + (-1.5 if v < 0 else 1.5), i + dy, fmt.pts(st["value"]), va="center",
                        ha="right" if v < 0 else "left", fontsize=SMALL_PT, color=color)
            g = c["matched_gap"]
            if g:
                gv = g["value"] * 100
                ax.errorbar(gv, i, xerr=_xerr(g), fmt="D", color=GAP, ms=6.5, mec="white", mew=1.2,
                            elinewidth=1.4, capsize=3, zorder=5)
                lo, hi = min(lo, gv), max(hi, gv)
        _bar_axes(ax, [c["label"] for c in rows], lo, hi, 0.14, "percentage points")
        ax.spines["left"].set_visible(False)
        handles = [Patch(color=DAMAGE, label=f"transport damage  {math(fmt.DECOMPOSITION[0][2])}"),
                   Patch(color=COMPENSATION, label=f"compensation  {math(fmt.DECOMPOSITION[1][2])}"),
                   Line2D([], [], marker="D", color=GAP, ls="none", ms=6.5, mec="white",
                          label=f"matched gap  {math(fmt.DECOMPOSITION[2][2])}")]
        ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False, fontsize=SMALL_PT)
        return fig


def _rank_positions(labels: list[str], scores: list[float]) -> tuple[dict[str, int], dict[str, int]]:
    """Row of each label (score descending, label breaks ties) and its competition rank (ties share)."""
    order = sorted(range(len(labels)), key=lambda k: (-round(scores[k], 12), labels[k]))
    row = {labels[k]: r for r, k in enumerate(order)}
    rank = {labels[k]: 1 + sum(round(s, 12) > round(scores[k], 12) for s in scores) for k in range(len(labels))}
    return row, rank


def rank_figure(doc: dict[str, Any]) -> Figure | None:
    """A slope chart: each config's rank by RR on the left, by NN on the right; reversed pairs highlighted."""
    detail = compared(doc["rank_agreement"])  # the scores on the tasks all configs share
    if detail is None:
        return None
    labels, rr, nn = detail
    comp = labels
    rr_row, rr_rank = _rank_positions(labels, rr)
    nn_row, nn_rank = _rank_positions(labels, nn)
    reversed_ = {lab for pair in (doc["rank_agreement"]["reversals"] or []) for lab in pair}
    with matplotlib.rc_context(RC):
        fig = _figure(3.2, 0.42 * len(comp) + 0.9)
        ax = fig.add_subplot()
        for k, lab in enumerate(labels):
            hot = lab in reversed_
            color, lw, z = (ACCENT, 2.2, 3) if hot else (MUTED, 1.4, 2)
            y0, y1 = rr_row[lab], nn_row[lab]
            ax.plot([0, 1], [y0, y1], color=color, lw=lw, zorder=z, solid_capstyle="round")
            ax.scatter([0, 1], [y0, y1], s=28, color=color, zorder=z + 1, edgecolors="white", linewidths=0.8)
            weight = "bold" if hot else "normal"
            ax.text(-0.06, y0, f"{lab}   #{rr_rank[lab]}  {fmt.pct(rr[k])}", ha="right", va="center",
                    fontsize=SMALL_PT, color=INK, fontweight=weight)
            ax.text(1.06, y1, f"{fmt.pct(nn[k])}  #{nn_rank[lab]}   {lab}", ha="left", va="center",
                    fontsize=SMALL_PT, color=INK, fontweight=weight)
        ax.text(0, -0.9, "RR\nraw reply, raw path", ha="center", va="bottom", fontsize=SMALL_PT, fontweight="bold")
        ax.text(1, -0.9, "NN\ndisclosed reply, nested path", ha="center", va="bottom", fontsize=SMALL_PT, fontweight="bold")
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(len(comp) - 0.5, -1.0)
        ax.axis("off")
        return fig


def _two_lines(label: str, width: int = 28) -> str:
    """'provider:model@effort' as 'provider:model' over '@effort', long parts wrapped."""
    head, at, effort = label.rpartition("@")
    parts = [head, at + effort] if at else [label]
    return "\n".join(line for p in parts for line in textwrap.wrap(p, width, break_on_hyphens=False) or [""])


def math(formula: str) -> str:
    """'Y_RN - Y_RR' as mathtext with subscripts, as the page's headings write it (Y<sub>RN</sub>)."""
    return "$" + re.sub(r"Y_(\w+)", r"Y_{\1}", formula) + "$"


NOT_RUN_HATCH = "////"


def heatmap_figure(configs: list[dict[str, Any]]) -> Figure | None:
    """Family x cell pass rates, columns grouped by config; a cell that was not run is hatched, so it
    cannot be read as a colour of the scale (a grey once looked like 50%)."""
    shown = [c for c in configs if c["families"]]
    if not shown:
        return None
    families = family_order({f for c in shown for f in c["families"]})
    cols = [(c, n) for c in shown for n in fmt.CELL_NAMES]
    data = np.full((len(families), len(cols)), np.nan)
    for j, (c, n) in enumerate(cols):
        for i, f in enumerate(families):
            v = c["families"].get(f, {}).get(n)
            if v is not None:
                data[i, j] = v
    cmap = PASS_CMAP.with_extremes(bad="white")
    with matplotlib.rc_context(RC):
        fig = _figure(max(4.8, 0.55 * len(cols) + 2.8), 0.32 * len(families) + 2.2)
        ax = fig.add_subplot()
        im = ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
        if len(cols) <= 64:
            for i in range(len(families)):
                for j in range(len(cols)):
                    v = data[i, j]
                    if np.isnan(v):
                        continue
                    r, g, b, _ = cmap(v)
                    dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.55
                    ax.text(j, i, f"{v * 100:.0f}", ha="center", va="center", fontsize=CELL_PT,
                            color="white" if dark else INK)
        missing = np.argwhere(np.isnan(data))
        for i, j in missing:
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="white", edgecolor=MUTED, hatch=NOT_RUN_HATCH,
                                   lw=0, zorder=2))
        if len(missing):
            ax.legend(handles=[Patch(facecolor="white", edgecolor=MUTED, hatch=NOT_RUN_HATCH, label="not run")],
                      loc="upper left", bbox_to_anchor=(1.0, -0.01), frameon=False, fontsize=SMALL_PT,
                      handlelength=1.4, handleheight=1.2, borderaxespad=0)
        for k in range(1, len(shown)):
            ax.axvline(4 * k - 0.5, color="white", lw=4)
        ax.set_xticks(range(len(cols)), [n for _, n in cols], fontsize=SMALL_PT)
        ax.set_yticks(range(len(families)), families)
        ax.tick_params(length=0)
        for s in ax.spines.values():
            s.set_visible(False)
        top = ax.secondary_xaxis("top")
        top.set_xticks([4 * k + 1.5 for k in range(len(shown))], [_two_lines(c["label"]) for c in shown], fontsize=SMALL_PT)
        top.tick_params(length=0)
        top.spines["top"].set_visible(False)
        bar = fig.colorbar(im, ax=ax, fraction=0.025, pad=0.015, ticks=[0, 0.25, 0.5, 0.75, 1])
        bar.ax.set_yticklabels(["0", "25", "50", "75", "100"], fontsize=SMALL_PT)
        bar.outline.set_visible(False)
        bar.set_label("pass rate %", fontsize=SMALL_PT)
        return fig


def paths_figure(configs: list[dict[str, Any]]) -> Figure | None:
    """Per config and path: damage relative to raw on the same final shell, with its interval."""
    rows = [(c["label"], r) for c in configs for r in c.get("paths") or [] if r.get("damage")]
    return _damage_bars(rows, [f"{r['transport']} (vs {r['baseline']})" for _, r in rows],
                        "damage, percentage points (raw replies)")


def harnesses_figure(configs: list[dict[str, Any]]) -> Figure | None:
    """Per config, agent harness and contract: damage relative to raw on the same final shell under the same
    contract, with its interval."""
    rows = [(c["label"], r) for c in configs for r in c.get("harnesses") or [] if r.get("damage")]
    return _damage_bars(rows, [f"{r['transport']}, {r['contract']} replies (vs {r['baseline']})" for _, r in rows],
                        "damage, percentage points")


def _damage_bars(rows: list[tuple[str, dict[str, Any]]], names: list[str], xlabel: str) -> Figure | None:
    """One horizontal bar per row (label, {damage: {value, ci95}}), named ``names`` (the config's label first
    when there are several configs)."""
    if not rows:
        return None
    with matplotlib.rc_context(RC):
        fig = _figure(8.2, 0.36 * len(rows) + 1.2)
        ax = fig.add_subplot()
        lo, hi = -10.0, 10.0
        for i, (_, r) in enumerate(rows):
            st = r["damage"]
            v = st["value"] * 100
            ax.barh(i, v, height=0.6, color=DAMAGE if v < 0 else COMPENSATION, alpha=0.9, zorder=2)
            err = _xerr(st)
            if err:
                ax.errorbar(v, i, xerr=err, fmt="none", ecolor="#374151", elinewidth=1, capsize=2.5, zorder=3)
            ends = [v] + ([st["ci95"][0] * 100, st["ci95"][1] * 100] if st.get("ci95") else [])
            lo, hi = min(lo, *ends), max(hi, *ends)
        many = len({label for label, _ in rows}) > 1
        _bar_axes(ax, [(f"{label}  " if many else "") + name for (label, _), name in zip(rows, names)],
                  lo, hi, 0.1, xlabel)
        return fig


def paths_svg(configs: list[dict[str, Any]]) -> str | None:
    return _svg(paths_figure(configs), "paths", "Damage by transport and deployment path relative to raw on the same shell")


def harnesses_svg(configs: list[dict[str, Any]]) -> str | None:
    return _svg(harnesses_figure(configs), "harn", "Damage by agent harness relative to raw on the same shell")


def decomposition_svg(configs: list[dict[str, Any]]) -> str | None:
    return _svg(decomposition_figure(configs), "dec", "Per-config decomposition: transport damage, compensation and matched gap")


def rank_svg(doc: dict[str, Any], key: str = "rank") -> str | None:
    """``doc``: the report, or one of its ``strata``; ``key`` prefixes the SVG's ids (one per plot on a page)."""
    return _svg(rank_figure(doc), key, "Rank by RR score versus rank by NN score for each config")


def heatmap_svg(configs: list[dict[str, Any]]) -> str | None:
    return _svg(heatmap_figure(configs), "fam", "Per-family pass rate in each cell, grouped by config")
