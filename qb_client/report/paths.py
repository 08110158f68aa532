"""Damage by deployment path: for raw replies, what each transport does relative to ``raw`` on the
same final shell (``docker-sh`` against ``raw@dash``, ``ssh@zsh`` against ``raw@zsh``).

Why relative to raw on the same shell: a route's final shell is a question of its own (a bashism
fails on dash whatever the route); comparing with ``raw`` on that shell leaves only what the route's
own boundary did. Intervals are the family bootstrap of the other statistics (the same resamples).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import stats


def baseline(shell: str) -> str:
    """The transport a path on ``shell`` is compared with."""
    return "raw" if shell in ("bash", "", None) else f"raw@{shell}"


def path_rows(cd: Any, counts: np.ndarray, contract: str = "raw",
              exclude: frozenset[str] | set[str] = frozenset()) -> list[dict[str, Any]]:
    """One row per transport that ran ``contract`` replies, other than the baselines themselves and the
    transports in ``exclude`` (the agent harness routes, reported as their own group by :mod:`.harnesses`):
    ``transport``, ``shell``, ``baseline``, ``rate``, ``n`` and ``damage`` ({value, ci95}, or None when the
    baseline did not run)."""
    shells: dict[str, str] = {}
    for r in cd.ok:
        if r["contract"] == contract and r["transport"] not in exclude:
            shells.setdefault(r["transport"], r.get("shell") or "bash")
    rows: list[dict[str, Any]] = []
    for transport, shell in shells.items():
        base = baseline(shell)
        if transport == base:
            continue
        pair, base_pair = (contract, transport), (contract, base)
        rate = cd.rate(pair)
        row: dict[str, Any] = {"transport": transport, "shell": shell, "baseline": base,
                               "rate": stats.clean(rate) if rate is not None else None,
                               "n": len(cd.shares(pair)), "damage": None}
        base_rate = cd.rate(base_pair)
        if rate is not None and base_rate is not None:
            a = stats.resampled_rates(counts, *cd.family_arrays(pair))
            b = stats.resampled_rates(counts, *cd.family_arrays(base_pair))
            row["damage"] = {"value": stats.clean(rate - base_rate), "ci95": stats.percentile_ci(a - b)}
        rows.append(row)
    from transports.registry import LISTED

    order = {name: k for k, name in enumerate(LISTED)}
    rows.sort(key=lambda r: (order.get(r["transport"], order.get(r["transport"].split("@")[0], len(order))),
                             r["transport"]))
    return rows
