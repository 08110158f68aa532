"""What ``quotebench lint`` prints for one prediction: the route, R and the predicted ``received`` marked as
``exec`` marks them, ``(damaged)``, the same character diff, each hazard with its rule, and the safe text.

Every text goes through :func:`qb_client.console.safe` (via :mod:`.damage`), so nothing acts on the terminal.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from transports.lint import Lint

from ..console import safe_text
from .damage import char_diff, visible
from .route import boundary

MAX_HAZARDS_SHOWN = 12


def _grid() -> Table:
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")
    return t


def _received(p: Lint) -> Text:
    if not p.known:
        return Text(f"unknown: {p.unknown}", style="yellow")
    if p.transport_error is not None:
        return Text(f"none (transport error: {p.transport_error})", style="dim")
    if p.received is None:
        return Text("none (no shell would receive a program)", style="dim")
    return Text(visible(p.received))


def _verdict(p: Lint) -> Text:
    if p.damaged is None:
        return Text("(damage unknown)", style="bold yellow")
    if p.damaged:
        return Text("(damaged" + (": the paste splits R into several commands)" if p.split else ")"), style="bold red")
    return Text("(intact)", style="bold green")


def lint_view(p: Lint) -> Table:
    """One prediction for a reader."""
    t = _grid()
    t.add_row("route", safe_text(p.transport + (f"  ({text})" if (text := boundary(p.transport)) else "")))
    t.add_row("command", Text(visible(p.command)))
    t.add_row("received", _received(p))
    t.add_row("", _verdict(p))
    if p.known and p.received is not None and p.received != p.command:
        t.add_row("diff", char_diff(p.command, p.received))
    seen: set[str] = set()
    for h in p.hazards[:MAX_HAZARDS_SHOWN]:
        t.add_row("hazard", safe_text(f"{h.start}-{h.end} {h.text!r} {h.kind}" +
                                      ("" if h.rule in seen else f": {h.rule}")))
        seen.add(h.rule)
    if len(p.hazards) > MAX_HAZARDS_SHOWN:
        t.add_row("", Text(f"(+{len(p.hazards) - MAX_HAZARDS_SHOWN} more)", style="dim"))
    s = p.safe
    if s is not None and s.how != "as-is":
        if s.text is not None:
            t.add_row("safe", Text(visible(s.text)))
            t.add_row("", Text(f"({s.how}: the lint predicts it arrives as exactly R)", style="dim"))
        else:
            t.add_row("safe", safe_text(f"{s.how}: {s.note} ({s.transport})", "dim"))
    return t
