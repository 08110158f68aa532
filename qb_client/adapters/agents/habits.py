"""A BASELINE, not a model: the reply of an agent with typical human quoting habits.

:func:`habitual_reply` answers every QuoteBench task from its payload
(``task.family`` and ``task.payload``; never from the reference solutions) with
the command a hurried person would type at a terminal. It exists so that
reports have a fixed, explainable reference point next to real models: it is
deterministic (no randomness, no clock, no environment), it never asks a shell
anything, and it is deliberately *not* tuned to any score. It is expected to
pass many controls on the raw path and to fail many hazardous tiers and much of
the nested path, because the habits below are exactly the ones QuoteBench's
hazards are built against.

The habits
----------

One quoting rule everywhere: every literal goes between double quotes, and the
only character escaped inside them is ``"`` (written ``\\"``). ``$``, backticks
and backslashes are left as typed, so they stay active. Where a second parser is
involved (``./remote``, ``./cexec``) or a second language (JSON, a jq filter),
the inner text is composed first and then double-quoted by the same rule.

=================  ==========================================================
family             habit
=================  ==========================================================
file-write         ``echo "line" > f``; more lines ``echo "l2" >> f``; the last
                   line gets ``echo -n`` when the text has no final newline
file-append        ``echo "line" >> f``
hostile-filenames  ``mv draft.txt "NEW NAME"``
find-glob          ``find . -name "PAT" | sort > found.txt``
grep-count         ``grep -c "STR" file > count.txt`` (regex grep; counts lines)
sed-replace        ``sed -i "s/OLD/NEW/g" file`` (``|`` as delimiter when either
                   string holds a ``/``); no regex or ``&`` escaping
heredoc            ``cat > f << EOF`` ... ``EOF`` (unquoted delimiter)
argv-pass          ``./show-args --flag "a value" 12 ...`` (flags and plain words bare)
env-pass           ``NAME="value" ./show-env``
json-write         ``echo "{\\"k\\": \\"v\\", ...}" > f`` (JSON text, then double-quoted)
json-edit          ``jq ".path = \\"value\\"" config.json > tmp.json && mv tmp.json config.json``
git-commit         ``git commit -m "subject" -m "paragraph" ...`` (one -m per paragraph)
remote-exec        ``./remote "<file-write habit for the remote file>"``
container-exec     ``./cexec "<file-write habit with $APP_ENV: prefix>"``
                   (``$APP_ENV`` is expanded by the local shell: the habit's
                   expansion-timing bug)
=================  ==========================================================

Contracts
---------

``raw``
    the command above, in a fenced ``bash`` block after one line of prose.
``native``
    the same command, as the bare string (the tool call's ``command`` field).
``disclosed`` (told the reply is pasted unescaped into ``bash -c "R"``)
    partial compensation: the same command with its double quotes
    backslash-escaped (``"`` -> ``\\"``; a quote the command already escaped,
    ``\\"``, becomes ``\\\\\\"``). ``$``, backticks and other backslashes are
    left alone, which is the usual miss. For a command whose only
    double-quote-active characters are quotes this rewrite is exact, so on the
    nested path it recovers what the raw path passes and nothing more.
``disclosed-single`` (told ``bash -c 'R'``)
    the same command with every ``'`` written ``'\\''``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tasks.schema import Task

CONTRACTS: tuple[str, ...] = ("raw", "native", "disclosed", "disclosed-single")

PROSE = {
    "raw": "Here is the command:",
    "disclosed": "Here is the command for bash -c \"R\":",
    "disclosed-single": "Here is the command for bash -c 'R':",
}
"""The line before the fenced command in a reply, per text contract (also the habits provider's first turn)."""


# ---------------------------------------------------------------- the quoting habits


def dq(text: str) -> str:
    """Double quotes around a literal, escaping only the double quotes inside it."""
    return '"' + text.replace('"', '\\"') + '"'


def echo_to_file(text: str, path: str) -> str:
    """Write ``text`` to ``path`` with echo: one echo per line, ``>`` then ``>>``, ``-n`` if no final newline."""
    final_newline = text.endswith("\n")
    lines = (text[:-1] if final_newline else text).split("\n")
    parts = []
    for i, line in enumerate(lines):
        last = i == len(lines) - 1
        echo = "echo" if final_newline or not last else "echo -n"
        redirect = ">" if i == 0 else ">>"
        parts.append(f"{echo} {dq(line)} {redirect} {path}")
    return "; ".join(parts)


def escape_for_double(command: str) -> str:
    """The disclosed habit: backslash-escape the double quotes (``\\"`` already there becomes ``\\\\\\"``)."""
    return re.sub(r'\\?"', lambda m: '\\\\\\"' if m.group(0).startswith("\\") else '\\"', command)


def escape_for_single(command: str) -> str:
    """The disclosed-single habit: every ``'`` becomes ``'\\''``."""
    return command.replace("'", "'\\''")


def fence(command: str) -> str:
    """A ```bash block; longer than any backtick run in the command so it reads back unchanged."""
    longest = max((len(run) for run in re.findall(r"`+", command)), default=0)
    bar = "`" * max(3, longest + 1)
    return f"{bar}bash\n{command}\n{bar}\n"


# ---------------------------------------------------------------- one habit per family


def _s(payload: dict[str, Any], key: str, default: str = "") -> str:
    value = payload.get(key, default)
    return value if isinstance(value, str) else str(value)


def _file_write(p: dict[str, Any]) -> str:
    return echo_to_file(_s(p, "content"), _s(p, "path", "out.txt"))


def _file_append(p: dict[str, Any]) -> str:
    text, path = _s(p, "line"), _s(p, "path", "out.txt")
    final_newline = text.endswith("\n")
    lines = (text[:-1] if final_newline else text).split("\n")
    parts = []
    for i, line in enumerate(lines):
        echo = "echo" if final_newline or i < len(lines) - 1 else "echo -n"
        parts.append(f"{echo} {dq(line)} >> {path}")
    return "; ".join(parts)


def _hostile_filenames(p: dict[str, Any]) -> str:
    return f"mv draft.txt {dq(_s(p, 'name'))}"


def _find_glob(p: dict[str, Any]) -> str:
    return f"find . -name {dq(_s(p, 'pattern'))} | sort > found.txt"


def _grep_count(p: dict[str, Any]) -> str:
    return f"grep -c {dq(_s(p, 'needle'))} {_s(p, 'path')} > count.txt"


def _sed_replace(p: dict[str, Any]) -> str:
    old, new = _s(p, "old"), _s(p, "new")
    d = "|" if "/" in old or "/" in new else "/"
    return f"sed -i {dq(f's{d}{old}{d}{new}{d}g')} {_s(p, 'path')}"


def _heredoc(p: dict[str, Any]) -> str:
    content = _s(p, "content")
    if not content.endswith("\n"):
        content += "\n"
    return f"cat > {_s(p, 'path')} << EOF\n{content}EOF"


_BARE_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.,:=+-]*|--?[A-Za-z0-9][A-Za-z0-9_-]*|--")


def word(text: str) -> str:
    """A flag or plain word as typed (``--pages``, ``12``); anything else double-quoted."""
    return text if _BARE_WORD.fullmatch(text) else dq(text)


def _argv_pass(p: dict[str, Any]) -> str:
    args = p.get("args") or []
    return " ".join(["./show-args", *(word(a if isinstance(a, str) else str(a)) for a in args)])


def _env_pass(p: dict[str, Any]) -> str:
    return f"{_s(p, 'name', 'VALUE')}={dq(_s(p, 'value'))} ./show-env"


def _json_write(p: dict[str, Any]) -> str:
    doc = json.dumps(p.get("doc", {}), ensure_ascii=False)
    return f"echo {dq(doc)} > {_s(p, 'path', 'out.json')}"


def _json_edit(p: dict[str, Any]) -> str:
    value = p.get("value", "")
    jq_filter = f"{_s(p, 'field', '.')} = {json.dumps(value, ensure_ascii=False)}"
    return f"jq {dq(jq_filter)} config.json > tmp.json && mv tmp.json config.json"


def _git_commit(p: dict[str, Any]) -> str:
    paragraphs = [q for q in _s(p, "message").rstrip("\n").split("\n\n") if q] or [""]
    return "git commit " + " ".join(f"-m {dq(q)}" for q in paragraphs)


def _remote_exec(p: dict[str, Any]) -> str:
    return f"./remote {dq(echo_to_file(_s(p, 'content'), _s(p, 'path', 'out.txt')))}"


def _container_exec(p: dict[str, Any]) -> str:
    inner = echo_to_file("$APP_ENV: " + _s(p, "text"), _s(p, "path", "out.txt"))
    return f"./cexec {dq(inner)}"


_HABITS = {
    "file-write": _file_write,
    "file-append": _file_append,
    "hostile-filenames": _hostile_filenames,
    "find-glob": _find_glob,
    "grep-count": _grep_count,
    "sed-replace": _sed_replace,
    "heredoc": _heredoc,
    "argv-pass": _argv_pass,
    "env-pass": _env_pass,
    "json-write": _json_write,
    "json-edit": _json_edit,
    "git-commit": _git_commit,
    "remote-exec": _remote_exec,
    "container-exec": _container_exec,
}


def habitual_command(task: Task) -> str:
    """The command the habitual agent writes for a task, before any contract-specific change."""
    habit = _HABITS.get(task.family)
    if habit is None:  # an unknown family: the hurried human at least says so, and the validator fails it
        return f"echo {dq('no habit for ' + task.family)}"
    return habit(task.payload)


def habitual_command_for(task: Task, contract: str) -> str:
    """The command R under a contract (what extraction returns from :func:`habitual_reply`)."""
    if contract not in CONTRACTS:
        raise ValueError(f"unknown contract '{contract}' (known: {', '.join(CONTRACTS)})")
    command = habitual_command(task)
    if contract == "disclosed":
        return escape_for_double(command)
    if contract == "disclosed-single":
        return escape_for_single(command)
    return command


def habitual_reply(task: Task, contract: str) -> str:
    """The habitual agent's reply: a fenced command for text contracts, the bare command for ``native``."""
    command = habitual_command_for(task, contract)
    if contract == "native":
        return command
    return f"{PROSE[contract]}\n\n{fence(command)}"
