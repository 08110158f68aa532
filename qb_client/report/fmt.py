"""Number formatting shared by the terminal and HTML renderers.

Rates are shown as percentages and differences as percentage points, both with
one decimal; what the document lacks (null) is shown as an em dash.
"""

from __future__ import annotations

from typing import Any

from .order import TRANSPORT_ORDER, ordered

MISSING = "\u2014"
CELL_NAMES = ("RR", "RN", "NR", "NN")
CELL_HELP = {
    "RR": "raw reply, raw transport",
    "RN": "raw reply, nested transport",
    "NR": "disclosed-boundary reply, raw transport",
    "NN": "disclosed-boundary reply, nested transport",
}
DECOMPOSITION = (
    ("damage", "transport damage", "Y_RN - Y_RR"),
    ("compensation", "compensation", "Y_NN - Y_RN"),
    ("matched_gap", "matched gap", "Y_NN - Y_RR"),
    ("boundary_cost", "boundary cost on raw", "Y_NR - Y_RR"),
)


def pct(rate: float | None) -> str:
    """0.982 -> '98.2'."""
    return MISSING if rate is None else f"{rate * 100:.1f}"


def pts(diff: float | None) -> str:
    """-0.643 -> '-64.3', 0.607 -> '+60.7', 0 -> '0.0'."""
    if diff is None:
        return MISSING
    text = f"{diff * 100:+.1f}"
    return "0.0" if text in ("+0.0", "-0.0") else text


def interval(stat: dict[str, Any] | None) -> str:
    """{'value': -0.643, 'ci95': [-0.701, -0.589]} -> '-64.3 [-70.1, -58.9]'."""
    if stat is None:
        return MISSING
    ci = stat.get("ci95")
    if not ci:
        return pts(stat["value"])
    return f"{pts(stat['value'])} [{pts(ci[0])}, {pts(ci[1])}]"


def count(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def cell(c: dict[str, Any] | None) -> str:
    """{'passed': 55, 'n': 56, 'rate': 0.982} -> '98.2 (55/56)'."""
    if c is None:
        return MISSING
    return f"{pct(c['rate'])} ({count(c['passed'])}/{c['n']})"


def tau(x: float | None) -> str:
    """0.4 -> '0.40'; exactly 1 (or -1) -> '1' ('-1'); a tau that is not exactly +-1 never prints as
    '1.00': 0.996 -> '0.996' (more places until it no longer rounds to +-1)."""
    if x is None:
        return MISSING
    if abs(x) == 1.0:
        return f"{x:.0f}"
    for places in range(2, 13):
        text = f"{x:.{places}f}"
        if abs(float(text)) != 1.0:
            return text
    return repr(x)


def tau_interval(agreement: dict[str, Any]) -> str:
    t = agreement.get("kendall_tau_b")
    if t is None:
        return MISSING
    ci = agreement.get("ci95")
    return f"{tau(t)} [{tau(ci[0])}, {tau(ci[1])}]" if ci else tau(t)


MIN_SHARED_TASKS = 5
"""A tau computed on fewer shared tasks is marked *restricted* (terminal and page; the JSON has
``shared_tasks``). Why 5: the public suite's families hold 4 tasks each, so below 5 the configs are
ranked on at most one family's worth of tasks; with one draw a score over n tasks takes only n + 1
values, so configs tie by construction; and the task bootstrap has only C(2n-1, n) distinct resamples
(35 at n = 4, 126 at n = 5), so the interval rests on a handful of values. A floor, not a guarantee:
a tau on 5 tasks is still weak, and the interval says how weak."""


def restricted(agreement: dict[str, Any]) -> str | None:
    """``computed on N shared tasks only`` when a tau exists on fewer than :data:`MIN_SHARED_TASKS`."""
    n = agreement.get("shared_tasks")
    if agreement.get("kendall_tau_b") is None or n is None or n >= MIN_SHARED_TASKS:
        return None
    return f"computed on {n} shared task{'s' if n != 1 else ''} only"


def restricted_why(agreement: dict[str, Any]) -> str | None:
    """The restricted note with its reason, one sentence."""
    short = restricted(agreement)
    if short is None:
        return None
    return (f"Restricted: tau {short}. Below {MIN_SHARED_TASKS} (one family of the public suite) scores tie by "
            "construction and the interval rests on few distinct resamples: a hint, not a result.")


def sign(x: float | None) -> str:
    """'neg', 'pos' or '' for styling a difference."""
    if x is None or abs(x) < 1e-12:
        return ""
    return "neg" if x < 0 else "pos"


def attribution(a: dict[str, Any] | None) -> str:
    if a is None:
        return MISSING
    return f"{a['damaged']}/{a['failures']}"


def lost(a: dict[str, Any] | None) -> str:
    if a is None:
        return MISSING
    return f"{a['damaged']}/{a['n']}"


def transports_of(configs: list[dict[str, Any]]) -> list[str]:
    """Every transport any contract was run on, in the suite's order (composed names after, by name)."""
    return ordered({t for c in configs for row in c["contracts"].values() for t in row}, TRANSPORT_ORDER)


def suites_line(configs: list[dict[str, Any]]) -> str:
    """Which suite(s) and userland(s) the records were made on, said first: a private split scored on its
    own suite reads differently from the public one."""
    pairs = sorted({(str(c.get("suite") or "public"), str(c.get("userland") or "gnu")) for c in configs})
    if len(pairs) == 1:
        return f"Suite {pairs[0][0]}, userland {pairs[0][1]}. "
    return f"{len(pairs)} suite/userland combinations, never pooled. "
