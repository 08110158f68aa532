"""Shared terminal plumbing: stdout for results (``--json`` puts exactly one JSON
document there), stderr for messages, and the one-line bad-input error."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

from rich.console import Console
from rich.table import Table
from rich.text import Text

# piped output gets room for wide tables instead of rich's default of 80 columns
out = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, soft_wrap=True)


class BadInput(ValueError):
    """Bad input from the user: printed as one line, exit status 2."""


def fail(message: str) -> NoReturn:
    raise BadInput(message)


def print_json(doc: Any) -> None:
    """One JSON document on stdout, always valid UTF-8: a lone surrogate (from input that was not valid
    UTF-8) cannot be encoded, so then the whole document is written with ``\\uXXXX`` escapes instead."""
    text = json.dumps(doc, ensure_ascii=False, indent=2)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(doc, ensure_ascii=True, indent=2)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def record_table(rec: dict[str, Any]) -> Table:
    """A compact human view of one record."""
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold")
    t.add_column()
    verdict = rec["verdict"]
    t.add_row("task", f"{rec['task_id']}  via {rec['transport']}  ({rec.get('isolation') or 'not run'})")
    t.add_row("command", Text(repr(rec["command"])))
    t.add_row("received", Text(repr(rec["received"])) + (Text("  (damaged)", style="red") if rec["damaged"] else Text("")))
    t.add_row("exit", f"{rec['exit_code']}" + ("  (timed out)" if rec["timed_out"] else ""))
    if rec.get("transport_error"):
        t.add_row("transport error", Text(rec["transport_error"], style="red"))
    for stream in ("stdout", "stderr"):
        s = rec[stream]
        if s["text"]:
            t.add_row(stream, Text(s["text"].rstrip("\n")[:500] + (" [truncated]" if s["truncated"] else "")))
    t.add_row("verdict", Text("PASS", style="bold green") if verdict["passed"] else Text("FAIL", style="bold red"))
    for c in verdict["checks"]:
        t.add_row("", Text(("ok   " if c["ok"] else "FAIL ") + f"{c['check']}: {c['detail']}",
                           style="green" if c["ok"] else "red"))
    return t
