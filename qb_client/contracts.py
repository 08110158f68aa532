"""Generation contracts: what the model is told, and how the command R is read back.

SPEC.md ("Contracts") defines four contracts. This module is the one place where
their prompt texts live, so a change to any wording is a change to
``PROMPT_VERSION`` (the caller copies it into every record's ``versions``) and
replies made under different wordings are never pooled silently.

Design choices, each deliberate:

* The user message is the task instruction, verbatim, for every contract. Only
  the system message differs, so the crossed design varies exactly one thing.
* The native contract says nothing about shells, quoting or ``bash -c``; the
  model sees only the ``bash`` tool (one string field ``command``).
* Extraction never rewrites the model's program: no CRLF normalisation, no
  de-indentation, no stripping inside a fenced block. The only bytes removed are
  the fence lines themselves and the one newline before the closing fence
  (SPEC rule), or surrounding ASCII whitespace when there is no fence.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from tasks.schema import Task

PROMPT_VERSION = "p1"
"""Bump on any change to the templates, the tool spec or the extraction rule below."""

CONTRACTS: tuple[str, ...] = ("raw", "native", "disclosed", "disclosed-single")
TEXT_CONTRACTS: frozenset[str] = frozenset({"raw", "disclosed", "disclosed-single"})


class UnknownContractError(ValueError):
    """A contract name that is not one of :data:`CONTRACTS`."""


def check_contract(name: str) -> str:
    if name not in CONTRACTS:
        raise UnknownContractError(f"unknown contract '{name}' (known: {', '.join(CONTRACTS)})")
    return name


# ---------------------------------------------------------------- wire shapes shared with providers


class ToolSpec(BaseModel):
    """An MCP-style tool description; each provider converts it to its own format (never strict)."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    input_schema: dict[str, Any]


class ToolCall(BaseModel):
    """One tool call as the server sent it: ``arguments`` is the raw JSON text, unparsed."""

    name: str
    arguments: str
    id: str | None = None


NATIVE_TOOL = ToolSpec(
    name="bash",
    description="Run a command in bash, in the working directory.",
    input_schema={
        "type": "object",
        "properties": {"command": {"type": "string", "description": "The command to run."}},
        "required": ["command"],
        "additionalProperties": False,
    },
)


# ---------------------------------------------------------------- prompt templates (PROMPT_VERSION)

_SETTING = (
    "You complete one task in a Linux working directory, in a single step. The working directory is "
    "already prepared. Your action runs exactly once, in that directory; you will not see its output "
    "and you get no second turn."
)
_FENCE_NOTE = "If your reply contains a fenced code block, only the contents of the first one are used."

SYSTEM_TEMPLATES: dict[str, str] = {
    "raw": (
        f"{_SETTING}\n\n"
        "Reply with one Bash program only. It runs verbatim as the script argument of `bash -c`. "
        f"{_FENCE_NOTE}"
    ),
    "native": (
        f"{_SETTING}\n\n"
        "Act by calling the `bash` tool exactly once."
    ),
    "disclosed": (
        f"{_SETTING}\n\n"
        "Reply with one string R only. R will be interpolated, unescaped, into the command line "
        '`bash -c "R"`: R is pasted as is between the double quotes, and that command line is run by bash. '
        f"{_FENCE_NOTE}"
    ),
    "disclosed-single": (
        f"{_SETTING}\n\n"
        "Reply with one string R only. R will be interpolated, unescaped, into the command line "
        "`bash -c 'R'`: R is pasted as is between the single quotes, and that command line is run by bash. "
        f"{_FENCE_NOTE}"
    ),
}
USER_TEMPLATE = "{instruction}"


class Messages(NamedTuple):
    system: str
    user: str


def build_messages(task: Task, contract: str) -> Messages:
    """The (system, user) pair for one task under one contract."""
    check_contract(contract)
    # replace, not str.format: instructions are full of braces and must pass through untouched
    return Messages(SYSTEM_TEMPLATES[contract], USER_TEMPLATE.replace("{instruction}", task.instruction))


def tools_for(contract: str) -> list[ToolSpec]:
    """The tools offered under a contract: the shell tool for native, none otherwise."""
    return [NATIVE_TOOL] if check_contract(contract) == "native" else []


# ---------------------------------------------------------------- extraction

Method = Literal["fence", "fence-unterminated", "whole", "tool-call", "none", "stored"]


class Extraction(BaseModel):
    """The command R read from a reply, or why there is none (a model failure, not an error)."""

    command: str | None
    method: Method
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.command is not None


# CommonMark-style fences: up to three spaces of indentation, then a run of at least three
# backticks or tildes. A backtick fence's info string may not contain a backtick (so a line
# like ```x``` is inline code, not a fence).
_OPEN = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_CLOSE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})[ \t]*$")
_ASCII_WS = " \t\n\r\f\v"


def _fence_line(line: str) -> str:
    """A fence line is recognised with or without a CR before its newline (CRLF replies)."""
    return line[:-1] if line.endswith("\r") else line


def extract_text(reply: str) -> Extraction:
    """R for a text contract (SPEC rule).

    The first fenced code block wins: R is the lines between the opening and the
    closing fence line, joined by their ``\\n``, i.e. without the newline before the
    closing fence. A closing fence uses the same character and is at least as long
    as the opening one, so a ```````` ```` ```` fence may hold ```` ``` ```` lines.

    Decisions beyond the SPEC text: lines are split on ``\\n`` only and any ``\\r``
    inside the block stays part of R (a CRLF reply therefore yields CRs in R: that
    is what the model sent); an unterminated fence runs to the end of the reply, as
    in CommonMark, minus one final newline, with method ``fence-unterminated``.
    Without a fence R is the whole reply without surrounding ASCII whitespace; an
    empty reply gives R = "" (which then fails its validator, as SPEC implies).
    """
    lines = reply.split("\n")
    for i, line in enumerate(lines):
        m = _OPEN.match(_fence_line(line))
        if not m:
            continue
        fence = m.group("fence")
        if fence[0] == "`" and "`" in m.group("info"):
            continue
        for j in range(i + 1, len(lines)):
            c = _CLOSE.match(_fence_line(lines[j]))
            if c and c.group("fence")[0] == fence[0] and len(c.group("fence")) >= len(fence):
                return Extraction(command="\n".join(lines[i + 1 : j]), method="fence")
        body = lines[i + 1 :]
        if body and body[-1] == "":
            body = body[:-1]
        return Extraction(command="\n".join(body), method="fence-unterminated")
    return Extraction(command=reply.strip(_ASCII_WS), method="whole")


def extract_tool_call(tool_calls: Sequence[ToolCall]) -> Extraction:
    """R for the native contract: the string ``command`` of the first tool call's JSON arguments."""
    if not tool_calls:
        return Extraction(command=None, method="none", error="no tool call in the reply")
    call = tool_calls[0]
    try:
        args = json.loads(call.arguments)
    except ValueError as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        return Extraction(command=None, method="tool-call",
                          error=f"tool call '{call.name}': arguments are not valid JSON ({msg})")
    if not isinstance(args, dict):
        return Extraction(command=None, method="tool-call",
                          error=f"tool call '{call.name}': arguments are not a JSON object")
    if "command" not in args:
        return Extraction(command=None, method="tool-call",
                          error=f"tool call '{call.name}': arguments have no 'command' field")
    command = args["command"]
    if not isinstance(command, str):
        return Extraction(command=None, method="tool-call",
                          error=f"tool call '{call.name}': 'command' is a {type(command).__name__}, not a string")
    return Extraction(command=command, method="tool-call")


def extract(contract: str, text: str, tool_calls: Sequence[ToolCall] = ()) -> Extraction:
    """R for any contract: tool calls for native, the text for the others."""
    if check_contract(contract) == "native":
        return extract_tool_call(tool_calls)
    return extract_text(text)


def extract_command(reply: str, contract: str, tool_calls: Sequence[ToolCall] = ()) -> tuple[str | None, str | None]:
    """``(command, reason)``: the shape the replay and campaign code records (reason is None on success)."""
    e = extract(contract, reply, tool_calls)
    return e.command, e.error


# ---------------------------------------------------------------- the inverse, for offline providers


def fence(command: str, info: str = "bash") -> str:
    """Wrap R in a fenced block that :func:`extract_text` reads back byte for byte.

    The fence is one backtick longer than the longest backtick run in R, so no line
    of R can close it; R may hold CRs, blank edge lines, or end in a newline.
    """
    longest = max((len(run) for run in re.findall(r"`+", command)), default=0)
    bar = "`" * max(3, longest + 1)
    return f"{bar}{info}\n{command}\n{bar}\n"


def quote_for_single(command: str) -> str:
    """R made safe for ``bash -c 'R'``: every ' becomes '\\'' (close, escaped quote, reopen)."""
    return command.replace("'", "'\\''")


class ReferenceReply(BaseModel):
    """What a perfect model would answer under a contract (used by the ``reference`` provider)."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    command: str


def reference_reply(task: Task, contract: str) -> ReferenceReply:
    """The task's reference solution expressed under a contract (SPEC, "Command line": tasks show)."""
    check_contract(contract)
    if contract == "native":
        args = json.dumps({"command": task.solution}, ensure_ascii=False)
        return ReferenceReply(tool_calls=[ToolCall(name=NATIVE_TOOL.name, arguments=args, id="ref-0")],
                              command=task.solution)
    command = {
        "raw": task.solution,
        "disclosed": task.solution_disclosed,
        "disclosed-single": quote_for_single(task.solution),
    }[contract]
    return ReferenceReply(text=fence(command), command=command)
