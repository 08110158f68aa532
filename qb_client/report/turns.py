"""The multi-turn arm in the report (records with ``turns``, from ``run --turns K``).

Per config and cell (contract x transport), over its chains:

* **pass by turn k** (k = 1..K): the share of chains whose state after turn k passes; a chain that stopped
  earlier keeps its final state (what the task looks like at turn k);
* **recovery**: of the chains whose state after turn 1 fails (the one-shot failures of this arm), the
  share whose final state passes;
* **turns to pass**: over the chains whose final state passes, the mean of the first turn after which the
  state passed and kept passing to the end;
* **silent failures**: chains that the model ended itself (``DONE``, an empty reply, a native reply
  without a tool call) on a failing final state: the model believed it was done. Chains that ran out of
  turns are counted apart (``exhausted``);
* **exit-0 failures noticed**: of the chains whose turn 1 ran a command that exited 0 and left a failing
  state, how many were noticed: a later turn ran a different command.

Turn 1 of this arm is not the one-shot design's reply (its prompt says more turns follow), so these rates
are compared within the arm, never with one-shot records.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from . import stats

STOPS = ("done", "empty", "no-tool-call")
"""How a model ends a chain itself (:mod:`qb_client.campaign.loop`)."""


def check_turns(turns: Any) -> tuple[str, str] | None:
    """The first problem with a record's ``turns`` as (field, problem), or None (for the reader's one-line
    error naming the file, line and field)."""
    if not isinstance(turns, list) or not turns:
        return "turns", "expected a non-empty list"
    for i, t in enumerate(turns):
        if not isinstance(t, dict):
            return f"turns[{i}]", "expected an object"
        if not isinstance(t.get("passed"), bool):
            return f"turns[{i}].passed", "expected true or false"
        if t.get("command") is not None and not isinstance(t["command"], str):
            return f"turns[{i}].command", "expected a string or null"
        if t.get("stop") is not None and not isinstance(t["stop"], str):
            return f"turns[{i}].stop", "expected a string or null"
        ec = t.get("exit_code")
        if ec is not None and (not isinstance(ec, int) or isinstance(ec, bool)):
            return f"turns[{i}].exit_code", "expected an integer or null"
    return None


def variant_turns(config: Any) -> int | None:
    """K when a record's config variant names ``turns=K`` (the multi-turn arm), else None."""
    variant = config.get("variant") if isinstance(config, dict) else None
    m = re.search(r"(?:^|\+)turns=(\d+)(?:\+|$)", str(variant or ""))
    return int(m.group(1)) if m else None


def budget(records: list[dict[str, Any]]) -> int:
    """K: from the config variant (``turns=K``), else the longest chain."""
    for r in records:
        k = variant_turns(r.get("config"))
        if k is not None:
            return k
    return max(len(r["turns"]) for r in records)


def _passed_at(turns: list[dict[str, Any]], k: int) -> bool:
    return bool(turns[min(k, len(turns)) - 1]["passed"])


def _turns_to_pass(turns: list[dict[str, Any]]) -> int:
    """The first turn after which the state passed and kept passing (the chain's final state passes)."""
    first = len(turns)
    for i in range(len(turns) - 1, -1, -1):
        if not turns[i]["passed"]:
            break
        first = i + 1
    return first


def _share(part: int, whole: int) -> float | None:
    return stats.clean(part / whole) if whole else None


def cell_row(contract: str, transport: str, chains: list[dict[str, Any]], k: int) -> dict[str, Any]:
    n = len(chains)
    by_turn = [_share(sum(_passed_at(r["turns"], j) for r in chains), n) for j in range(1, k + 1)]
    failed_first = [r for r in chains if not r["turns"][0]["passed"]]
    recovered = [r for r in failed_first if r["verdict"]["passed"]]
    passing = [r for r in chains if r["verdict"]["passed"]]
    ttp = [_turns_to_pass(r["turns"]) for r in passing]
    stopped = [r for r in chains if r["turns"][-1].get("stop") in STOPS]
    silent = [r for r in stopped if not r["verdict"]["passed"]]
    exhausted = [r for r in chains if r not in stopped and not r["verdict"]["passed"]]
    exit0 = [r for r in failed_first if r["turns"][0].get("command") is not None and r["turns"][0].get("exit_code") == 0]
    noticed = [r for r in exit0 if any(t.get("command") is not None and t["command"] != r["turns"][0]["command"]
                                       for t in r["turns"][1:])]
    return {
        "contract": contract, "transport": transport, "chains": n, "turns": k,
        "pass_by_turn": by_turn,
        "first_turn_failures": len(failed_first), "recovered": len(recovered),
        "recovery": _share(len(recovered), len(failed_first)),
        "mean_turns_to_pass": stats.clean(sum(ttp) / len(ttp)) if ttp else None,
        "silent_failures": len(silent), "silent_failure_rate": _share(len(silent), n),
        "exhausted": len(exhausted),
        "exit_zero_first_failures": len(exit0), "exit_zero_noticed": len(noticed),
    }


def turn_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """One row per cell of one config's chains (None when the config has none: a one-shot campaign)."""
    chains = [r for r in records if r.get("turns")]
    if not chains:
        return None
    k = budget(chains)
    cells: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in chains:
        cells[(r["contract"], r["transport"])].append(r)
    return [cell_row(c, t, rs, k) for (c, t), rs in sorted(cells.items())]


# ---------------------------------------------------------------- what both renderers show (terminal, page)

CAPTION = ("pass by turn k: % of chains whose state after turn k passes. recovered: of the chains failing after "
           "turn 1, how many pass at the end. turns to pass: mean first turn from which the state passed to the end. "
           "silent: the model ended the chain on a failing state. exit-0 noticed: of turn-1 failures that exited 0, "
           "how many a later turn ran a different command for. Within the multi-turn arm only (on-policy chains).")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def table_rows(configs: list[dict[str, Any]]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """(value headers, [(config label, [contract, transport, values...])]) shared by both renderers."""
    k = max((r["turns"] for c in configs for r in c.get("turns") or []), default=0)
    heads = [f"turn {j}" for j in range(1, k + 1)] + ["recovered", "turns to pass", "silent", "exit-0 noticed"]
    rows = []
    for c in configs:
        for r in c.get("turns") or []:
            by = [_pct(x) for x in r["pass_by_turn"]] + [""] * (k - len(r["pass_by_turn"]))
            rec = f"{r['recovered']}/{r['first_turn_failures']}"
            if r["recovery"] is not None:
                rec += f" ({_pct(r['recovery'])}%)"
            ttp = "-" if r["mean_turns_to_pass"] is None else f"{r['mean_turns_to_pass']:.2f}"
            rows.append((c["label"], [r["contract"], r["transport"], *by, rec, ttp,
                                      f"{r['silent_failures']}/{r['chains']}",
                                      f"{r['exit_zero_noticed']}/{r['exit_zero_first_failures']}"]))
    return heads, rows
