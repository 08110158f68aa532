"""Agent harnesses as their own group of the report: each real harness route (``claude-code``,
``mini-swe-agent``, any route registered in :data:`transports.harnesses.HARNESSES`) per contract, against
``raw`` on the same final shell under the same contract.

Why a group apart from the deployment paths (:mod:`.paths`): a path reproduces one boundary with its real
component, a harness route runs a whole released agent program whose version, shell setup and refusals are
the finding; a reader compares harnesses with harnesses. Why both contracts: a reply written for the
disclosed boundary (``bash -c "R"``) is what a model that knows about such boundaries sends, and a harness
that delivers R whole treats it as ``raw`` does, so its damage there is measured against ``(disclosed, raw)``
(the NR cell) as the raw reply's is against RR.

A record is a harness run when it carries ``harness`` (docs/spec.md, Record format). A transport error the
route raised before its harness started (a NUL byte) has no ``harness`` field, so a transport also counts as
a harness route when its name is registered in ``HARNESSES``. ``refused`` counts the records with a
``transport_error`` (nothing reached the harness's shell); they are failures in the rate, as on every path.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from . import stats
from .order import CONTRACT_ORDER
from .paths import baseline


def registered() -> tuple[str, ...]:
    """The harness routes known to this installation, in the catalogue's order."""
    from transports.harnesses import HARNESSES

    return tuple(HARNESSES)


def harness_transports(records: Iterable[dict[str, Any]]) -> set[str]:
    """The transports of ``records`` that are agent harness routes: some record names its ``harness``, or the
    transport's name (before any ``@shell``) is a registered harness."""
    known = set(registered())
    return {r["transport"] for r in records if r.get("harness") or r["transport"].split("@")[0] in known}


def harness_rows(cd: Any, counts: np.ndarray) -> list[dict[str, Any]]:
    """One row per (harness route, contract) that ran: ``harness``, ``transport``, ``version``, ``contract``,
    ``shell``, ``baseline``, ``passed``, ``n``, ``rate``, ``refused`` and ``damage`` ({value, ci95}: the rate
    minus the baseline's under the same contract, family bootstrap; None when the baseline did not run)."""
    routes = harness_transports(cd.ok)
    seen: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in cd.ok:
        if r["transport"] in routes:
            seen.setdefault((r["transport"], r["contract"]), []).append(r)
    rows: list[dict[str, Any]] = []
    for (transport, contract), recs in seen.items():
        named = [r for r in recs if r.get("harness")]
        shell = next((r.get("shell") for r in named), None) or recs[0].get("shell") or "bash"
        base = baseline(shell)
        pair, base_pair = (contract, transport), (contract, base)
        shares = cd.shares(pair)
        rate = cd.rate(pair)
        row: dict[str, Any] = {
            "harness": next((r["harness"] for r in named), transport.split("@")[0]), "transport": transport,
            "version": ", ".join(sorted({r["harness_version"] for r in named if r.get("harness_version")})) or None,
            "contract": contract, "shell": shell, "baseline": base,
            "passed": _number(sum(shares.values())), "n": len(shares),
            "rate": stats.clean(rate) if rate is not None else None,
            "refused": sum(r.get("transport_error") is not None for r in recs), "damage": None}
        base_rate = cd.rate(base_pair)
        if rate is not None and base_rate is not None:
            a = stats.resampled_rates(counts, *cd.family_arrays(pair))
            b = stats.resampled_rates(counts, *cd.family_arrays(base_pair))
            row["damage"] = {"value": stats.clean(rate - base_rate), "ci95": stats.percentile_ci(a - b)}
        rows.append(row)
    order = {name: k for k, name in enumerate(registered())}
    contracts = {c: k for k, c in enumerate(CONTRACT_ORDER)}
    rows.sort(key=lambda r: (order.get(r["harness"], len(order)), r["transport"],
                             contracts.get(r["contract"], len(contracts)), r["contract"]))
    return rows


def _number(x: float) -> int | float:
    return int(round(x)) if abs(x - round(x)) < 1e-9 else round(x, 6)
