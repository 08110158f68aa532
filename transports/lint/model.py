"""What a lint says about one command on one route: the prediction, the hazards, the safe text.

The words are the record's (docs/spec.md, Words): ``received`` is the exact program text the final shell
would get, ``damaged`` is ``received != R`` (a transport error and a split paste count as damaged). A
prediction is either exact or says it is not: ``known`` False means ``received`` could not be fixed without
running something (``unknown`` says what), and ``damaged`` is then True only where every outcome the route
can have changes R, else None.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Hazard:
    """A span of R (``start``..``end``, code points) that the route reinterprets: the character class
    (``kind``) and the route's rule in words, the same text ``quotebench exec`` prints."""

    start: int
    end: int
    text: str
    kind: str
    rule: str


def hazard(start: int, end: int, text: str, kind: str, rule: str, _new: Any = object.__new__) -> Hazard:
    """A :class:`Hazard`, equal to ``Hazard(start, end, text, kind, rule)``, built without the frozen
    dataclass's one ``object.__setattr__`` call per field (the lint makes one per reinterpreted character)."""
    h = _new(Hazard)
    h.__dict__.update(start=start, end=end, text=text, kind=kind, rule=rule)
    return h  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Safe:
    """How to send R on this route so that it arrives as exactly R.

    ``how``: ``as-is`` (R itself is safe), ``escaped`` (``text`` is R encoded for the route's parser), or
    ``script`` (no text can survive the route: write R to a file and run it, as the named ``transport``,
    the route's ``-safe`` twin, does); ``text`` is None for ``script``."""

    how: str
    text: str | None
    transport: str
    note: str = ""


@dataclass
class Lint:
    """The prediction for one command on one route (see the module docstring)."""

    command: str
    transport: str
    damaged: bool | None
    received: str | None
    known: bool
    unknown: str | None = None
    transport_error: str | None = None
    split: bool = False
    hazards: list[Hazard] = field(default_factory=list)
    safe: Safe | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` object (docs/lint.md): every field, hazards and safe as objects."""
        out = asdict(self)
        out["safe"] = asdict(self.safe) if self.safe is not None else None
        return out


@dataclass
class Outcome:
    """A route's predicted delivery before hazards and the safe text are added."""

    received: str | None
    known: bool = True
    unknown: str | None = None
    transport_error: str | None = None
    split: bool = False
    damaged: bool | None = None  # set only when not derivable from received (an unknown that surely damages)

    def is_damaged(self, command: str) -> bool | None:
        if self.transport_error is not None or self.split:
            return True
        if self.known:
            return self.received != command
        return self.damaged


def exact(received: str | None, *, split: bool = False) -> Outcome:
    return Outcome(received=received, split=split)


def unknown(why: str, *, damaged: bool | None = None, split: bool = False) -> Outcome:
    return Outcome(received=None, known=False, unknown=why, damaged=damaged, split=split)


def refused(error: str) -> Outcome:
    return Outcome(received=None, transport_error=error)
