"""The guarded shell tool (``quotebench serve --guard``): lint each command before delivery and send what
arrives as R.

Before a call is delivered, the lint (:mod:`transports.lint`) predicts what the served route does to R, with
the sandbox's own environment as the outer shell's. Where R is predicted intact it goes as it is; otherwise
the safe text the lint checked (R escaped for the route) goes in its place, or, where no text survives the
route, R goes through the route's ``-safe`` twin; where damage is unknown and no encoding is known, R goes
as it is and the record says the call was not guarded. The record keeps the client's R as ``command`` and
the traced ``received``; its ``guard`` field says what the lint predicted and what was delivered, and the
tool result tells the client in one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from transports.base import Transport
from transports.lint import LintError, lint
from transports.registry import get
from transports.results.record import FIELD_CAP, Guard


@dataclass
class Plan:
    """What to deliver for one call: ``text`` through ``transport``, and the record's ``guard``."""

    text: str
    transport: Transport
    guard: Guard


def _cut(text: str | None) -> str | None:
    return text[:FIELD_CAP] if text is not None else None


def plan(command: str, transport: Transport, env: Mapping[str, str]) -> Plan:
    """The guarded delivery of ``command`` on ``transport`` (see the module docstring). Never raises: a
    command the lint refuses (over its size cap) is delivered unguarded."""
    try:
        p = lint(command, transport.name, env=env)
    except LintError:
        return Plan(command, transport, Guard(action="unguarded", predicted_damaged=None, predicted_known=False))
    seen = dict(predicted_damaged=p.damaged, predicted_known=p.known, predicted_received=_cut(p.received))
    safe = p.safe
    if p.damaged is False or safe is None:
        action = "as-is" if p.damaged is False else "unguarded"
        return Plan(command, transport, Guard(action=action, **seen))
    if safe.how == "escaped" and safe.text is not None:
        return Plan(safe.text, transport, Guard(action="escaped", delivered=_cut(safe.text), **seen))
    if safe.how == "script" and safe.transport != transport.name:
        return Plan(command, get(safe.transport), Guard(action="twin", via=safe.transport, **seen))
    return Plan(command, transport, Guard(action="unguarded", **seen))


def said(guard: Guard) -> str | None:
    """The tool result's line about the guard, or None when R went as it is."""
    if guard.action == "escaped":
        return "guard: this path would have changed the command; an escaped form that arrives intact was sent"
    if guard.action == "twin":
        return f"guard: this path would have changed the command; it was sent through {guard.via}"
    if guard.action == "unguarded" and guard.predicted_damaged is not False:
        return "guard: whether this path changes the command is not known; it was sent as it is"
    return None
