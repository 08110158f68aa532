"""What ``quotebench exec`` prints: one record read as a newcomer needs it, or several side by side.

One record: the route (its boundary and the intermediate text it built), R and ``received`` with
their invisible characters marked, ``(damaged)`` on a line of its own, a character diff and the
rules that explain a known change, then the exit code, the output and the verdict. Several
transports: one table, a row per transport. Every text from a record goes through
:func:`qb_client.console.safe` (via :mod:`qb_client.records.damage`), so nothing acts on the terminal.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from ..console import safe_text
from .damage import cell, char_diff, visible
from .route import artifacts, boundary, rules_for

NONE_RECEIVED = "none (no shell received a program)"


def _exit_text(rec: dict[str, Any]) -> str:
    code = rec["exit_code"]
    text = "none (no shell ran)" if code is None else str(code)
    return text + ("  (timed out)" if rec["timed_out"] else "")


def _grid() -> Table:
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")
    return t


def _route_rows(t: Table, rec: dict[str, Any]) -> None:
    """The boundary and the intermediate texts the transport's own code builds from R."""
    name, command = rec["transport"], rec["command"]
    if text := boundary(name):
        t.add_row("route", safe_text(text, "dim"))
    if command is None:
        return
    for label, text in artifacts(name, command, rec["received"]):
        t.add_row(label, Text(visible(text)))


def _damage_rows(t: Table, rec: dict[str, Any]) -> None:
    """R and received, both marked; ``(damaged)`` alone on its line; the diff and the rules that apply."""
    command, received = rec["command"], rec["received"]
    t.add_row("command", Text(visible(command)) if command is not None else Text("none", style="dim"))
    t.add_row("received", Text(visible(received)) if received is not None else Text(NONE_RECEIVED, style="dim"))
    if not rec["damaged"]:
        return
    t.add_row("", Text("(damaged)", style="bold red"))
    if command is not None and received is not None and received != command:
        t.add_row("diff", char_diff(command, received))
    if command is not None:
        for rule in rules_for(rec["transport"], command):
            t.add_row("rule", safe_text(rule))


def record_view(rec: dict[str, Any], *, verdict: bool = True) -> Table:
    """One record for a reader; ``verdict=False`` for a run in a scratch directory (nothing is judged)."""
    t = _grid()
    where = rec["task_id"] if verdict else "scratch directory (no task)"
    t.add_row("task", safe_text(f"{where}  via {rec['transport']}  ({rec.get('isolation') or 'not run'})"))
    _route_rows(t, rec)
    _damage_rows(t, rec)
    t.add_row("exit", _exit_text(rec))
    if rec.get("transport_error"):
        t.add_row("transport error", safe_text(rec["transport_error"], "red"))
    if rec.get("received_note"):
        t.add_row("note", safe_text(rec["received_note"], "dim"))
    if rec.get("error"):
        t.add_row("harness error", safe_text(rec["error"], "red"))
    for stream in ("stdout", "stderr"):
        s = rec[stream]
        if s["text"]:
            t.add_row(stream, safe_text(s["text"].rstrip("\n")[:500]) + (Text(" [truncated]", style="dim")
                                                                         if s["truncated"] else Text("")))
    if verdict:
        _verdict_rows(t, rec["verdict"])
    return t


def _verdict_rows(t: Table, verdict: dict[str, Any]) -> None:
    t.add_row("verdict", Text("PASS", style="bold green") if verdict["passed"] else Text("FAIL", style="bold red"))
    for c in verdict["checks"]:
        t.add_row("", safe_text(("ok   " if c["ok"] else "FAIL ") + f"{c['check']}: {c['detail']}",
                                "green" if c["ok"] else "red"))


def compare_table(recs: list[dict[str, Any]], *, verdict: bool = True, width: int = 40) -> Table:
    """One row per transport: received (marked, cut to ``width``), exit, verdict, damaged."""
    t = Table(title=safe_text(f"R = {cell(recs[0]['command'] or '', 60)}") if recs else None,
              title_justify="left")
    t.add_column("transport", no_wrap=True)
    t.add_column("received", overflow="fold")
    t.add_column("exit", no_wrap=True)
    if verdict:
        t.add_column("verdict", no_wrap=True)
    t.add_column("damaged", no_wrap=True)
    for r in recs:
        received = r["received"]
        shown = Text(cell(received, width)) if received is not None else Text("none", style="dim")
        row: list[Any] = [safe_text(r["transport"]), shown,
                          "none" if r["exit_code"] is None else str(r["exit_code"])]
        if verdict:
            row.append(Text("PASS", style="green") if r["verdict"]["passed"] else Text("FAIL", style="red"))
        row.append(Text("yes", style="red") if r["damaged"] else Text("no"))
        t.add_row(*row)
    return t
