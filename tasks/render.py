"""Payload substitution into family templates.

Instructions must state a payload so that exactly one byte string fits it, and
must never say how to quote it. The filters below do that once for every family:
a fenced block for reading plus a JSON string literal that pins down trailing
whitespace and the final newline.
"""

from __future__ import annotations

import json
import re
from typing import Any

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\|\s*([a-z]+)\s*)?\}\}")


class RenderError(ValueError):
    """A template names a payload field that is missing, or a filter that does not exist."""


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _ending(text: str) -> str:
    if text.endswith("\n\n"):
        return "It ends with an empty line (two newline characters at the end)."
    if text.endswith("\n"):
        return "It ends with exactly one newline character."
    if text and text[-1] in " \t":
        return "It ends with trailing whitespace and has no final newline."
    return "It has no newline at the end."


def block(text: str) -> str:
    """A fenced block, the exact value as a JSON string, and a note on its ending."""
    shown = text[:-1] if text.endswith("\n") else text
    fence = _fence(text)
    return (
        f"{fence}text\n{shown}\n{fence}\n"
        f"Exactly, as a JSON string literal: {json.dumps(text, ensure_ascii=False)}\n"
        f"{_ending(text)}"
    )


def args(values: list[str]) -> str:
    """A numbered list, one argument per line, each as a JSON string literal."""
    lines = [f"{i}. {json.dumps(v, ensure_ascii=False)}" for i, v in enumerate(values, 1)]
    return f"{len(values)} argument(s), in this order, each shown as a JSON string literal:\n" + "\n".join(lines)


FILTERS = {
    "json": lambda v: json.dumps(v, ensure_ascii=False),
    "block": block,
    "args": args,
    "pretty": lambda v: json.dumps(v, ensure_ascii=False, indent=2),
}


def render(template: Any, payload: dict[str, Any], where: str = "") -> Any:
    """Substitute ``payload`` into every string inside ``template`` (dicts and lists recursed)."""
    if isinstance(template, dict):
        return {k: render(v, payload, f"{where}.{k}" if where else k) for k, v in template.items()}
    if isinstance(template, list):
        return [render(v, payload, f"{where}[{i}]") for i, v in enumerate(template)]
    if not isinstance(template, str):
        return template
    whole = PLACEHOLDER.fullmatch(template)
    if whole and whole.group(2) is None:
        return _value(whole.group(1), payload, where)

    def one(m: re.Match[str]) -> str:
        value = _value(m.group(1), payload, where)
        name = m.group(2)
        if name is None:
            if not isinstance(value, str):
                raise RenderError(f"{where}: payload field '{m.group(1)}' is not a string; use a filter such as |json")
            return value
        if name not in FILTERS:
            raise RenderError(f"{where}: unknown filter '{name}' (known: {', '.join(FILTERS)})")
        return FILTERS[name](value)

    return PLACEHOLDER.sub(one, template)


def _value(name: str, payload: dict[str, Any], where: str) -> Any:
    if name not in payload:
        raise RenderError(f"{where}: payload has no field '{name}'")
    return payload[name]
