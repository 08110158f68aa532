"""``openai:MODEL`` - the Responses API through the official SDK (non-streaming).

Effort ``unset`` sends no ``reasoning`` field; otherwise ``reasoning={"effort": e}``
(other ``reasoning`` options such as ``summary`` may come through params). The
system message goes in ``instructions``. Function tools are sent with
``strict: false`` explicitly, because the Responses API makes them strict by
default and an MCP schema is not written for strict mode. ``function_call``
items become tool calls with their ``arguments`` string untouched; reasoning
items (summaries) are kept apart from the reply text.
"""

from __future__ import annotations

from typing import Any

import openai

from .base import Generation, GenerationRequest, MalformedResponse, parse_response, ToolCall, Usage
from ._network import merge_effort
from .openai_common import OpenAIBase, field, raw_arguments

RESERVED = ("model", "input", "instructions", "tools", "stream")


class OpenAIResponsesProvider(OpenAIBase):
    name = "openai"
    needs_key = True
    reserved = RESERVED

    def _check_effort_params(self, params: dict[str, Any], effort: str) -> None:
        merge_effort(self.name, params, "reasoning", effort)

    async def _call(self, client: openai.AsyncOpenAI, request: GenerationRequest) -> Generation:
        params = dict(request.params)
        reasoning = merge_effort(self.name, params, "reasoning", request.effort)
        params.pop("reasoning", None)
        kwargs: dict[str, Any] = {}
        if reasoning is not None:
            kwargs["reasoning"] = reasoning
        if request.tools:
            kwargs["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                                "parameters": t.input_schema, "strict": False} for t in request.tools]
        resp = await client.responses.create(
            model=self.model, instructions=request.system,
            input=[{"role": "user", "content": request.user}], extra_body=params or None, **kwargs)
        return parse_response(_generation, resp)


def _generation(resp: Any) -> Generation:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    refusal = False
    output = field(resp, "output")
    if not isinstance(output, list):
        raise MalformedResponse("the response has no output list")
    for item in output:
        kind = field(item, "type")
        if kind == "message":
            for part in field(item, "content") or []:
                ptype = field(part, "type")
                if ptype == "output_text":
                    texts.append(field(part, "text") or "")
                elif ptype == "refusal":
                    refusal = True
        elif kind == "reasoning":
            for s in field(item, "summary") or []:
                reasoning.append(field(s, "text") or "")
        elif kind == "function_call":
            calls.append(ToolCall(name=str(field(item, "name")), arguments=raw_arguments(field(item, "arguments")),
                                  id=field(item, "call_id")))
    usage = field(resp, "usage")
    details = field(usage, "output_tokens_details")
    status = field(resp, "status")
    incomplete = field(field(resp, "incomplete_details"), "reason")
    stop = f"{status}:{incomplete}" if incomplete else status
    if refusal and not texts:
        stop = f"{stop}:refusal" if stop else "refusal"
    return Generation(
        text="".join(texts),
        tool_calls=calls,
        usage=Usage(input_tokens=field(usage, "input_tokens"), output_tokens=field(usage, "output_tokens"),
                    reasoning_tokens=field(details, "reasoning_tokens")),
        stop_reason=stop,
        reasoning="\n\n".join(r for r in reasoning if r) or None,
        response_model=field(resp, "model"),
        response_id=field(resp, "id"),
    )
