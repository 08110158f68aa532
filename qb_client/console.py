"""Shared terminal plumbing: stdout for results (``--json`` puts exactly one JSON
document there), stderr for messages, the one-line bad-input error, and the one
function that makes text from records safe to show on a terminal.

Both consoles have markup and emoji off: user text (commands, task ids, labels,
file names) is printed as it is, never read as ``[bold]`` or ``:smile:``. Styles
are given as :class:`rich.text.Text` styles instead.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console
from rich.text import Text


def _width(stream: Any) -> int | None:
    """A terminal's own width; COLUMNS when set; else room for wide tables (rich would assume 80 columns)."""
    if stream.isatty() or os.environ.get("COLUMNS", "").isdigit():
        return None
    return 160


out = Console(highlight=False, markup=False, emoji=False, width=_width(sys.stdout))
err = Console(stderr=True, highlight=False, markup=False, emoji=False, soft_wrap=True)


class BadInput(ValueError):
    """Bad input from the user: printed as one line, exit status 2."""


def fail(message: str) -> NoReturn:
    raise BadInput(message)


# ---------------------------------------------------------------- safe text

# bidirectional controls reorder what a reader sees ("trojan source"); line and paragraph separators break lines
_INVISIBLE = {0x061C, 0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}


def _escape(ch: str) -> str | None:
    """The visible escape for one character, or None when it is shown as it is."""
    o = ord(ch)
    if ch in "\n\t":
        return None
    if o < 0x20 or 0x7F <= o <= 0x9F:  # C0, DEL, C1: ESC, OSC 52, clear screen, CSI...
        return {"\r": "\\r", "\b": "\\b", "\f": "\\f", "\v": "\\v", "\0": "\\0"}.get(ch, f"\\x{o:02x}")
    if 0xDC80 <= o <= 0xDCFF:  # a byte that was not valid UTF-8, carried as a lone surrogate (surrogateescape)
        return f"\\x{o - 0xDC00:02x}"
    if 0xD800 <= o <= 0xDFFF or o in _INVISIBLE:
        return f"\\u{o:04x}"
    return None


def safe(text: str) -> str:
    """``text`` with every character that acts on a terminal shown as an escape.

    Escaped: C0 controls except newline and tab (``\\x1b``, ``\\r``...), DEL and C1 (``\\x7f``, ``\\x9b``),
    lone surrogates (a byte that was not UTF-8 shows as ``\\xff``), bidirectional controls and line
    separators (``\\u202e``). Everything else, backslashes included, is left alone, so a shell command
    stays readable. Every record text printed to a terminal goes through here.
    """
    if text.isprintable() and "\x7f" not in text:
        return text  # the common case: nothing to escape (isprintable is False for \n and \t too)
    return "".join(_escape(ch) or ch for ch in text)


def safe_text(text: str, style: str = "") -> Text:
    """:func:`safe` as a rich Text; the escapes are shown reversed so they stand out from the text."""
    t = Text(style=style)
    run: list[str] = []
    for ch in text:
        e = _escape(ch)
        if e is None:
            run.append(ch)
            continue
        if run:
            t.append("".join(run))
            run = []
        t.append(e, style="reverse")
    if run:
        t.append("".join(run))
    return t


def one_line(text: str) -> str:
    """A message as one safe line (an error that quotes user text must stay one line)."""
    return safe(" ".join(str(text).splitlines()))


def human(value: Any) -> str:
    """A value as a reader reads it, never as a Python repr: none, yes/no, the text itself, JSON for structures."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return safe(value)
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (list, tuple)) and all(v is None or isinstance(v, (str, int, float)) for v in value):
        return ", ".join(human(v) for v in value) if value else "none"
    return safe(json.dumps(value, ensure_ascii=False, indent=2))


# ---------------------------------------------------------------- output files


def make_dirs(option: str, path: Path) -> None:
    """The directory rule of the whole CLI: an output's directory is made, with every missing parent
    (``--out runs/inspect`` when ``runs/`` does not exist yet); a file in the way is bad input."""
    for p in (path, *path.parents):
        if p.exists() and not p.is_dir():
            fail(f"{option} {safe(str(path))}: {safe(str(p))} exists and is not a directory")
        if p.exists():
            break
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        fail(f"{option} {safe(str(path))}: cannot create the directory: {e.strerror or e}")


def check_output_file(option: str, path: Path) -> None:
    """The output-file rule of the whole CLI: missing directories on the way to an output are made
    (:func:`make_dirs`), and the output itself must not be a directory."""
    if path.is_dir():
        fail(f"{option} {safe(str(path))}: is a directory (give a file name)")
    make_dirs(option, path.parent)


OUTPUT_RULE = "Missing directories are created."


# ---------------------------------------------------------------- printing


def print_json(doc: Any) -> None:
    """One JSON document on stdout, always valid UTF-8: a lone surrogate (from input that was not valid
    UTF-8) cannot be encoded, so then the whole document is written with ``\\uXXXX`` escapes instead."""
    text = json.dumps(doc, ensure_ascii=False, indent=2)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(doc, ensure_ascii=True, indent=2)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def message(text: str, style: str = "") -> None:
    """One message on stderr, its user text made safe."""
    err.print(safe_text(text, style))
