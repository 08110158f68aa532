"""Correct quoting builders: the reference solutions of a generated suite are made only from these.

A generated task's two references are derived mechanically from its payload, so
their correctness rests on a handful of small, separately tested functions
rather than on hand-written commands:

* :func:`sq` quotes any string as one bash word (single quotes; ``'`` as ``'\\''``);
* :func:`disclose` turns a program R into the text that, pasted between the double
  quotes of ``bash -c "..."``, gives the inner shell exactly R back. Inside double
  quotes only ``\\``, ``$``, a backtick and ``"`` are special (history expansion is
  off in a non-interactive shell), so escaping those four is both necessary and enough;
* :func:`write_text` writes exact bytes (a final newline or not) with ``printf``;
* :func:`heredoc` picks a delimiter that no line of the text equals;
* :func:`sed_literal` / :func:`sed_replacement` escape a literal for a POSIX
  basic regular expression and for the replacement of ``s///`` (portable to GNU
  and busybox sed: only ``\\ . [ * ^ $`` and ``\\ &`` are escaped, and the
  delimiter is one that occurs in neither string).
"""

from __future__ import annotations

import re

SAFE_WORD = re.compile(r"[A-Za-z0-9_./:@%+,-]+")
DQ_ACTIVE = "\\$`\""
SED_DELIMITERS = "/|#,@:;~"
HEREDOC_DELIMITERS = ("EOF", "END", "END_OF_TEXT", "QB_TEXT_END", "QB_END_OF_INPUT_7F3A")


def sq(s: str) -> str:
    """``s`` as one bash word that stays literal: between single quotes, ``'`` written ``'\\''``."""
    return "'" + s.replace("'", "'\\''") + "'"


def word(s: str) -> str:
    """``s`` bare when every character is inert and it cannot be an option or assignment; else :func:`sq`."""
    if SAFE_WORD.fullmatch(s) and not s.startswith("-") and "=" not in s:
        return s
    return sq(s)


def disclose(program: str) -> str:
    """The text that, between the double quotes of ``bash -c "..."``, the outer shell turns back into ``program``."""
    return "".join("\\" + c if c in DQ_ACTIVE else c for c in program)


def write_text(text: str, redirect: str) -> str:
    """A command printing exactly ``text`` into ``redirect`` (e.g. ``> out.txt``, or ``| ./remote ...``)."""
    if text.endswith("\n"):
        return f"printf '%s\\n' {sq(text[:-1])} {redirect}"
    return f"printf '%s' {sq(text)} {redirect}"


def heredoc_delimiter(text: str) -> str:
    lines = set(text.split("\n"))
    for d in HEREDOC_DELIMITERS:
        if d not in lines:
            return d
    raise ValueError("no heredoc delimiter is free")  # the payload makers never produce all of them


def heredoc(command: str, text: str) -> str:
    """``command <<'D'`` with ``text`` (which must end with a newline) as the literal here-document."""
    if not text.endswith("\n"):
        raise ValueError("a here-document always ends with a newline")
    d = heredoc_delimiter(text)
    return f"{command} <<'{d}'\n{text}{d}"


def sed_literal(s: str) -> str:
    """``s`` as a POSIX basic regular expression matching exactly itself."""
    return "".join("\\" + c if c in "\\.[*^$" else c for c in s)


def sed_replacement(s: str) -> str:
    """``s`` as the replacement of ``s///``: a backslash and ``&`` escaped."""
    return "".join("\\" + c if c in "\\&" else c for c in s)


def sed_delimiter(*parts: str) -> str:
    for d in SED_DELIMITERS:
        if not any(d in p for p in parts):
            return d
    raise ValueError("no sed delimiter is free")


def sed_substitute(old: str, new: str) -> str:
    """The ``s`` command replacing every occurrence of the literal ``old`` by the literal ``new``."""
    if "\n" in old or "\n" in new:
        raise ValueError("sed works line by line: no newline in either string")
    d = sed_delimiter(old, new)
    return f"s{d}{sed_literal(old)}{d}{sed_replacement(new)}{d}g"
