"""One quoted shell word out of a harness's wrapper text, and its value as bash itself removes the quotes.

Why bash and not Python
    ``received`` must be what the final shell made of the harness's text, not what a re-implementation of
    bash's quoting thinks it made. So the word is located here (a scan that only accepts pieces whose quote
    removal expands nothing), and its value is what a real ``bash --norc --noprofile`` prints for
    ``printf %s WORD``. The wrapper is data the harness built from a hostile R, so the scan refuses
    anything that could expand: an unquoted character outside ``[A-Za-z0-9_./,:@%+=-]``, or a
    double-quoted piece holding ``$``, a backtick or a backslash. What passes is single-quoted pieces
    (which expand nothing), such double-quoted pieces, backslash escapes and plain characters, for which
    quote removal is the whole expansion (no word splitting, globbing, tilde or brace expansion applies).

Where bash runs
    As a plain host subprocess with an empty environment but ``PATH`` and ``LC_ALL=C`` (bytes stay bytes),
    no startup files, the program on stdin (no argument-length limit), a 10 s timeout. ``printf`` is a
    builtin: nothing else is executed.
"""

from __future__ import annotations

import subprocess

from tasks import forking

from .. import needs

_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./,:@%+=-")
_ENDS = frozenset(" \t\n;&|<>()")


class DequoteError(ValueError):
    """The word cannot be located or dequoted without expansion (one line)."""


def word_after(text: str, marker: str) -> str:
    """The shell word that starts right after the first ``marker`` in ``text`` (quotes kept): the harness's
    own text comes first, so a marker inside R, later, is never the one found."""
    at = text.find(marker)
    if at < 0:
        raise DequoteError(f"no {marker.strip()!r} in the wrapper")
    start = j = at + len(marker)
    while j < len(text) and text[j] not in _ENDS:
        c = text[j]
        if c == "'":
            end = text.find("'", j + 1)
            if end < 0:
                raise DequoteError("an unclosed single quote in the wrapper")
            j = end + 1
        elif c == '"':
            end = text.find('"', j + 1)
            if end < 0 or any(ch in text[j + 1:end] for ch in "$`\\"):
                raise DequoteError("a double-quoted piece that could expand in the wrapper")
            j = end + 1
        elif c == "\\":
            if j + 1 >= len(text):
                raise DequoteError("a trailing backslash in the wrapper")
            j += 2
        elif c in _PLAIN:
            j += 1
        else:
            raise DequoteError(f"an unquoted {c!r} in the wrapper's word")
    if j == start:
        raise DequoteError(f"no word after {marker.strip()!r} in the wrapper")
    return text[start:j]


def dequote(word: str) -> str:
    """The value of ``word`` (as :func:`word_after` returns it) after bash's quote removal."""
    bash = needs.find_program("bash")
    if bash is None:
        raise DequoteError("bash is not installed, so the wrapper cannot be dequoted")
    try:
        done = forking.run([bash, "--norc", "--noprofile", "-s"], input=b"printf %s " + word.encode("utf-8", "surrogateescape"),
                           timeout=10, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired) as e:
        raise DequoteError(f"bash could not dequote the word: {e}") from None
    if done.returncode != 0:
        why = (done.stderr.decode("utf-8", "replace").strip().splitlines() or [""])[-1][:200]
        raise DequoteError(f"bash could not dequote the word (exit {done.returncode}: {why})")
    return done.stdout.decode("utf-8", "surrogateescape")
