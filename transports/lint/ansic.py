"""Bash's ANSI-C quoting (``$'...'``): the text its escapes make, or :class:`Unknown` where bash's result
depends on the locale or ends the word (a NUL byte, ``\\c``, a ``\\u`` escape outside Unicode's scalars).

Bytes over 0x7f made by ``\\xHH`` or octal escapes are carried as surrogate escapes, joined with the rest
of the word as the kernel's argv is read.
"""

from __future__ import annotations

import re

from .unknown import ParseError, Unknown

_ANSI = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
         "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}
_OCTAL = re.compile(r"[0-7]{0,2}")
_HEX = {"x": re.compile(r"[0-9A-Fa-f]{1,2}"), "u": re.compile(r"[0-9A-Fa-f]{1,4}"), "U": re.compile(r"[0-9A-Fa-f]{1,8}")}


def ansi_c(s: str, i: int) -> tuple[str, int]:
    """The body of the ``$'...'`` whose opening quote ends just before ``i``, and the offset past its close."""
    out: list[str] = []
    while i < len(s):
        c = s[i]
        if c == "'":
            i += 1
            return "".join(out), i
        if c != "\\" or i + 1 >= len(s):
            out.append(c)
            i += 1
            continue
        e = s[i + 1]
        i += 2
        if e in _ANSI:
            out.append(_ANSI[e])
        elif e in "01234567":
            m = _OCTAL.match(s, i)
            digits = e + (m.group(0) if m else "")
            i += len(digits) - 1
            out.append(_byte(int(digits, 8) & 0xFF))
        elif e in "xuU":
            m = _HEX[e].match(s, i)
            if not m:
                out.append("\\" + e)
                continue
            i = m.end()
            n = int(m.group(0), 16)
            if e == "x":
                out.append(_byte(n))
            elif n == 0 or n > 0x10FFFF or 0xD800 <= n <= 0xDFFF:
                raise Unknown("an ANSI-C \\u escape bash renders by locale rules this lint does not model",
                              i)
            else:
                out.append(chr(n))
        elif e == "c":
            raise Unknown("an ANSI-C \\c control escape", i)
        else:
            out.append("\\" + e)
    raise ParseError("a $'...' that never closes (a syntax error: nothing runs)", i)


def _byte(n: int) -> str:
    if n == 0:
        raise Unknown("an ANSI-C escape for a NUL byte (bash ends the word there)", 0)
    return chr(n) if n < 0x80 else chr(0xDC00 + n)
