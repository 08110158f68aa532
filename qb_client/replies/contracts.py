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
from transports.results.store import loads

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
    """One tool call as the server sent it: ``arguments`` is the raw JSON text, unparsed.

    ``kind`` is None for a function tool (and for Anthropic's built-in bash tool, whose input is the same
    ``{"command": ...}`` object); ``shell_call`` for an OpenAI shell call, whose arguments are the JSON of its
    ``action`` (``{"commands": [...], ...}``)."""

    name: str
    arguments: str
    id: str | None = None
    kind: str | None = Field(default=None, exclude_if=lambda v: v is None)


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


# The providers' own shell tools (``--native-tool builtin``), as the installed SDKs define them. The model is
# trained on these; the function tool above is what every provider can be given (``--native-tool function``).
ANTHROPIC_BASH_TOOL: dict[str, Any] = {"type": "bash_20250124", "name": "bash"}
OPENAI_SHELL_TOOL: dict[str, Any] = {"type": "shell", "environment": {"type": "local"}}
NATIVE_TOOL_KINDS: tuple[str, ...] = ("builtin", "function")
BUILTIN_PROVIDERS: dict[str, dict[str, Any]] = {"anthropic": ANTHROPIC_BASH_TOOL, "openai": OPENAI_SHELL_TOOL}
"""The providers that have a built-in shell tool (``openai`` is the Responses API; Chat Completions has none)."""


def tool_name(provider: str, native_tool: str) -> str:
    """The name the model knows its shell tool by: ``shell`` for OpenAI's built-in, ``bash`` otherwise."""
    return "shell" if native_tool == "builtin" and provider == "openai" else NATIVE_TOOL.name


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

# The multi-turn arm (``run --turns K``, K > 1) replaces only the setting: the model sees each command's exit
# code and output and may act again. The contract-specific rest of each template is the same.
LOOP_PROMPT_VERSION = "loop1"
"""Bump on any change to the multi-turn texts below or to how an observation is shown (qb_client.campaign.loop)."""
STOP_WORD = "DONE"
_LOOP_SETTING = (
    "You complete one task in a Linux working directory. The working directory is already prepared. Each "
    "action runs in that directory and you are shown its exit code, stdout and stderr; then you may act "
    "again, up to {turns} actions in all, in the same directory."
)
_LOOP_STOP = {
    "text": f"When the task is done, reply with the word {STOP_WORD} alone.",
    "native": "When the task is done, reply without calling the tool.",
}


LOOP_OBSERVATION = "Your action ran.\n{observation}\n\nReply with your next action, or " + STOP_WORD + \
    " alone if the task is done."
"""The user message after a text contract's action: the observation is the MCP shell tool's own rendering
(exit code, stdout, stderr), never the verdict. Native actions get the same text as their tool result."""


def loop_observation(observation: str) -> str:
    return LOOP_OBSERVATION.replace("{observation}", observation)


def loop_system(contract: str, turns: int, shell_tool: str = "bash") -> str:
    """The system message of the multi-turn arm: the one-shot template with the setting replaced, and how
    to stop (the word ``DONE`` alone for text contracts, a reply without a tool call for native)."""
    check_contract(contract)
    one_shot = SYSTEM_TEMPLATES[contract].replace("`bash` tool", f"`{shell_tool}` tool")
    rest = one_shot[len(_SETTING):]
    rest = rest.replace("exactly once", "once per action")
    stop = _LOOP_STOP["native" if contract == "native" else "text"]
    return _LOOP_SETTING.replace("{turns}", str(turns)) + rest + " " + stop


class Messages(NamedTuple):
    system: str
    user: str


def build_messages(task: Task, contract: str, turns: int = 1, shell_tool: str = "bash") -> Messages:
    """The (system, user) pair for one task under one contract (``turns`` > 1: the multi-turn arm's). The
    native template names the shell tool the model is given (``shell`` for OpenAI's built-in one)."""
    check_contract(contract)
    if turns > 1:
        system = loop_system(contract, turns, shell_tool)
    else:
        system = SYSTEM_TEMPLATES[contract].replace("`bash` tool", f"`{shell_tool}` tool")
    # replace, not str.format: instructions are full of braces and must pass through untouched
    return Messages(system, USER_TEMPLATE.replace("{instruction}", task.instruction))


def is_stop(reply: str) -> bool:
    """A text reply that ends a chain: the stop word alone (surrounding whitespace aside), or nothing."""
    return reply.strip(_ASCII_WS) in (STOP_WORD, "")


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
    commands: list[str] | None = None
    """Every command of a call that carried several (an OpenAI shell call); ``command`` is the first."""

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
    if call.kind == "shell_call":
        return _extract_shell_call(call)
    try:
        args = loads(call.arguments)
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


def _extract_shell_call(call: ToolCall) -> Extraction:
    """An OpenAI shell call: R is its first command; all of them are kept, to run in order."""
    where = f"shell call '{call.id}'"
    try:
        action = loads(call.arguments)
    except ValueError:
        return Extraction(command=None, method="tool-call", error=f"{where}: its action is not valid JSON")
    commands = action.get("commands") if isinstance(action, dict) else None
    if not isinstance(commands, list) or not all(isinstance(c, str) for c in commands):
        return Extraction(command=None, method="tool-call", error=f"{where}: 'commands' is not a list of strings")
    if not commands:
        return Extraction(command=None, method="tool-call", error=f"{where}: 'commands' is empty")
    return Extraction(command=commands[0], method="tool-call", commands=list(commands) if len(commands) > 1 else None)


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
