"""Reading what the probes left: their files, the courier's tool results, and values that change between runs.

Everything here is plain parsing of text the probe (or the harness) wrote; none of it decides ``received``,
which is the route's, from the kernel's exec trace.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

TOKEN = re.compile(r"([A-Za-z0-9]+)")
UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
SECRET = re.compile(r"(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|AUTH|COOKIE)(_|$)|(^|_)KEY$", re.IGNORECASE)
"""Names whose values are never shown: anything that looks like a key or a token (``..._KEY`` at the end: git's
``GIT_CONFIG_KEY_0`` names a setting, not a secret)."""
HIDDEN = "(set; value not shown)"


def text(files: dict[str, bytes], name: str) -> str | None:
    data = files.get(name)
    return None if data is None else data.decode("utf-8", "replace")


def mask(values: list[str]) -> tuple[str | None, bool]:
    """One value for several runs' values of the same thing: the tokens (runs of letters and digits) that differ
    between runs become ``*``, and so does every group of a UUID (a time-ordered UUID, version 7, keeps its first
    group through runs made at once, but not from one audit to the next). Returns (value, consistent): not
    consistent when the runs' values do not even have the same shape (then the first is returned)."""
    if not values:
        return None, True
    values = [UUID.sub("*-*-*-*-*", v) for v in values]
    split = [TOKEN.split(v) for v in values]
    first = split[0]
    if any(len(s) != len(first) or s[0::2] != first[0::2] for s in split[1:]):
        return values[0], False
    out = [piece if i % 2 == 0 or all(s[i] == piece for s in split) else "*" for i, piece in enumerate(first)]
    return "".join(out), True


def env_of(files: dict[str, bytes]) -> dict[str, str] | None:
    """The probe's ``env -0`` dump."""
    data = files.get("env")
    if data is None:
        return None
    env: dict[str, str] = {}
    for item in data.split(b"\0"):
        if b"=" in item:
            k, _, v = item.decode("utf-8", "replace").partition("=")
            env[k] = v
    return env


def shown(name: str, value: str | None) -> str:
    if value is None:
        return "(unset)"
    return HIDDEN if SECRET.search(name) else escaped(value) if value else "(empty)"


def escaped(value: str, cap: int = 300) -> str:
    """A value on one line: JSON string escapes, without the quotes; cut at ``cap`` characters."""
    s = json.dumps(value, ensure_ascii=False)[1:-1]
    return s if len(s) <= cap else s[:cap] + "..."


def change(sent: str, got: str, limit: int = 3) -> str:
    """How ``got`` differs from ``sent``, character by character: at most ``limit`` edits, each placed at the start,
    the end or a character offset of ``sent``."""
    from difflib import SequenceMatcher

    edits = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, sent, got, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        where = "at the start" if i1 == 0 else "at the end" if i2 == len(sent) else f"at character {i1}"
        old, new = escaped(sent[i1:i2], 40), escaped(got[j1:j2], 40)
        edits.append(f"'{old}' removed {where}" if not new else f"'{new}' added {where}" if not old
                     else f"'{old}' became '{new}' {where}")
    more = f"; and {len(edits) - limit} more" if len(edits) > limit else ""
    return "; ".join(edits[:limit]) + more


def on_options(listing: str | None) -> list[str]:
    """The names a ``set -o`` or ``shopt -s`` listing says are on (bash's and dash's formats)."""
    found = []
    for line in (listing or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1] == "on":
            found.append(parts[0])
    return found


def type_kinds(name: str, listing: str | None) -> str:
    """What ``type -a NAME`` (bash) or ``type NAME`` (dash) says NAME is, in lookup order, one line."""
    if listing is None:
        return "(not probed)"
    kinds = []
    for line in listing.splitlines():
        if not line.startswith(f"{name} is "):
            continue
        what = line[len(name) + 4:]
        if what.startswith(("aliased to ", "an alias for ")):
            body = what.split(" to ", 1)[1] if what.startswith("aliased") else what[len("an alias for "):]
            kinds.append(f"alias ({body.strip('`').rstrip(chr(39))})")
        elif what in ("a function", "a shell function"):
            kinds.append("function")
        elif what.startswith(("a shell builtin", "a special shell builtin")):
            kinds.append("builtin")
        elif what == "a shell keyword":
            kinds.append("keyword")
        else:
            kinds.append(what)
    return " > ".join(kinds) if kinds else "not found"


def names_of_functions(listing: str | None) -> list[str]:
    return sorted(line.split()[-1] for line in (listing or "").splitlines() if line.startswith("declare -f"))


def names_of_aliases(listing: str | None) -> list[str]:
    found = []
    for line in (listing or "").splitlines():
        line = line.removeprefix("alias ")
        if "=" in line:
            found.append(line.split("=", 1)[0])
    return sorted(found)


def descriptor(target: str) -> str:
    """Where a descriptor leads, with the kernel's object numbers left out (``pipe:[123]`` is a pipe)."""
    m = re.fullmatch(r"(pipe|socket|anon_inode):\[?(\S*?)\]?", target)
    return f"a {m.group(1)}" if m else target


@dataclass
class ToolResult:
    """The first tool result a harness reported to the courier: its text as logged (cut at 4 KiB), its length and
    its last 256 characters (None from a courier that did not log them)."""

    text: str
    chars: int | None
    whole: bool
    tail: str | None = None


def tool_result(log: str | None) -> ToolResult | None:
    """The first ``tool_result`` line of the courier's log (``tool_result chars=N tail=JSON JSON``; older couriers
    wrote neither field). The text is the content's string, or its text blocks joined."""
    for line in (log or "").splitlines():
        if not line.startswith("tool_result "):
            continue
        rest = line[len("tool_result "):]
        chars, tail = None, None
        if (m := re.match(r"chars=(\d+) ", rest)) is not None:
            chars, rest = int(m.group(1)), rest[m.end():]
        if rest.startswith("tail="):
            try:
                tail, end = json.JSONDecoder().raw_decode(rest, len("tail="))
                rest = rest[end:].lstrip(" ")
            except ValueError:
                tail = None
        try:
            content = json.loads(rest)
        except ValueError:
            return ToolResult(_prefix(rest), chars, False, tail)  # the line was cut at 4 KiB
        if isinstance(content, list):
            content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
        value = content if isinstance(content, str) else json.dumps(content)
        return ToolResult(value, chars if chars is not None else len(value), True, value[-256:])
    return None


def _prefix(cut: str) -> str:
    """The text of a JSON string cut short (the log cuts a line at 4 KiB): decoded up to the last whole escape;
    the JSON as it stands when it is not a string."""
    if cut.startswith('"'):
        for end in range(len(cut), max(len(cut) - 8, 0), -1):
            try:
                value = json.loads(cut[:end] + '"')
            except ValueError:
                continue
            if isinstance(value, str):
                return value
    return cut
