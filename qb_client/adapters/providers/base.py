"""The provider interface: one request in, one generation out.

A provider turns a :class:`GenerationRequest` (messages, tools, effort, params)
into a :class:`Generation` (reply text, raw tool calls, usage, timing, stop
reason). Everything a record needs about *who* answered is in the provider's
``config``; secrets never are. Offline providers (``reference``, ``replay``)
read the task context carried by the request; network providers ignore it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tasks.schema import Task
from transports.results.record import ConfigInfo, Usage

from ...replies.contracts import (
    Extraction, NATIVE_TOOL_KINDS, ToolCall, ToolSpec, build_messages, check_contract, extract, tool_name, tools_for,
)

NOT_RUN = "not run: only the first tool call of a reply runs"
"""The tool result of every call after the first in one reply (multi-turn arm)."""


class Observation(BaseModel):
    """What running one command gave, as the model is shown it (never the verdict). ``text`` is the MCP shell
    tool's own rendering (exit code, stdout, stderr); the fields feed structured results (OpenAI's
    ``shell_call_output``)."""

    text: str
    is_error: bool = False
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    timed_out: bool = False


class Exchange(BaseModel):
    """One earlier turn of a multi-turn chain: what the model sent, and what running it gave.

    ``echo`` is the assistant turn in the provider's own wire form (content blocks, output items, a chat
    message), sent back as is so that thinking signatures and call ids survive; ``message`` is the user
    message that carries the observations for a text contract (or a native reply without a tool call);
    ``observations`` are the results of the first tool call (one per command it ran)."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    echo: Any = None
    observations: list[Observation] = Field(default_factory=list)
    message: str = ""

    def tool_text(self) -> str:
        """The first call's result as one text (the observations of its commands, in order)."""
        return "\n\n".join(o.text for o in self.observations)

    def tool_error(self) -> bool:
        return any(o.is_error for o in self.observations)

__all__ = [
    "ConfigInfo", "Exchange", "Generation", "GenerationRequest", "NOT_RUN", "Observation", "MalformedResponse", "PARSE_ERRORS", "Provider", "ProviderError", "Secret", "ToolCall",
    "ToolSpec", "Usage", "parse_response",
]


class GenerationRequest(BaseModel):
    """Everything a provider needs for one generation.

    ``task``, ``contract`` and ``draw`` identify the reply for offline providers
    and logs; a network provider sends only the messages, tools, effort and params.
    """

    model_config = ConfigDict(frozen=True)

    system: str
    user: str
    tools: list[ToolSpec] = Field(default_factory=list)
    effort: str = "unset"
    params: dict[str, Any] = Field(default_factory=dict)
    task: Task | None = None
    contract: str | None = None
    draw: int = 0
    native_tool: str = "function"
    """``builtin``: a network provider sends its own shell tool instead of ``tools`` (native contract only)."""
    turns: int = 1
    """The chain's turn budget (1 = one-shot); ``history`` holds its earlier turns, oldest first."""
    history: list[Exchange] = Field(default_factory=list)

    @classmethod
    def for_task(cls, task: Task, contract: str, config: ConfigInfo, draw: int = 0, *,
                 native_tool: str = "function", turns: int = 1) -> "GenerationRequest":
        """The request for (task, contract, draw), with effort and params taken from the provider's config,
        so the record's config and what was sent cannot disagree."""
        if native_tool not in NATIVE_TOOL_KINDS:
            raise ValueError(f"--native-tool '{native_tool}': one of {', '.join(NATIVE_TOOL_KINDS)}")
        system, user = build_messages(task, contract, turns, tool_name(config.provider, native_tool))
        return cls(system=system, user=user, tools=tools_for(contract), effort=config.effort,
                   params=dict(config.params), task=task, contract=check_contract(contract), draw=draw,
                   native_tool=native_tool, turns=turns)

    @property
    def builtin(self) -> bool:
        """Whether to offer the provider's own shell tool (native contract, ``--native-tool builtin``)."""
        return self.native_tool == "builtin" and bool(self.tools)


class Generation(BaseModel):
    """One reply as the provider returned it. ``text`` never includes thinking or reasoning."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    generate_ms: float = 0.0
    stop_reason: str | None = None
    attempts: int = 1
    reasoning: str | None = None
    response_model: str | None = None
    response_id: str | None = None
    reply_id: str | None = None
    command: str | None = None
    """Set only when a reply store fixes R (replay); live providers leave it None."""
    echo: Any = None
    """The assistant turn in the provider's wire form, for the next request of a chain (not stored)."""

    def extract(self, contract: str) -> Extraction:
        """R under ``contract``: the stored command when there is one, else the SPEC extraction rule."""
        if self.command is not None:
            return Extraction(command=self.command, method="stored")
        return extract(contract, self.text, self.tool_calls)


@runtime_checkable
class Provider(Protocol):
    """The one interface the campaign uses. ``config`` holds no secrets."""

    config: ConfigInfo

    async def generate(self, request: GenerationRequest) -> Generation: ...


class ProviderError(RuntimeError):
    """A generation that did not happen (HTTP error, connection, timeout, missing stored reply).

    The campaign records it as an error, never as a model failure. The message is
    one line and holds no key.
    """

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1,
                 retryable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.attempts = attempts
        self.retryable = retryable

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"ProviderError({self.message!r}, status={self.status}, attempts={self.attempts})"


class MalformedResponse(Exception):
    """A 2xx reply that is not the API's shape (no content list, no choices, a usage count that is not an
    integer, a finish reason that is not a string): an error, not a model failure, and never retried."""


PARSE_ERRORS: tuple[type[Exception], ...] = (ValidationError, TypeError, AttributeError, KeyError, ValueError)
"""What reading a well-formed but wrongly typed 2xx body can raise; each becomes :class:`MalformedResponse`."""


def parse_response(parse: Callable[[Any], "Generation"], response: Any) -> "Generation":
    """``parse(response)``, with any :data:`PARSE_ERRORS` turned into a one-line :class:`MalformedResponse`."""
    try:
        return parse(response)
    except MalformedResponse:
        raise
    except PARSE_ERRORS as e:
        if isinstance(e, ValidationError) and e.errors():
            first = e.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            detail = f"field '{loc}': {first['msg']} (got {first.get('input')!r:.60})"
        else:
            detail = f"{type(e).__name__}: {e}"
        raise MalformedResponse("the response is not the API's shape: " + " ".join(detail.split())) from None


class Secret:
    """A key that prints as ``***``: providers hold keys only in this wrapper (and inside the SDK client)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def scrub(self, text: str) -> str:
        """Remove the key from text that came back from a server (some echo it in error bodies)."""
        if len(self._value) >= 4:
            text = text.replace(self._value, "***")
        return text

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("a Secret is not picklable")
