"""GitHub Actions ``${{ }}`` substitution in a ``run`` string, as the runner does it before writing the script.

What the runner does (GitHub docs, "Evaluate expressions in workflows and actions"; "Contexts")
    Every ``${{ ... }}`` in the string is evaluated and replaced by its value as text; the rest is
    copied. The closing ``}}`` is searched outside string literals, so ``${{ '}}' }}`` is one
    expression. There is no escape character: a literal ``${{`` is written as the expression
    ``${{ '${{' }}``. An expression that does not close, is empty, or does not parse fails the
    step before anything runs; a named value that is not a context (``${{ foo }}``) too.

The subset evaluated here (everything the reference solutions and the hostile corpus can reach)
    * literals: ``'text'`` (``''`` is a quote), numbers (``1``, ``-2.5``, ``0x1f``, ``1e3``),
      ``true``, ``false``, ``null`` (empty text);
    * ``github.<name>`` (also ``github['name']``) from the fixed fake context :data:`GITHUB`;
      a missing property is null, so empty text;
    * any other context (``env``, ``secrets``, ``matrix``, ``steps``, ...): empty text, as on a runner
      where none of them is set;
    * anything else that tokenises as an expression (operators, function calls): empty text.
      This is the approximation: a real runner would compute a value.
    Context names are case-insensitive, as on the runner.
"""

from __future__ import annotations

import re

GITHUB: dict[str, str] = {
    "repository": "quotebench/fixture", "repository_owner": "quotebench", "ref": "refs/heads/main",
    "ref_name": "main", "sha": "0" * 40, "event_name": "push", "workflow": "qb", "job": "qb",
    "run_id": "1", "run_number": "1", "run_attempt": "1", "actor": "quotebench",
    "server_url": "https://github.com", "workspace": "/sandbox/work", "action": "__run",
}
"""The fixed fake ``github`` context."""

CONTEXTS = frozenset({"github", "env", "vars", "job", "jobs", "steps", "runner", "secrets", "strategy", "matrix",
                      "needs", "inputs"})

_TOKEN = re.compile(r"""
    \s*(?:
      (?P<str>'(?:[^']|'')*')
    | (?P<num>[-+]?(?:0x[0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?))
    | (?P<name>[A-Za-z_][A-Za-z0-9_-]*)
    | (?P<op>==|!=|<=|>=|&&|\|\||[<>!.\[\](),*])
    )""", re.VERBOSE)


class ExpressionError(ValueError):
    """A malformed expression: the step fails and nothing runs."""


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ExpressionError(f"unexpected character {text[pos:].lstrip()[:1]!r} in expression {text.strip()!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _literal(kind: str, value: str) -> str | None:
    if kind == "str":
        return value[1:-1].replace("''", "'")
    if kind == "num":
        n = float(int(value, 16)) if "x" in value.lower() else float(value)
        return str(int(n)) if n.is_integer() and abs(n) < 1e15 else repr(n)
    if kind == "name" and value.lower() in ("true", "false"):
        return value.lower()
    if kind == "name" and value.lower() == "null":
        return ""
    return None


def evaluate(text: str) -> str:
    """The value of one expression (the text between ``${{`` and ``}}``) as the text put in the script."""
    toks = _tokens(text)
    if not toks:
        raise ExpressionError("an expression was expected (empty ${{ }})")
    depth = 0
    for kind, value in toks:
        depth += value in "([" if kind == "op" else 0
        depth -= value in ")]" if kind == "op" else 0
        if depth < 0:
            break
    if depth != 0:
        raise ExpressionError(f"unbalanced brackets in expression {text.strip()!r}")
    for i, (kind, value) in enumerate(toks):  # a bare name that is no context, no function, no keyword
        if kind == "name" and value.lower() not in CONTEXTS and _literal(kind, value) is None:
            after = toks[i + 1][1] if i + 1 < len(toks) else ""
            before = toks[i - 1][1] if i > 0 else ""
            if after != "(" and before != ".":
                raise ExpressionError(f"unrecognized named-value: {value!r}")
    if len(toks) == 1 and (lit := _literal(*toks[0])) is not None:
        return lit
    head = toks[0]
    if head[0] == "name" and head[1].lower() == "github":
        path = _property_path(toks[1:])
        if path is not None:
            return GITHUB.get(path[0].lower(), "") if len(path) == 1 else ""
    return ""


def _property_path(toks: list[tuple[str, str]]) -> list[str] | None:
    """``.a.b`` or ``['a']`` after a context name -> ["a", "b"]; None if it is not a plain path."""
    path: list[str] = []
    i = 0
    while i < len(toks):
        if toks[i] == ("op", ".") and i + 1 < len(toks) and toks[i + 1][0] == "name":
            path.append(toks[i + 1][1])
            i += 2
        elif (toks[i] == ("op", "[") and i + 2 < len(toks) and toks[i + 1][0] == "str"
              and toks[i + 2] == ("op", "]")):
            path.append(toks[i + 1][1][1:-1].replace("''", "'"))
            i += 3
        else:
            return None
    return path or None


def _close(text: str, start: int) -> int:
    """Index of the ``}}`` closing the expression whose text starts at ``start``, outside string literals."""
    i, in_string = start, False
    while i < len(text):
        c = text[i]
        if c == "'":
            in_string = not in_string  # '' inside a literal toggles twice: still inside
        elif not in_string and text.startswith("}}", i):
            return i
        i += 1
    return -1


def substitute(run: str) -> str:
    """``run`` with every ``${{ }}`` replaced by its value; ExpressionError (one line) when malformed."""
    out: list[str] = []
    pos = 0
    while (at := run.find("${{", pos)) >= 0:
        end = _close(run, at + 3)
        if end < 0:
            raise ExpressionError(f"the expression at offset {at} is not closed with }}}}")
        out.append(run[pos:at])
        out.append(evaluate(run[at + 3:end]))
        pos = end + 2
    out.append(run[pos:])
    return "".join(out)


def neutralise(text: str) -> str:
    """``text`` written so that :func:`substitute` gives it back: each ``${{`` as ``${{ '${{' }}``."""
    return text.replace("${{", "${{ '${{' }}")
