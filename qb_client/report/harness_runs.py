"""The report of harness runs (``run --harness``): a harness x model table, and what each harness changed.

Apart from the one-shot harness routes' group (the harness there carries one fixed R; here it drives the
model through the task), and never pooled with the crossed design: a harness run's records have
``contract: "harness"`` and an ``agent`` object, and only those are read here.

Per (harness, config), over its runs (one per task and draw; records with ``error`` left out):

* ``passed``/``n`` and ``rate`` with a 95% Wilson score interval over the runs (the runs of a few tasks are
  too few for the family bootstrap of the crossed design; the interval says how little 14 runs tell);
* what the harness changed, from the steps: ``changed`` (a shell ran, but its ``received`` differs from the
  model's command), ``refused`` (the harness started no shell for a command), and ``exit_zero_wrong`` (failing
  runs whose last shell exited 0: a wrong final state that looked like success to the harness's loop);
* cost per run: mean turns, steps, wall-clock seconds, and tokens (input, output) as the provider reported
  them (the courier reports none: zero).
"""

from __future__ import annotations

import math
from typing import Any


def wilson(passed: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    if n == 0:
        return (0.0, 0.0)
    p = passed / n
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4))


def is_harness_run(r: dict[str, Any]) -> bool:
    return r.get("contract") == "harness" and isinstance(r.get("agent"), dict)


def _label(config: Any) -> str:
    if not isinstance(config, dict):
        return "?"
    base = f"{config.get('provider')}:{config.get('model')}@{config.get('effort', 'unset')}"
    return f"{base}+{config['variant']}" if config.get("variant") else base


def harness_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        if is_harness_run(r) and not r.get("error"):
            groups.setdefault((str(r.get("harness")), _label(r.get("config"))), []).append(r)
    rows = []
    for (harness, label), runs in sorted(groups.items()):
        n = len(runs)
        passed = sum(1 for r in runs if (r.get("verdict") or {}).get("passed"))
        steps = [s for r in runs for s in r.get("steps") or []]
        failing = [r for r in runs if not (r.get("verdict") or {}).get("passed")]
        ran = [r for r in failing if [s for s in r.get("steps") or [] if s.get("received") is not None]]
        ezw = sum(1 for r in ran if [s for s in r["steps"] if s.get("received") is not None][-1].get("exit_code") == 0)
        wall = [((r.get("timing") or {}).get("exec_ms") or 0) / 1000 for r in runs]
        usage = [r.get("usage") or {} for r in runs]
        rows.append({
            "harness": harness, "version": runs[0].get("harness_version"), "config": label, "n": n, "passed": passed,
            "rate": round(passed / n, 4), "ci95": wilson(passed, n), "steps": len(steps),
            "changed": sum(1 for s in steps if s.get("received") is not None and s.get("received") != s.get("command")),
            "refused": sum(1 for s in steps if s.get("received") is None),
            "exit_zero_wrong": ezw, "failing_with_shell": len(ran),
            "per_run": {"turns": round(sum((r["agent"].get("turns") or 0) for r in runs) / n, 2),
                        "steps": round(len(steps) / n, 2), "seconds": round(sum(wall) / n, 2),
                        "input_tokens": round(sum(u.get("input_tokens") or 0 for u in usage) / n, 1),
                        "output_tokens": round(sum(u.get("output_tokens") or 0 for u in usage) / n, 1)},
            "stops": {s: sum(1 for r in runs if r["agent"].get("stop") == s)
                      for s in sorted({str(r["agent"].get("stop")) for r in runs})},
        })
    return rows


def render_rows(rows: list[dict[str, Any]], console: Any) -> None:
    """The table on the terminal (rich)."""
    from rich.table import Table

    table = Table(title="harness runs: harness x model")
    for name in ("harness", "model"):
        table.add_column(name, overflow="fold")
    for name in ("passed/n", "rate [95%]", "steps", "changed", "refused", "exit-0\nwrong", "turns\n/run", "s/run",
                 "tokens in/out\n/run"):
        table.add_column(name, justify="right", no_wrap=True)
    for r in rows:
        table.add_row(f"{r['harness']} {r['version']}", r["config"], f"{r['passed']}/{r['n']}",
                      f"{100 * r['rate']:.1f} [{100 * r['ci95'][0]:.1f}, {100 * r['ci95'][1]:.1f}]", str(r["steps"]),
                      str(r["changed"]), str(r["refused"]), f"{r['exit_zero_wrong']}/{r['failing_with_shell']}",
                      f"{r['per_run']['turns']:g}", f"{r['per_run']['seconds']:.1f}",
                      f"{r['per_run']['input_tokens']:g}/{r['per_run']['output_tokens']:g}")
    console.print(table)
