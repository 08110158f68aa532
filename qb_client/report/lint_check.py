"""``report --lint``: how much of a campaign's measured damage the lint would have flagged before it ran.

For every record with a command (harness errors and replies without one left out), the lint's prediction for
(command, transport), made from the text alone, is set against the record's measured ``damaged``. Per
transport: ``recall`` is the share of damaged records the lint flagged (``damaged`` predicted true),
``false_alarms`` the share of intact records it flagged, ``unknown`` how many it could not decide, and
``missed`` the damaged records it predicted intact (the execution oracle holds that at zero). Records are
computed once per distinct (command, transport); a transport the lint cannot build is listed with its reason.
With ``--shellcheck`` each row also holds ShellCheck's recall and false alarms on the route's wrapper
(:mod:`.shellcheck` says what counts as flagged).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from transports.lint import LintError, lint

from ..console import safe_text


def counted(r: dict[str, Any]) -> bool:
    """A record with a command and a transport whose delivery was attempted (no harness error)."""
    return isinstance(r.get("command"), str) and isinstance(r.get("transport"), str) and not (
        r.get("error") or "").startswith(("harness:", "session-end"))


def lint_section(records: list[dict[str, Any]], shellcheck: bool = False) -> list[dict[str, Any]]:
    """One row per transport, in first-seen order (see the module docstring). ``shellcheck``: also ShellCheck's
    counts on the route's wrapper (``sc_*`` keys, :mod:`.shellcheck`; ShellCheckMissing where it is absent)."""
    cache: dict[tuple[str, str], bool | None | str] = {}
    rows: dict[str, dict[str, Any]] = {}
    sc: dict[tuple[str, str], bool | None] = {}
    if shellcheck:
        from .shellcheck import shellcheck_flags

        sc = shellcheck_flags((r["command"], r["transport"]) for r in records if counted(r))
    for r in records:
        if not counted(r):
            continue
        command, transport = r["command"], r["transport"]
        row = rows.setdefault(transport, {"transport": transport, "records": 0, "damaged": 0, "flagged": 0,
                                          "caught": 0, "false_alarms": 0, "unknown": 0, "missed": 0,
                                          "error": None})
        if shellcheck and "sc_flagged" not in row:
            from .shellcheck import label

            row.update(sc_wrapper=label(transport), sc_flagged=0, sc_caught=0, sc_false_alarms=0)
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
        if sc.get(key):
            row["sc_flagged"] += 1
            row["sc_caught"] += measured
            row["sc_false_alarms"] += not measured
    out = []
    for row in rows.values():
        intact = row["records"] - row["damaged"]
        row["recall"] = row["caught"] / row["damaged"] if row["damaged"] else None
        row["false_alarm_rate"] = row["false_alarms"] / intact if intact else None
        if shellcheck:
            wrapped = row["sc_wrapper"] is not None
            row["sc_recall"] = row["sc_caught"] / row["damaged"] if row["damaged"] and wrapped else None
            row["sc_false_alarm_rate"] = row["sc_false_alarms"] / intact if intact and wrapped else None
        out.append(row)
    return out


def _pct(x: float | None) -> Text:
    return Text("-", style="dim") if x is None else Text(f"{100 * x:.1f}")


def render_lint(rows: list[dict[str, Any]]) -> Group:
    """The lint's table, and ShellCheck's beside it in a table of its own so both stay legible at 80 columns."""
    t = Table(title=Text("Lint predicted: the measured damage the lint flags from the text alone", style="bold"),
              title_justify="left", header_style="bold", pad_edge=False,
              caption=Text("recall: damaged records flagged, %; false alarms: intact records flagged, %; unknown: "
                           "not decided without a run; missed: damaged records predicted intact", style="dim"),
              caption_justify="left")
    heads = ["transport", "records", "damaged", "recall %", "false alarms %", "unknown", "missed"]
    for name in heads:
        t.add_column(name, justify="left" if name == "transport" else "right")
    for row in rows:
        if row["error"] and not row["records"]:
            t.add_row(safe_text(row["transport"]), Text(f"(not linted: {row['error'][:80]})", style="dim"),
                      *[""] * (len(heads) - 2))
            continue
        t.add_row(safe_text(row["transport"]), str(row["records"]), str(row["damaged"]),
                  _pct(row["recall"]), _pct(row["false_alarm_rate"]), str(row["unknown"]),
                  Text(str(row["missed"]), style="bold red" if row["missed"] else ""))
    if not any("sc_wrapper" in row for row in rows):
        return Group(t)
    sc = Table(title=Text("ShellCheck on the same records, for comparison", style="bold"), title_justify="left",
               header_style="bold", pad_edge=False, caption_justify="left",
               caption=Text("flagged = a diagnostic code on the route's wrapper more often than on R alone "
                            "(docs/lint.md)", style="dim"))
    for name in ("transport", "wrapper ShellCheck reads", "recall %", "false alarms %"):
        sc.add_column(name, justify="right" if name.endswith("%") else "left")
    for row in rows:
        if row["error"] and not row["records"]:
            continue
        wrapped = row.get("sc_wrapper")
        sc.add_row(safe_text(row["transport"]),
                   safe_text(wrapped) if wrapped is not None else Text("(none)", style="dim"),
                   _pct(row.get("sc_recall")), _pct(row.get("sc_false_alarm_rate")))
    return Group(t, Text(""), sc)
