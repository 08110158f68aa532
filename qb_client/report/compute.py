"""From records to the ``report --json`` document (SPEC.md, "Statistics" and "report --json").

Per config (grouped by its label ``provider:model@effort``), records whose
``error`` is set are provider errors, not model failures: they are counted in
``errors`` and left out of every rate. A cell's rate is the mean over the tasks
present in it of each task's pass share across its draws. Anything the records
do not hold is ``None`` (JSON null), never zero.

Besides the SPEC keys, each config carries ``label``, ``records``, ``errors``,
``damage_attribution`` and ``exit_zero_wrong_counts``; the top level holds
exactly the SPEC keys.

Configs are compared (rank agreement, reversals, selection regret) only on the
tasks all of them ran in both RR and NN: a 4-task run is never ranked against
a 56-task run on their own task sets. ``rank_agreement`` therefore also holds
``shared_tasks`` (how many), ``restricted`` (each config that ran more, with
its own RR and NN task counts), ``scores`` (the RR and NN scores compared, per
config) and ``reason`` (why the statistics are null, when they are: fewer than
two configs with RR and NN, or no shared task). Per-config cells stay over each
config's own tasks, with their ``n``.

``exit_zero_wrong`` is exactly: of the config's failing executions *in which a
shell ran* (the record has an exit code, or timed out), the share whose exit
code was 0. Failures where no shell ran are left out of it: transport errors
(e.g. a json-naive parse error, a NUL byte), replies with no command (no tool
call, nothing extracted), and error records (provider or harness errors).
``exit_zero_wrong_counts`` = ``{"exit_zero": k, "failing_with_shell": n,
"failing_without_shell": m}`` gives the numerator, the denominator and how many
failing executions were left out for that reason (``exit_zero_wrong`` = k / n,
null when n is 0).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from . import stats
from .groups import apart_reason, group, key_of, keys_of
from .order import CONTRACT_ORDER, TRANSPORT_ORDER, family_order, ordered
from .harnesses import harness_rows, harness_transports
from .paths import path_rows
from .turns import turn_rows

CELLS: dict[str, tuple[str, str]] = {
    "RR": ("raw", "raw"), "RN": ("raw", "nested"), "NR": ("disclosed", "raw"), "NN": ("disclosed", "nested"),
}
GRAMMAR_CONTRACTS = ("disclosed", "disclosed-single")
GRAMMAR_TRANSPORTS = ("nested", "nested-single")


class ConfigData:
    """One config's records, indexed for the statistics."""

    def __init__(self, label: str, records: list[dict[str, Any]]) -> None:
        self.label = label
        self.records = records
        self.ok = [r for r in records if not r.get("error")]
        self.errors = len(records) - len(self.ok)
        # (contract, transport) -> task -> {draw: passed}
        self.outcomes: dict[tuple[str, str], dict[str, dict[int, bool]]] = defaultdict(lambda: defaultdict(dict))
        self.by_pair: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        self.family_of: dict[str, str] = {}
        for r in self.ok:
            pair = (r["contract"], r["transport"])
            self.outcomes[pair][r["task_id"]][r["draw"]] = r["verdict"]["passed"]
            self.by_pair[pair].append(r)
            self.family_of[r["task_id"]] = r["family"]
        self.families = family_order({r["family"] for r in self.ok})

    def shares(self, pair: tuple[str, str]) -> dict[str, float]:
        """task -> pass share across its draws, for the tasks present in ``pair``."""
        return {t: sum(d.values()) / len(d) for t, d in self.outcomes.get(pair, {}).items()}

    def rate(self, pair: tuple[str, str]) -> float | None:
        s = self.shares(pair)
        return sum(s.values()) / len(s) if s else None

    def family_arrays(self, pair: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
        """Per family (in ``self.families`` order): summed task shares and number of tasks present."""
        idx = {f: k for k, f in enumerate(self.families)}
        sums = np.zeros(len(self.families))
        sizes = np.zeros(len(self.families))
        for t, v in self.shares(pair).items():
            k = idx[self.family_of[t]]
            sums[k] += v
            sizes[k] += 1
        return sums, sizes


def _number(x: float) -> int | float:
    return int(round(x)) if abs(x - round(x)) < 1e-9 else round(x, 6)


def _cell(cd: ConfigData, pair: tuple[str, str]) -> dict[str, Any] | None:
    s = cd.shares(pair)
    if not s:
        return None
    passed = sum(s.values())
    return {"passed": _number(passed), "n": len(s), "rate": stats.clean(passed / len(s))}


def _decomposition(cd: ConfigData, rates: dict[str, float | None], counts: np.ndarray) -> dict[str, Any]:
    """damage, compensation, matched gap and boundary cost, each with its family-bootstrap interval."""
    boot = {}
    for name, pair in CELLS.items():
        if rates[name] is not None:
            boot[name] = stats.resampled_rates(counts, *cd.family_arrays(pair))
    out: dict[str, Any] = {}
    for key, (a, b) in {"damage": ("RN", "RR"), "compensation": ("NN", "RN"),
                        "matched_gap": ("NN", "RR"), "boundary_cost": ("NR", "RR")}.items():
        if rates[a] is None or rates[b] is None:
            out[key] = None
        else:
            out[key] = {"value": stats.clean(rates[a] - rates[b]), "ci95": stats.percentile_ci(boot[a] - boot[b])}
    return out


def _paired(cd: ConfigData, first: tuple[str, str], second: tuple[str, str]):
    """(task, draw) pairs present in both: yields (passed first, record second)."""
    a = {(r["task_id"], r["draw"]): r["verdict"]["passed"] for r in cd.by_pair.get(first, [])}
    for r in cd.by_pair.get(second, []):
        key = (r["task_id"], r["draw"])
        if key in a:
            yield a[key], r


def _retention(cd: ConfigData) -> float | None:
    kept = [r["verdict"]["passed"] for rr_passed, r in _paired(cd, CELLS["RR"], CELLS["RN"]) if rr_passed]
    return stats.clean(sum(kept) / len(kept)) if kept else None


def _shell_ran(r: dict[str, Any]) -> bool:
    return r["exit_code"] is not None or r["timed_out"]


def _exit_zero_wrong(cd: ConfigData) -> float | None:
    """Of the failing executions in which a shell ran (an exit code, or a timeout), the share that exited 0.
    Failures where no shell ran (transport errors, no command) are not in it; see the module docstring."""
    failing = [r for r in cd.ok if not r["verdict"]["passed"] and _shell_ran(r)]
    return stats.clean(sum(r["exit_code"] == 0 for r in failing) / len(failing)) if failing else None


def _exit_zero_wrong_counts(cd: ConfigData) -> dict[str, int]:
    failing = [r for r in cd.ok if not r["verdict"]["passed"]]
    with_shell = [r for r in failing if _shell_ran(r)]
    return {"exit_zero": sum(r["exit_code"] == 0 for r in with_shell), "failing_with_shell": len(with_shell),
            "failing_without_shell": len(failing) - len(with_shell)}


def _contracts(cd: ConfigData) -> dict[str, dict[str, float]]:
    pairs = list(cd.outcomes)
    out: dict[str, dict[str, float]] = {}
    for c in ordered({p[0] for p in pairs}, CONTRACT_ORDER):
        for t in ordered({p[1] for p in pairs if p[0] == c}, TRANSPORT_ORDER):
            rate = cd.rate((c, t))
            if rate is not None:
                out.setdefault(c, {})[t] = stats.clean(rate)
    return out


def _grammar(contracts: dict[str, dict[str, float]]) -> dict[str, Any] | None:
    has_contract = "disclosed-single" in contracts
    has_transport = any("nested-single" in row for row in contracts.values())
    if not (has_contract and has_transport):
        return None
    table = {c: {t: contracts.get(c, {}).get(t) for t in GRAMMAR_TRANSPORTS} for c in GRAMMAR_CONTRACTS}
    cells = [table["disclosed"]["nested"], table["disclosed-single"]["nested-single"],
             table["disclosed"]["nested-single"], table["disclosed-single"]["nested"]]
    diag = None
    if all(v is not None for v in cells):
        diag = stats.clean((cells[0] + cells[1]) / 2 - (cells[2] + cells[3]) / 2)
    return {"table": table, "diagonal_advantage": diag}


def _families(cd: ConfigData) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for f in cd.families:
        row: dict[str, float | None] = {}
        for name, pair in CELLS.items():
            vals = [v for t, v in cd.shares(pair).items() if cd.family_of[t] == f]
            row[name] = stats.clean(sum(vals) / len(vals)) if vals else None
        out[f] = row
    return out


def _attribution(cd: ConfigData) -> dict[str, Any]:
    """Per cell, failing executions and how many of them were damaged; ``lost``: RR passes failing in RN."""
    out: dict[str, Any] = {}
    for name, pair in CELLS.items():
        recs = cd.by_pair.get(pair)
        if not recs:
            out[name] = None
            continue
        fails = [r for r in recs if not r["verdict"]["passed"]]
        out[name] = {"failures": len(fails), "damaged": sum(bool(r["damaged"]) for r in fails)}
    lost = [r for rr_passed, r in _paired(cd, CELLS["RR"], CELLS["RN"]) if rr_passed and not r["verdict"]["passed"]]
    has_pairs = any(True for _ in _paired(cd, CELLS["RR"], CELLS["RN"]))
    out["lost"] = {"n": len(lost), "damaged": sum(bool(r["damaged"]) for r in lost)} if has_pairs else None
    return out


def _config_doc(cd: ConfigData, resamples: int, seed: int) -> dict[str, Any]:
    first = cd.records[0]["config"]
    config = {"provider": first["provider"], "model": first["model"],
              "effort": first["effort"] if first["effort"] not in (None, "") else "unset",
              "params": first.get("params") or {}}
    cells = {name: _cell(cd, pair) for name, pair in CELLS.items()}
    rates = {name: (c["rate"] if c else None) for name, c in cells.items()}
    counts = stats.resample_counts(len(cd.families), resamples, seed)
    contracts = _contracts(cd)
    native_raw = contracts.get("native", {}).get("raw")
    raw_raw = contracts.get("raw", {}).get("raw")
    doc: dict[str, Any] = {
        "config": config, "label": cd.label,
        "draws": len({r["draw"] for r in (cd.ok or cd.records)}),
        "records": len(cd.records), "errors": cd.errors,
        "cells": cells,
        **_decomposition(cd, rates, counts),
        "retention": _retention(cd),
        "exit_zero_wrong": _exit_zero_wrong(cd),
        "exit_zero_wrong_counts": _exit_zero_wrong_counts(cd),
        "contracts": contracts,
        "native_minus_raw": stats.clean(native_raw - raw_raw) if native_raw is not None and raw_raw is not None else None,
        "grammar": _grammar(contracts),
        "families": _families(cd),
        "damage_attribution": _attribution(cd),
        "paths": path_rows(cd, counts, exclude=harness_transports(cd.ok)),
        "harnesses": harness_rows(cd, counts),
    }
    chains = turn_rows(cd.ok)  # the multi-turn arm (qb_client.report.turns), only where its records are
    if chains is not None:
        doc["turns"] = chains
    return doc


NEEDS_TWO = "needs at least two configs with both RR and NN cells"


def _shared_tasks(comp: list[ConfigData]) -> list[str]:
    """The tasks every config in ``comp`` ran in both RR and NN: the only ground on which they compare."""
    sets = [set(cd.outcomes.get(CELLS["RR"], {})) & set(cd.outcomes.get(CELLS["NN"], {})) for cd in comp]
    return sorted(set.intersection(*sets)) if sets else []


def _own_tasks(cd: ConfigData) -> dict[str, int]:
    return {name: len(cd.outcomes.get(CELLS[name], {})) for name in ("RR", "NN")}


def _rank_agreement(datas: list[ConfigData], resamples: int, seed: int) -> dict[str, Any]:
    """Kendall tau-b of RR vs NN, its task-cluster bootstrap interval and the strict reversals, with every
    config scored on the tasks all of them ran in both RR and NN (``shared_tasks``). Configs that ran more
    are listed in ``restricted``; ``scores`` holds the scores compared. Without two configs, or without a
    shared task, every statistic is None and ``reason`` says why."""
    comp = [cd for cd in datas if cd.outcomes.get(CELLS["RR"]) and cd.outcomes.get(CELLS["NN"])]
    out: dict[str, Any] = {"kendall_tau_b": None, "ci95": None, "reversals": None, "shared_tasks": None,
                           "restricted": [], "scores": None, "reason": None}
    if len(comp) < 2:
        return {**out, "reason": NEEDS_TWO}
    tasks = _shared_tasks(comp)
    shared = set(tasks)
    restricted = [{"config": cd.label, "tasks": _own_tasks(cd)} for cd in comp
                  if any(set(cd.outcomes[CELLS[name]]) != shared for name in ("RR", "NN"))]
    out.update(shared_tasks=len(tasks), restricted=restricted)
    if not tasks:
        sizes = ", ".join(f"{r['config']} {r['tasks']['RR']} RR / {r['tasks']['NN']} NN" for r in restricted)
        return {**out, "reason": f"the configs share no task with both RR and NN ({sizes}), so they cannot be "
                                 "compared"}
    labels = [cd.label for cd in comp]
    index = {t: k for k, t in enumerate(tasks)}
    sums = {}
    for name in ("RR", "NN"):
        sums[name] = np.zeros((len(tasks), len(comp)))
        for c, cd in enumerate(comp):
            for t, v in cd.shares(CELLS[name]).items():
                if t in index:
                    sums[name][index[t], c] = v
    rr = [stats.clean(v) for v in sums["RR"].sum(axis=0) / len(tasks)]
    nn = [stats.clean(v) for v in sums["NN"].sum(axis=0) / len(tasks)]
    tau = stats.kendall_tau_b(rr, nn)
    # task-cluster bootstrap over the shared tasks: resample them, recompute every config's RR and NN score
    counts = stats.resample_counts(len(tasks), resamples, seed)
    sizes = np.ones((len(tasks), len(comp)))
    boot = {name: stats.resampled_rates(counts, sums[name], sizes) for name in ("RR", "NN")}
    ci = stats.percentile_ci(stats.kendall_tau_b_rows(boot["RR"], boot["NN"])) if tau is not None else None
    out.update(kendall_tau_b=tau, ci95=ci, reversals=stats.strict_reversals(labels, rr, nn),
               scores={lab: {"RR": a, "NN": b} for lab, a, b in zip(labels, rr, nn)})
    return out


def selection(labels: list[str], rr: list[float], nn: list[float]) -> dict[str, Any]:
    """Path-aware selection. Ties for the RR lead are broken by averaging: the regret is that of a
    uniformly random pick among the tied RR leaders (the mean of their NN scores minus the best NN)."""
    r = [round(v, stats.TIE_DECIMALS) for v in rr]
    n = [round(v, stats.TIE_DECIMALS) for v in nn]
    leaders = [labels[k] for k in range(len(labels)) if r[k] == max(r)]
    best = [labels[k] for k in range(len(labels)) if n[k] == max(n)]
    picked_nn = sum(nn[labels.index(lab)] for lab in leaders) / len(leaders)
    return {"rr_leaders": leaders, "nn_best": best, "picked_nn": picked_nn, "best_nn": max(nn),
            "regret": stats.clean(picked_nn - max(nn))}


def compute(records: list[dict[str, Any]], *, resamples: int = stats.RESAMPLES, seed: int = stats.SEED) -> dict[str, Any]:
    """The SPEC ``report --json`` document for these records.

    Suites, userlands and designs (one-shot, ``turns=K``) are never ranked together
    (:mod:`qb_client.report.groups`): each config entry names its ``suite``, ``userland`` and ``design``.
    When there are several groups, configs are compared (rank agreement, selection regret) only within
    each, under ``strata``, and the top-level statistics are null with the reason."""
    datas = [ConfigData(label, recs) for label, recs in group(records).items()]
    docs = [_config_doc(cd, resamples, seed) for cd in datas]
    for d, cd in zip(docs, datas):
        d["suite"], d["userland"], d["design"] = key_of(cd.records[0])
    keys = keys_of(records)
    per: list[dict[str, Any]] = []
    for key in keys:
        inside = [cd for cd in datas if key_of(cd.records[0]) == key]
        agreement = _rank_agreement(inside, resamples, seed)
        detail = compared(agreement)
        per.append({"suite": key[0], "userland": key[1], "design": key[2], "configs": [cd.label for cd in inside],
                    "rank_agreement": agreement, "selection_regret": selection(*detail)["regret"] if detail else None})
    if len(per) == 1:
        return {"configs": docs, "rank_agreement": per[0]["rank_agreement"],
                "selection_regret": per[0]["selection_regret"]}
    pooled = {"kendall_tau_b": None, "ci95": None, "reversals": None, "shared_tasks": None, "restricted": [],
              "scores": None, "reason": apart_reason(keys)}
    return {"configs": docs, "rank_agreement": pooled, "selection_regret": None, "strata": per}


def compared(agreement: dict[str, Any]) -> tuple[list[str], list[float], list[float]] | None:
    """(labels, RR scores, NN scores) the configs were compared on (their shared tasks), or None."""
    scores = agreement.get("scores")
    if not scores:
        return None
    labels = list(scores)
    return labels, [scores[k]["RR"] for k in labels], [scores[k]["NN"] for k in labels]


def selection_detail(doc: dict[str, Any]) -> dict[str, Any] | None:
    """Who RR picks and who is best on NN, on the shared tasks, recomputed from a document (for the renderers)."""
    detail = compared(doc["rank_agreement"])
    return selection(*detail) if detail else None


def comparison_note(doc: dict[str, Any]) -> str | None:
    """One line saying on what ground configs were compared, when some were restricted (or could not be)."""
    ra = doc["rank_agreement"]
    if ra.get("shared_tasks") is None or not ra.get("restricted"):
        return None
    if not ra["shared_tasks"]:
        return f"Rank agreement and selection regret: not computed: {ra['reason']}."
    cut = ", ".join(f"{r['config']} ({r['tasks']['RR']} RR, {r['tasks']['NN']} NN tasks)" for r in ra["restricted"])
    return (f"Configs are compared on the {ra['shared_tasks']} task(s) all of them ran in both RR and NN; "
            f"restricted to those: {cut}. Per-config cells are each over their own tasks (n).")
