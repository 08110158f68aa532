"""``openai-chat:MODEL`` - Chat Completions, for OpenAI and any compatible server
(vLLM, Ollama, llama.cpp, LM Studio, proxies), non-streaming.

Effort ``unset`` sends no ``reasoning_effort``; otherwise ``reasoning_effort=e``.
An effort smuggled through params (``reasoning_effort``, ``reasoning.effort``,
``chat_template_kwargs.reasoning_effort``) is refused: ``--effort`` is the one
place it is set, so the config label says what was sent.
Without ``OPENAI_API_KEY`` a dummy key is sent (local servers need none). Tools
are sent as plain function tools without a ``strict`` field (the Chat
Completions default is non-strict, and some compatible servers reject fields
they do not know). ``tool_calls`` become tool calls with the ``arguments``
string kept byte for byte. Reasoning that a server returns apart from the
content (``reasoning_content`` or ``reasoning``) or as a leading
``<think>...</think>`` block in the content is kept apart from the reply text:
it is the model's scratchpad, and a fence inside it must not become R.

Chat Completions has no built-in shell tool: ``--native-tool function`` is the
only choice here (``builtin`` is refused before a campaign starts). A chain's
earlier turns go back as the assistant message (content and tool calls), then
one ``tool`` message per call (the first one's result, "not run" for the rest),
or a user message for a text contract.
"""

from __future__ import annotations

import re
from typing import Any

import openai

from .base import NOT_RUN, Exchange, Generation, GenerationRequest, MalformedResponse, parse_response, ToolCall, Usage
from ._network import check_params
from .openai_common import OpenAIBase, field, raw_arguments

RESERVED = ("model", "messages", "tools", "stream", "reasoning_effort")
# (params field, key inside it) pairs through which compatible servers take an effort
EFFORT_FIELDS = (("reasoning", "effort"), ("chat_template_kwargs", "reasoning_effort"))

_THINK = re.compile(r"\A\s*<think>(?P<thought>.*?)</think>[ \t]*\n?", re.S)


class OpenAIChatProvider(OpenAIBase):
    name = "openai-chat"
    needs_key = False
    reserved = RESERVED

    def _check_effort_params(self, params: dict[str, Any], effort: str) -> None:
        for name, key in EFFORT_FIELDS:
            extra = params.get(name)
            if isinstance(extra, dict) and key in extra:
                raise ValueError(f"{self.name}: set the effort with --effort, not in params '{name}.{key}'")

    async def _call(self, client: openai.AsyncOpenAI, request: GenerationRequest) -> Generation:
        params = check_params(self.name, dict(request.params), RESERVED)
        self._check_effort_params(params, request.effort)
        kwargs: dict[str, Any] = {}
        if request.effort != "unset":
            kwargs["reasoning_effort"] = request.effort
        if request.tools:
            kwargs["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                                 "parameters": t.input_schema}}
                               for t in request.tools]
        if request.builtin:
            raise ValueError("openai-chat has no built-in shell tool: use --native-tool function")
        messages: list[dict[str, Any]] = [{"role": "system", "content": request.system},
                                          {"role": "user", "content": request.user}]
        for turn in request.history:
            messages += _turn_messages(turn)
        resp = await client.chat.completions.create(
            model=self.model, messages=messages, extra_body=params or None, **kwargs)  # type: ignore[arg-type]
        return parse_response(_generation, resp)


def _turn_messages(turn: Exchange) -> list[dict[str, Any]]:
    """An earlier turn of a chain: the assistant message, then what its action gave."""
    assistant: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if not turn.tool_calls:
        return [assistant, {"role": "user", "content": turn.message}]
    assistant["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                               for c in turn.tool_calls]
    return [assistant, *({"role": "tool", "tool_call_id": c.id, "content": turn.tool_text() if i == 0 else NOT_RUN}
                         for i, c in enumerate(turn.tool_calls))]


def split_think(content: str) -> tuple[str, str | None]:
    """(reply text, thought) for content that opens with a ``<think>`` block; otherwise (content, None)."""
    m = _THINK.match(content)
    if not m:
        return content, None
    return content[m.end():], m.group("thought")


def _generation(resp: Any) -> Generation:
    if isinstance(resp, (str, bytes)):  # the SDK hands back the text of a body that is not JSON
        head = (resp.decode("utf-8", "replace") if isinstance(resp, bytes) else resp).strip()[:60]
        raise MalformedResponse(f"the response is not JSON but text ({head!r}...): is the base URL an "
                                "OpenAI-compatible API, ending in /v1?")
    choices = field(resp, "choices")
    if not choices:
        raise MalformedResponse("the response has no choices")
    choice = choices[0]
    msg = field(choice, "message")
    content = field(msg, "content")
    text = content if isinstance(content, str) else ""
    reasoning = field(msg, "reasoning_content") or field(msg, "reasoning")
    text, thought = split_think(text)
    if thought is not None:
        reasoning = f"{reasoning}\n\n{thought}" if reasoning else thought
    calls: list[ToolCall] = []
    for tc in field(msg, "tool_calls") or []:
        fn = field(tc, "function")
        if fn is not None:
            calls.append(ToolCall(name=str(field(fn, "name")), arguments=raw_arguments(field(fn, "arguments")),
                                  id=field(tc, "id")))
        elif field(tc, "type") == "custom":
            custom = field(tc, "custom")
            calls.append(ToolCall(name=str(field(custom, "name")), arguments=raw_arguments(field(custom, "input")),
                                  id=field(tc, "id")))
    legacy = field(msg, "function_call")
    if not calls and legacy is not None:
        calls.append(ToolCall(name=str(field(legacy, "name")), arguments=raw_arguments(field(legacy, "arguments"))))
    usage = field(resp, "usage")
    details = field(usage, "completion_tokens_details")
    return Generation(
        text=text,
        tool_calls=calls,
        usage=Usage(input_tokens=field(usage, "prompt_tokens"), output_tokens=field(usage, "completion_tokens"),
                    reasoning_tokens=field(details, "reasoning_tokens")),
        stop_reason=field(choice, "finish_reason"),
        reasoning=reasoning if isinstance(reasoning, str) and reasoning else None,
        response_model=field(resp, "model"),
        response_id=field(resp, "id"),
    )
