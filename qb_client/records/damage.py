"""What a transport did to a command, shown so that a reader sees every change.

Damage is often invisible: a lost trailing newline, a tab turned into a space, a blank
at the end of a line, a carriage return. :func:`visible` marks those characters
(``↵`` newline, ``→`` tab, ``␍`` CR, ``·`` a blank where it matters) and escapes what
acts on a terminal (:func:`qb_client.console.safe`); :func:`char_diff` is a character
diff of R against ``received`` in git's word-diff notation (``[-gone-]{+added+}``), so
it reads the same with colours off (piped, in a test, in an issue) as on a terminal.
"""

from __future__ import annotations

import difflib

from rich.text import Text

from ..console import safe

NEWLINE, TAB, CR, BLANK = "↵", "→", "␍", "·"
MAX_DIFF = 20_000
"""Characters of R and of received above which no diff is computed (difflib is quadratic)."""


def _mark(ch: str, blank: bool) -> str:
    if ch == "\t":
        return TAB
    if ch == "\r":
        return CR
    if ch == " " and blank:
        return BLANK
    return safe(ch)


def visible(text: str, *, blanks: bool = False, ends_line: bool = True) -> str:
    """``text`` with its invisible characters marked: every newline shows as ``↵`` (and still breaks the
    line, except the last, so a lost trailing newline is a missing mark, never a blank line), tabs as
    ``→``, CR as ``␍``, blanks at the end of a line as ``·`` (every blank with ``blanks``).
    ``ends_line=False``: ``text`` is a piece of a line that goes on, so its last blanks are not trailing."""
    lines = text.split("\n")
    shown: list[str] = []
    for k, line in enumerate(lines):
        last = k == len(lines) - 1
        body = line if last and not ends_line else line.rstrip(" ")
        trail = BLANK * (len(line) - len(body))
        part = "".join(_mark(c, blanks) for c in body) + trail
        if k < len(lines) - 1:
            part += NEWLINE
        shown.append(part)
    if len(shown) > 1 and shown[-1] == "":  # R ends in a newline: the mark ends the last line
        shown.pop()
    return "\n".join(shown)


def char_diff(command: str, received: str) -> Text:
    """R against what the final shell received: equal text as it is, ``[-removed-]`` in red,
    ``{+added+}`` in green; inside a change every blank, tab, CR and newline is a visible mark."""
    if len(command) > MAX_DIFF or len(received) > MAX_DIFF:
        return Text(f"(not shown: longer than {MAX_DIFF} characters)", style="dim")
    out = Text()
    matcher = difflib.SequenceMatcher(None, command, received, autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            ends = a1 == len(command) or command[a1] == "\n"
            out.append(visible(command[a0:a1], ends_line=ends))
            continue
        if a1 > a0:
            out.append("[-" + _inline(command[a0:a1]) + "-]", style="bold red")
        if b1 > b0:
            out.append("{+" + _inline(received[b0:b1]) + "+}", style="bold green")
    return out


def _inline(text: str) -> str:
    """A changed segment on one line: every character visible, a newline as ``↵`` without a break."""
    return "".join(NEWLINE if c == "\n" else _mark(c, True) for c in text)


def cell(text: str, width: int = 48) -> str:
    """``text`` on one line for a table cell: newlines, tabs and CR marked, blanks kept except at the end
    (marked there), cut to ``width`` with ``…``."""
    shown = NEWLINE.join(_line(line) for line in text.split("\n"))
    return shown if len(shown) <= width else shown[: width - 1] + "…"


def _line(line: str) -> str:
    body = line.rstrip(" ")
    return "".join(_mark(c, False) for c in body) + BLANK * (len(line) - len(body))
