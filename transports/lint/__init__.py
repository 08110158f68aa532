"""The hazard lint: what a route will do to a command R, said before anything runs.

``lint(R, transport)`` predicts, from the text alone, whether the route damages R, the exact program the
final shell would receive (or that it cannot be known without a run, and why), each span of R the route
reinterprets with the route's rule, and a ``safe`` text that the same route delivers as exactly R.
``deliver(R, transport)`` is the safe delivery alone. Both are pure Python over the text: no process, no
sandbox, no server, no file.

The rooms
    ``bashparse``  a static model of bash's parse of one program text (the outer shells);
    ``outer``      the routes that are one outer shell's parse of a text holding R (nested, ssh, docker-sh);
    ``routes``     one predictor per route, from the route's own public functions;
    ``rules``      each route's documented behaviour per character class (``exec`` prints the same texts);
    ``safe``       the encodings that survive a route, each checked or proved before it is offered;
    ``paste``      the paste routes, where the encoding arrives as R by construction, proved per route;
    ``model``      the result types.

It imports the transports' registry and their public functions, never the sandbox's running parts; the
server (``qb_server``) and the client (``qb_client``) import it. Every exact prediction is held to the
traced ``received`` of the real route by the execution oracle (tests/test_lint_oracle.py); the
documentation is docs/lint.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from ..registry import UnknownTransportError, get, validate_name
from .model import Hazard, Lint, Outcome, Safe, hazard, refused
from .paste import proof
from .routes import predict_terminal
from .rules import RULES, base_parts
from .safe import choose

__all__ = ["Hazard", "Lint", "LintError", "Safe", "deliver", "lint"]

MAX_COMMAND = 1 << 20
"""Characters of R above which the lint refuses (no route carries more than 128 KiB as an argument;
``tempscript`` is the route for a longer program)."""


class LintError(ValueError):
    """Bad input to the lint: an unknown transport, a command that is not text or is too long (one line)."""


@lru_cache(maxsize=256)
def _route(name: str) -> tuple[str, list[tuple[str, Any]]]:
    """(the normal name, its layers outermost first as (base name, transport object))."""
    try:
        normal = validate_name(name)
        top = get(normal)
    except (UnknownTransportError, ValueError) as e:
        raise LintError(str(e)) from None
    except Exception as e:  # noqa: BLE001 - a path whose component is missing still has a name
        raise LintError(f"transport '{name}' cannot be built here: {e}") from None
    layers: list[tuple[str, Any]] = []
    t: Any = top
    for part in (normal.split("+") if not normal.startswith("template:") and "+template:" not in normal
                 else [normal]):
        base = part.split("@")[0]
        if base in ("json-naive", "json-correct"):
            layers.append((base, t))
            t = t.inner
        else:
            layers.append((part if part.startswith("template:") else base, t))
    if layers[-1][0] in ("json-naive", "json-correct"):  # middleware alone runs on raw
        layers.append((t.name.split("@")[0], t))
    return normal, layers


def _outcome(command: str, layers: list[tuple[str, Any]], env: Mapping[str, str] | None) -> Outcome:
    text = command
    for base, t in layers:
        if base in ("json-naive", "json-correct"):
            from ..base import check_command

            if (why := check_command(text)) is not None:
                return refused(why)
            try:
                decoded = t.decode(text)
            except (ValueError, KeyError, TypeError, RecursionError) as e:
                return refused(f"{base}: the JSON document does not parse: {e}")
            if not isinstance(decoded, str):
                return refused(f"{base}: the command field decoded to {type(decoded).__name__}, not a string")
            text = decoded
            continue
        return predict_terminal(base, text, t, env)
    return refused("no terminal transport")


@lru_cache(maxsize=256)
def _proof(name: str) -> Callable[[str, str], bool] | None:
    """The paste proof of a one-layer route (:mod:`.paste`), built once per route."""
    _, layers = _route(name)
    return proof(*layers[0]) if len(layers) == 1 else None


def _check(command: object) -> str:
    if not isinstance(command, str):
        raise LintError(f"the command must be text, not {type(command).__name__}")
    if len(command) > MAX_COMMAND:
        raise LintError(f"the command is longer than {MAX_COMMAND} characters")
    return command


def _check_env(env: object) -> None:
    if not isinstance(env, Mapping):
        raise LintError(f"env must map names to values, not {type(env).__name__}")
    for key, value in env.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise LintError(f"env must map text to text: {str(key)[:40]!r} -> {type(value).__name__}")


SHARED_BELOW = 1024
"""Hazards at positions below this are made once and shared between results (a Hazard is frozen): the
lint's cost per reinterpreted character is then a dictionary look-up. The table holds at most this many
positions times the characters of the single-character rules (a few tens of thousands of small objects)."""
_SHARED: dict[tuple[int, str, str], Hazard] = {}


def _hazards(command: str, layers: list[tuple[str, Any]]) -> list[Hazard]:
    """Spans of R that the outermost unsafe layers reinterpret (an inner layer's hazards are in the text the
    outer one decoded, which is not R's, unless the outer layer left it unchanged): at most 200 per rule, the
    first 500 in the order of R."""
    names = tuple(b for b, _ in layers)
    table = _one_pass(names)
    found: list[Hazard] = []
    if table is not None:  # each rule is one character of its own: one scan, already in R's order
        pattern, of_char = table
        new = object.__new__
        counts: dict[str, int] = {}
        for m in pattern.finditer(command):
            c = m.group()
            kind, rule = of_char[c]
            n = counts.get(kind, 0) + 1
            if n > 200:  # a rule's cap: the scan per rule below skips the rest in C, not one step each
                found = []
                break
            counts[kind] = n
            start = m.start()
            h = _SHARED.get((start, c, rule))
            if h is None:
                h = new(Hazard)  # hazard()'s body, inline: this loop runs once per reinterpreted character
                h.__dict__.update(start=start, end=start + 1, text=c, kind=kind, rule=rule)
                if start < SHARED_BELOW:
                    _SHARED[start, c, rule] = h
            found.append(h)
            if len(found) >= 500:
                return found
        else:
            return found
    for rule in _rules_of(names):
        for start, end in rule.spans(command):
            found.append(hazard(start, end, command[start:end], rule.kind, rule.text))
    found.sort(key=lambda h: (h.start, h.end))
    return found[:500]


@lru_cache(maxsize=256)
def _rules_of(layers: tuple[str, ...]) -> tuple[Any, ...]:
    """The rules of a route's unsafe layers (one table walk per route, not per command)."""
    names = set(base_parts("+".join(layers)))
    return tuple(rule for rule in RULES if names & set(rule.routes))


@lru_cache(maxsize=256)
def _one_pass(layers: tuple[str, ...]) -> tuple[re.Pattern[str], dict[str, tuple[str, str]]] | None:
    """When every rule of the route fires on single characters and no character is two rules' (so no two
    spans are equal and R's order is the sorted order): one pattern for all of them and each character's
    (kind, rule text); else None."""
    rules = _rules_of(layers)
    of_char: dict[str, tuple[str, str]] = {}
    for rule in rules:
        if not rule.chars or any(c in of_char for c in rule.chars) or rule.kind in {k for k, _ in of_char.values()}:
            return None
        of_char.update((c, (rule.kind, rule.text)) for c in rule.chars)
    if not of_char:
        return None
    return re.compile("[" + re.escape("".join(of_char)) + "]"), of_char


def lint(command: str, transport: str, *, env: Mapping[str, str] | None = None) -> Lint:
    """What ``transport`` does to ``command`` (see the module docstring). ``env``: the outer shell's whole
    environment, when it is known (QuoteBench's sandbox gives ``Sandbox.env()``); without it every variable
    the outer shell would expand makes ``received`` unknown. LintError for bad input."""
    command = _check(command)
    if not isinstance(transport, str):
        raise LintError(f"the transport must be text, not {type(transport).__name__}")
    if env is not None:
        _check_env(env)
    name, layers = _route(transport)
    own = _outcome(command, layers, env)
    safe = choose(name, [b for b, _ in layers], command, lambda text: _outcome(text, layers, env), own,
                  _proof(name))
    return Lint(command=command, transport=name, damaged=own.is_damaged(command), received=own.received,
                known=own.known, unknown=own.unknown, transport_error=own.transport_error, split=own.split,
                hazards=_hazards(command, layers) if own.is_damaged(command) is not False else [], safe=safe)


def deliver(command: str, transport: str, *, env: Mapping[str, str] | None = None) -> Safe:
    """How to send ``command`` on ``transport`` so that it arrives as exactly ``command`` (:class:`Safe`)."""
    return lint(command, transport, env=env).safe  # type: ignore[return-value]
