"""A minimal, deterministic TOML writer for generated tier tables.

Only what payloads hold: strings, integers, booleans, lists and tables (no
floats, no dates; JSON's null has no TOML form, so payload makers never use
it). Strings are written as basic strings with JSON's escapes, which TOML
shares; the one control character JSON leaves raw, DEL, is refused. Output
depends only on the value (dict order is kept), so the same payload always gives
the same bytes.
"""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def string(s: str) -> str:
    if "\x7f" in s:
        raise ValueError("DEL cannot be written in a TOML basic string")
    return json.dumps(s, ensure_ascii=False)


def key(k: str) -> str:
    return k if BARE_KEY.fullmatch(k) else string(k)


def value(v: Any) -> str:
    """``v`` as one inline TOML value (tables inline, on one line)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return string(v)
    if isinstance(v, list):
        return "[" + ", ".join(value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{key(k)} = {value(x)}" for k, x in v.items()) + " }" if v else "{}"
    raise TypeError(f"no TOML form for {type(v).__name__}")


def literal(s: str) -> str | None:
    """``s`` as a multi-line literal string (read as typed: no escapes), or None where that form cannot hold
    it exactly (``'''``, control characters, a leading newline, which TOML would trim). Checked by parsing back."""
    if "\'\'\'" in s or s.startswith("\n") or re.search(r"[\x00-\x08\x0b-\x1f\x7f]", s):
        return None
    text = "'''" + s + "'''"
    try:
        ok = tomllib.loads(f"v = {text}\n")["v"] == s
    except tomllib.TOMLDecodeError:
        ok = False
    return text if ok else None


def field(k: str, v: Any) -> str:
    """One ``key = value`` line; a string holding a newline, a backslash or a quote is written as typed."""
    if isinstance(v, str) and re.search(r"[\n\\\"]", v):
        text = literal(v)
        if text is not None:
            return f"{key(k)} = {text}"
    return f"{key(k)} = {value(v)}"


def table(header: str, fields: dict[str, Any]) -> str:
    """``[header]`` then one ``key = value`` line per field."""
    lines = [f"[{header}]"] + [field(k, v) for k, v in fields.items()]
    return "\n".join(lines) + "\n"
