"""``report --lint``: how much of a campaign's measured damage the lint would have flagged before it ran.

For every record with a command (harness errors and replies without one left out), the lint's prediction for
(command, transport), made from the text alone, is set against the record's measured ``damaged``. Per
transport: ``recall`` is the share of damaged records the lint flagged (``damaged`` predicted true),
``false_alarms`` the share of intact records it flagged, ``unknown`` how many it could not decide, and
``missed`` the damaged records it predicted intact (the execution oracle holds that at zero). Records are
computed once per distinct (command, transport); a transport the lint cannot build is listed with its reason.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rich.table import Table
from rich.text import Text

from transports.lint import LintError, lint

from ..console import safe_text


def lint_section(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per transport, in first-seen order (see the module docstring)."""
    cache: dict[tuple[str, str], bool | None | str] = {}
    rows: dict[str, dict[str, Any]] = {}
    for r in records:
        command, transport = r.get("command"), r.get("transport")
        if not isinstance(command, str) or not isinstance(transport, str) or (r.get("error") or "").startswith(
                ("harness:", "session-end")):
            continue
        row = rows.setdefault(transport, {"transport": transport, "records": 0, "damaged": 0, "flagged": 0,
                                          "caught": 0, "false_alarms": 0, "unknown": 0, "missed": 0,
                                          "error": None})
        key = (command, transport)
        if key not in cache:
            try:
                cache[key] = lint(command, transport).damaged
            except LintError as e:
                cache[key] = str(e)
        predicted = cache[key]
        if isinstance(predicted, str):
            row["error"] = predicted
            continue
        measured = bool(r.get("damaged"))
        row["records"] += 1
        row["damaged"] += measured
        row["flagged"] += predicted is True
        row["caught"] += predicted is True and measured
        row["false_alarms"] += predicted is True and not measured
        row["unknown"] += predicted is None
        row["missed"] += predicted is False and measured
    out = []
    for row in rows.values():
        intact = row["records"] - row["damaged"]
        row["recall"] = row["caught"] / row["damaged"] if row["damaged"] else None
        row["false_alarm_rate"] = row["false_alarms"] / intact if intact else None
        out.append(row)
    return out


def _pct(x: float | None) -> Text:
    return Text("-", style="dim") if x is None else Text(f"{100 * x:.1f}")


def render_lint(rows: list[dict[str, Any]]) -> Table:
    t = Table(title=Text("Lint predicted: the measured damage the lint flags from the text alone", style="bold"),
              title_justify="left", header_style="bold", pad_edge=False,
              caption=Text("recall: damaged records flagged, %; false alarms: intact records flagged, %; unknown: "
                           "not decided without a run; missed: damaged records predicted intact", style="dim"),
              caption_justify="left")
    for name in ("transport", "records", "damaged", "recall %", "false alarms %", "unknown", "missed"):
        t.add_column(name, justify="left" if name == "transport" else "right")
    for row in rows:
        if row["error"] and not row["records"]:
            t.add_row(safe_text(row["transport"]), Text(f"(not linted: {row['error'][:80]})", style="dim"),
                      "", "", "", "", "")
            continue
        t.add_row(safe_text(row["transport"]), str(row["records"]), str(row["damaged"]), _pct(row["recall"]),
                  _pct(row["false_alarm_rate"]), str(row["unknown"]),
                  Text(str(row["missed"]), style="bold red" if row["missed"] else ""))
    return t
