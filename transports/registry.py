"""Transports by name, and how names compose.

This module is the one place where the stack order is visible: a composed
name lists transports outermost first, joined by ``+``; every part but the
last must be middleware (it decodes the command and hands it on), the last
one runs it. ``json-naive+ssh`` = decode as naive JSON, then send over ssh.
"""

from __future__ import annotations

from collections.abc import Callable

from .base import Transport
from .escaped import Escaped
from .json_embed import JsonCorrect, JsonNaive
from .nested import Nested
from .nested_single import NestedSingle
from .raw import Raw
from .tempscript import Tempscript


class UnknownTransportError(ValueError):
    """A transport name that is not registered, or a composition that cannot be built."""


def _ssh() -> Transport:
    from .ssh import Ssh  # imported lazily: asyncssh is only needed when ssh is used

    return Ssh()


TERMINAL: dict[str, Callable[[], Transport]] = {
    "raw": Raw,
    "nested": lambda: Nested,
    "nested-single": lambda: NestedSingle,
    "escaped": lambda: Escaped,
    "tempscript": Tempscript,
    "ssh": _ssh,
}
MIDDLEWARE: dict[str, Callable[[Transport | None], Transport]] = {
    "json-naive": JsonNaive,
    "json-correct": JsonCorrect,
}
ORDER: tuple[str, ...] = ("raw", "nested", "nested-single", "escaped", "tempscript", "json-naive", "json-correct", "ssh")


def known() -> list[str]:
    return list(ORDER)


def validate_name(name: str) -> str:
    """Raise ``UnknownTransportError`` unless ``name`` (possibly composed) can be built."""
    parts = [p.strip() for p in name.split("+")]
    for p in parts:
        if p not in TERMINAL and p not in MIDDLEWARE:
            raise UnknownTransportError(f"unknown transport '{p}' (known: {', '.join(ORDER)}; compose with +, e.g. json-naive+ssh)")
    for p in parts[:-1]:
        if p not in MIDDLEWARE:
            raise UnknownTransportError(f"transport '{p}' runs the command itself and cannot wrap another (in '{name}')")
    return "+".join(parts)


def get(name: str) -> Transport:
    """Build the transport named ``name``; composed names are built innermost first."""
    parts = validate_name(name).split("+")
    last = parts[-1]
    transport: Transport = TERMINAL[last]() if last in TERMINAL else MIDDLEWARE[last](None)
    for p in reversed(parts[:-1]):
        transport = MIDDLEWARE[p](transport)
    transport.name = name  # type: ignore[misc]
    return transport


def parse_list(spec: str) -> list[str]:
    """A comma-separated list of transport names, each validated; repeats dropped (first kept), so no work doubles."""
    names = list(dict.fromkeys(validate_name(s) for s in spec.split(",") if s.strip()))
    if not names:
        raise UnknownTransportError("no transport given")
    return names
