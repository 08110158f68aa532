"""``openai:MODEL`` - the Responses API through the official SDK (non-streaming).

Effort ``unset`` sends no ``reasoning`` field; otherwise ``reasoning={"effort": e}``
(other ``reasoning`` options such as ``summary`` may come through params). The
system message goes in ``instructions``. Function tools are sent with
``strict: false`` explicitly, because the Responses API makes them strict by
default and an MCP schema is not written for strict mode. ``function_call``
items become tool calls with their ``arguments`` string untouched; reasoning
items (summaries) are kept apart from the reply text.

``--native-tool builtin`` offers the Responses API's own shell tool
(``{"type": "shell", "environment": {"type": "local"}}``) instead; a
``shell_call`` item becomes a tool call of kind ``shell_call`` whose arguments
are the JSON of its ``action`` (``commands`` is a list: all of them run, in
order, in one sandbox, as a local shell environment would). A chain's earlier
turns go back as the response's own output items, then a ``shell_call_output``
(one output per command: stdout, stderr, exit or timeout outcome) or a
``function_call_output`` per call (the first one's result, "not run" for the
rest), or a user message for a text contract.
"""

from __future__ import annotations

import json
from typing import Any

import openai

from ...replies.contracts import OPENAI_SHELL_TOOL
from .base import (
    NOT_RUN, Exchange, Generation, GenerationRequest, MalformedResponse, Observation, parse_response, ToolCall, Usage,
)
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
        if request.builtin:
            kwargs["tools"] = [json.loads(json.dumps(OPENAI_SHELL_TOOL))]
        elif request.tools:
            kwargs["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                                "parameters": t.input_schema, "strict": False} for t in request.tools]
        items: list[dict[str, Any]] = [{"role": "user", "content": request.user}]
        for turn in request.history:
            items += _turn_items(turn)
        resp = await client.responses.create(
            model=self.model, instructions=request.system,
            input=items, extra_body=params or None, **kwargs)  # type: ignore[arg-type]
        return parse_response(_generation, resp)


def _outcome(o: Observation) -> dict[str, Any]:
    if o.timed_out:
        return {"type": "timeout"}
    return {"type": "exit", "exit_code": o.exit_code if o.exit_code is not None else -1}


def _turn_items(turn: Exchange) -> list[dict[str, Any]]:
    """An earlier turn of a chain: the response's output items as they came, then what its action gave."""
    echo = turn.echo if turn.echo is not None else [{"role": "assistant", "content": turn.text}]
    if not turn.tool_calls:
        return [*echo, {"role": "user", "content": turn.message}]
    out: list[dict[str, Any]] = list(echo)
    for i, call in enumerate(turn.tool_calls):
        if call.kind == "shell_call":
            obs = turn.observations if i == 0 else [Observation(text=NOT_RUN, is_error=True, stderr=NOT_RUN)]
            out.append({"type": "shell_call_output", "call_id": call.id,
                        "output": [{"stdout": o.stdout, "stderr": o.stderr, "outcome": _outcome(o)} for o in obs]})
        else:
            out.append({"type": "function_call_output", "call_id": call.id,
                        "output": turn.tool_text() if i == 0 else NOT_RUN})
    return out


def _echo(item: Any) -> dict[str, Any]:
    """An output item as an input item (``created_by`` is output-only)."""
    doc = item.model_dump(mode="json", exclude_none=True, warnings=False) if hasattr(item, "model_dump") else dict(item)
    doc.pop("created_by", None)
    return doc


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
        elif kind == "shell_call":
            action = field(item, "action")
            doc = action.model_dump(mode="json", exclude_none=True) if hasattr(action, "model_dump") else action
            calls.append(ToolCall(name="shell", arguments=json.dumps(doc, ensure_ascii=False),
                                  id=field(item, "call_id"), kind="shell_call"))
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
        echo=[_echo(item) for item in output],
    )
