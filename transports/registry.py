"""Transports by name, and how names compose.

This module is the one place where the stack order is visible: a composed
name lists transports outermost first, joined by ``+``; every part but the
last must be middleware (it decodes the command and hands it on), the last
one runs it. ``json-naive+ssh`` = decode as naive JSON, then send over ssh.

The last part may name its final shell: ``raw@dash``, ``nested@zsh``,
``json-naive+raw@busybox`` (:mod:`transports.shells`; bash when not named, and
``@bash`` is dropped from the name so that records stay comparable).

A user's own path is ``template:<command line with {R}>`` (:mod:`transports.template`), always the
last part: everything after ``template:`` is the template, ``+`` and ``,`` included, so
``json-naive+template:docker exec -i ctr sh -c "{R}"`` is middleware then a template, and in a list
(``raw,template:...``) a template comes last.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .base import Transport
from .escaped import Escaped
from .harnesses import HARNESSES
from .json_embed import JsonCorrect, JsonNaive
from .nested import Nested
from .nested_single import NestedSingle
from .paths import PATHS
from .raw import Raw
from .shells import DEFAULT, UnknownShellError, get_shell
from .tempscript import Tempscript


class UnknownTransportError(ValueError):
    """A transport name that is not registered, or a composition that cannot be built."""


def _ssh(safe: bool = False) -> Transport:
    from .ssh import Ssh  # imported lazily: asyncssh is only needed when ssh is used

    return Ssh(safe=safe)


TERMINAL: dict[str, Callable[[], Transport]] = {
    "raw": Raw,
    "nested": lambda: Nested,
    "nested-single": lambda: NestedSingle,
    "escaped": lambda: Escaped,
    "tempscript": Tempscript,
    "ssh": _ssh,
    "ssh-safe": lambda: _ssh(True),
    **PATHS,
    **HARNESSES,
}
MIDDLEWARE: dict[str, Callable[[Transport | None], Transport]] = {
    "json-naive": JsonNaive,
    "json-correct": JsonCorrect,
}
LAB: tuple[str, ...] = ("raw", "nested", "nested-single", "escaped", "tempscript", "json-naive", "json-correct", "ssh")
"""The paper's transports; the deployment paths (:mod:`transports.paths`), then the real agent harnesses
(:mod:`transports.harnesses`), follow them in ORDER."""
ORDER: tuple[str, ...] = LAB + ("ssh-safe",) + tuple(PATHS) + tuple(HARNESSES)
LISTED: tuple[str, ...] = ORDER + ("ssh@zsh", "ssh-safe@zsh")
"""What the catalogue lists: every registered name, and the named routes that are a transport on a final
shell (``ssh@zsh``: ssh to a host whose login shell is zsh, the macOS default)."""


def known() -> list[str]:
    return list(ORDER)


_TEMPLATE = re.compile(r"\A((?:[^+:]*\+)*)\s*template:(.*)\Z", re.DOTALL)


def _template(name: str) -> tuple[list[str], str] | None:
    """(middleware parts, the text after ``template:``) for a name whose last part is a template, else None."""
    m = _TEMPLATE.match(name)
    if m is None:
        return None
    return [p.strip() for p in m.group(1).split("+")[:-1]], m.group(2)


def _template_name(parts: list[str], spec: str, name: str) -> str:
    from .template import PREFIX, TemplateError, normal

    for p in parts:
        if p not in MIDDLEWARE:
            raise UnknownTransportError(
                f"transport '{p}' cannot wrap a template (in front of it only middleware: {', '.join(MIDDLEWARE)})"
                if p in TERMINAL else f"unknown transport '{p}' (known: {', '.join(ORDER)})")
    try:
        return "+".join(parts + [PREFIX + normal(spec)])
    except TemplateError as e:
        raise UnknownTransportError(str(e)) from None


def _split_shell(last: str, name: str) -> tuple[str, str | None]:
    base, at, shell = last.partition("@")
    if not at:
        return base, None
    if not shell:
        raise UnknownTransportError(f"'{name}': a final shell must follow '@' (e.g. raw@dash)")
    return base, shell


def validate_name(name: str) -> str:
    """Raise ``UnknownTransportError`` unless ``name`` (possibly composed) can be built; the normal form."""
    if (found := _template(name)) is not None:
        return _template_name(*found, name)
    parts = [p.strip() for p in name.split("+")]
    base, shell = _split_shell(parts[-1], name)
    for p in parts[:-1] + [base]:
        if p not in TERMINAL and p not in MIDDLEWARE:
            raise UnknownTransportError(f"unknown transport '{p}' (known: {', '.join(ORDER)}; compose with +, "
                                        "e.g. json-naive+ssh; or your own: template:CMD with {R})")
    for p in parts[:-1]:
        if p not in MIDDLEWARE:
            raise UnknownTransportError(f"transport '{p}' runs the command itself and cannot wrap another (in '{name}')")
    if shell is not None:
        if base in MIDDLEWARE:
            raise UnknownTransportError(f"'{name}': name the final shell on the terminal transport (e.g. {base}+raw@{shell})")
        try:
            get_shell(shell)
        except UnknownShellError as e:
            raise UnknownTransportError(str(e)) from None
        if not hasattr(TERMINAL[base](), "on"):
            raise UnknownTransportError(f"transport '{base}' has a fixed final shell; '@{shell}' does not apply")
    last = base if shell in (None, DEFAULT.name) else f"{base}@{shell}"
    return "+".join(parts[:-1] + [last])


def get(name: str) -> Transport:
    """Build the transport named ``name``; composed names are built innermost first."""
    normal = validate_name(name)
    if (found := _template(normal)) is not None:
        from .template import Template

        transport: Transport = Template(found[1])
        for p in reversed(found[0]):
            transport = MIDDLEWARE[p](transport)
        transport.name = normal  # type: ignore[misc]
        return transport
    parts = normal.split("+")
    base, shell = _split_shell(parts[-1], normal)
    transport = TERMINAL[base]() if base in TERMINAL else MIDDLEWARE[base](None)
    if shell is not None:
        try:
            transport = transport.on(get_shell(shell))  # type: ignore[attr-defined]
        except ValueError as e:
            raise UnknownTransportError(str(e)) from None
    for p in reversed(parts[:-1]):
        transport = MIDDLEWARE[p](transport)
    transport.name = normal  # type: ignore[misc]
    return transport


def parse_list(spec: str) -> list[str]:
    """A comma-separated list of transport names, each validated; repeats dropped (first kept), so no work doubles.
    A template (``template:...``) is the last name: its text may hold commas of its own."""
    head, found, tail = spec.partition("template:")
    chunks = head.split(",")
    if found:
        chunks[-1] += found + tail
    names = list(dict.fromkeys(validate_name(s) for s in chunks if s.strip()))
    if not names:
        raise UnknownTransportError("no transport given")
    return names


def shell_of(name: str) -> str:
    """The final shell of the transport named ``name`` (its records' ``shell`` field)."""
    try:
        shell = getattr(get(name), "shell", None)
    except (UnknownTransportError, ValueError):
        return DEFAULT.name
    return shell.name if shell is not None else DEFAULT.name


_LAB_SOURCE = "the paper's laboratory wrapper (docs/spec.md, Transports)"
_LAB_COMPONENT = {"ssh": "OpenSSH client + embedded asyncssh server (or a real sshd), then bash",
                  "json-naive": "Python's json (strict), then the inner transport",
                  "json-correct": "Python's json, then the inner transport"}


def catalogue() -> list[dict[str, str | None]]:
    """Every registered transport: name, boundary, source, component, final shell, and what a fix fixes.
    ``quotebench transports list`` prints this; the README's deployment-paths table is this table."""
    rows: list[dict[str, str | None]] = []
    for name in LISTED:
        try:
            t = get(name)
        except Exception as e:  # noqa: BLE001 - a path whose component is missing is still listed
            rows.append({"name": name, "boundary": f"(unavailable: {e})", "source": None, "component": None,
                         "shell": None})
            continue
        shell = getattr(t, "shell", None)
        row: dict[str, str | None] = {
            "name": name,
            "boundary": t.boundary or "none: the direct path",
            "source": getattr(t, "source", _LAB_SOURCE),
            "component": getattr(t, "component", _LAB_COMPONENT.get(name, "bash")),
            "shell": shell.name if shell is not None else DEFAULT.name,
        }
        if getattr(t, "fixes", None):
            row["fixes"] = t.fixes  # type: ignore[attr-defined]
        rows.append(row)
    return rows


def catalogue_markdown() -> str:
    """The catalogue of deployment paths as a Markdown table: the README's "Deployment paths" table is this
    text exactly (a test holds them equal), so the docs cannot drift from ``transports list``."""
    def cell(text: str | None) -> str:
        return (text or "").replace("|", "\\|").replace("\n", " ")

    lines = ["| path | boundary | final shell | component | source |", "|---|---|---|---|---|"]
    for r in catalogue():
        if r["source"] == _LAB_SOURCE:
            continue
        name = f"`{r['name']}`" + (f" (fixes `{r['fixes']}`)" if r.get("fixes") else "")
        lines.append(f"| {name} | {cell(r['boundary'])} | {cell(r['shell'])} | {cell(r['component'])} | {cell(r['source'])} |")
    return "\n".join(lines) + "\n"
