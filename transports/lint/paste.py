"""The paste routes' safe text, proved by how it is built instead of by a second parse.

On ``nested``, ``docker-sh``, ``ssh`` and ``nested-single`` the outer program is a fixed prefix, then R
inside one quoted word that ends the text. The safe text is R with each ``\\ " $ ` `` backslashed (inside
``"..."`` bash removes a backslash only before those and a newline, and ``bash -c`` has no history
expansion) or each ``'`` closed, escaped and reopened (inside ``'...'`` nothing is special). Either way that
word's parse is R itself, so when the prefix's own words are the shell and ``-c`` (or ``ssh`` and the host,
whose request is the words after it joined by spaces, a ``--`` word first for an R that starts with ``-``),
the final shell receives exactly R. :func:`proof` checks the prefix once per route; what is left per command
is what the construction does not cover: a NUL or an unpaired surrogate, an empty R, an R that the final
shell would read as its own option, and the kernel's limit on one argument. Everything else (middleware
layers, shlex, make, a remote sshd) keeps the lint's checked re-parse. The execution oracle
(tests/test_lint_oracle.py) holds every offered safe text to the traced ``received``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..base import check_command
from .bashparse import ParseError, Scanner, Unknown
from .outer import SSH_HOST, too_long

QUOTE = {"nested": '"', "docker-sh": '"', "ssh": '"', "nested-single": "'"}
"""Paste route base name -> the quote its outer program puts around R."""


def outer_program(base: str, t: Any) -> Callable[[str], str] | None:
    """The route's own builder of the outer program for a text, or None when the route has none here."""
    if base in ("nested", "nested-single", "escaped"):
        return lambda text: t.wrap(t.shell.text, text)
    if base == "docker-sh":
        return lambda text: t.command_line(text).removeprefix("docker exec CTR ")
    if base == "ssh" and getattr(t, "remote", None) is None:
        return t.outer_text  # type: ignore[no-any-return]
    return None


def proof(base: str, t: Any) -> Callable[[str, str], bool] | None:
    """A per-command test ``arrives(R, text)`` that ``text``, the route's encoding of R (:data:`.safe.ENCODERS`),
    arrives as exactly R; None when the route's outer program is not a prefix of the shape the module
    docstring proves."""
    quote, make = QUOTE.get(base), outer_program(base, t)
    if quote is None or make is None:
        return None
    empty = make("")
    if not empty.endswith(" " + quote + quote) or make("x") != empty[:-1] + "x" + quote:
        return None
    try:
        commands = Scanner(empty[:-2]).commands()
    except (ParseError, Unknown):
        return None
    if len(commands) != 1 or commands[0].redirections or commands[0].assignments or commands[0].end != "":
        return None
    words = commands[0].words
    if base == "ssh":
        if words != ["ssh", SSH_HOST]:
            return None
    elif len(words) != 2 or words[1] != "-c" or words[0][:1] in ("", "-", "+"):
        return None
    head, tail = empty[:-1], quote  # make(text) is head + text + tail, as checked above
    ssh = base == "ssh"

    def arrives(command: str, text: str) -> bool:
        if not command or (not ssh and command[0] in "-+") or check_command(command) is not None:
            return False
        return too_long(head + text + tail) is None

    return arrives
