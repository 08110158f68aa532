"""The damaged commands themselves, for a reader without jq: ``report --damaged TRANSPORT`` prints them,
``report --csv FILE`` writes them (one row per damaged execution) for a spreadsheet.

A record is damaged when the final shell did not receive R (``damaged``, docs/spec.md#record-format);
records with no command (nothing to damage) and harness errors are left out.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..records.damage import cell
from .load import ReportInputError, config_label

COLUMNS = ("config", "suite", "userland", "task", "contract", "transport", "passed", "command", "received")


def damaged_rows(records: list[dict[str, Any]], transport: str | None = None) -> list[dict[str, Any]]:
    """One row per damaged record (of ``transport`` when given, all transports for None or ``all``)."""
    want = None if transport in (None, "all") else transport
    rows = []
    for r in records:
        if not r.get("damaged") or r.get("command") is None or (want is not None and r.get("transport") != want):
            continue
        rows.append({"config": config_label(r["config"]) if isinstance(r.get("config"), dict) else "",
                     "suite": r.get("suite", "public"), "userland": r.get("userland", "gnu"),
                     "task": r.get("task_id"), "contract": r.get("contract"), "transport": r.get("transport"),
                     "passed": bool((r.get("verdict") or {}).get("passed")),
                     "command": r.get("command"), "received": r.get("received")})
    return rows


def check_transport(records: list[dict[str, Any]], transport: str) -> None:
    """A transport no record ran is bad input, naming the ones that did (a typo must not print nothing)."""
    ran = sorted({str(r.get("transport")) for r in records})
    if transport != "all" and transport not in ran:
        raise ReportInputError(f"--damaged {transport}: no record ran on it (these did: {', '.join(ran)}; or all)")


def write_csv(rows: list[dict[str, Any]], path: str) -> None:
    """RFC 4180 CSV with a header; texts exactly as recorded (a spreadsheet shows newlines in a cell)."""
    try:
        with open(path, "w", newline="", encoding="utf-8", errors="surrogateescape") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            w.writeheader()
            for row in rows:
                w.writerow({**row, "received": "" if row["received"] is None else row["received"]})
    except OSError as e:
        raise ReportInputError(f"--csv {path}: cannot write: {e.strerror or e}") from None


def render_damaged(rows: list[dict[str, Any]], console: Console, transport: str) -> None:
    """The rows as one table, texts on one line with their invisible characters marked."""
    t = Table(title=Text(f"Damaged commands on {transport}: {len(rows)}", style="bold"), title_justify="left")
    for head in ("task", "contract", "transport", "command", "received"):
        t.add_column(head, overflow="fold", no_wrap=head in ("task", "contract", "transport"))
    for row in rows:
        received = Text(cell(row["received"], 60)) if row["received"] is not None else Text("none", style="dim")
        t.add_row(Text(cell(str(row["task"]), 40)), Text(str(row["contract"])), Text(cell(str(row["transport"]), 40)),
                  Text(cell(row["command"], 60)), received)
    console.print(t)
