"""What stops a static parse: a construct whose result only a run can decide, or a syntax error."""

from __future__ import annotations


class Unknown(Exception):
    """The scan cannot go on without a guess; ``why`` names the construct, ``at`` its offset in the text."""

    def __init__(self, why: str, at: int) -> None:
        super().__init__(why)
        self.why = why
        self.at = at


class ParseError(Unknown):
    """A syntax error bash reports on the line being read: nothing of that line runs."""
