"""``anthropic:MODEL`` - the Messages API through the official SDK (non-streaming).

Effort ``unset`` sends no effort field at all (the paper: an unset effort lands on a
different rung per provider, so "unset" must mean "not sent", not a default);
otherwise ``output_config={"effort": e}``. Other params (``thinking``,
``temperature``, ...) pass through to the request body unchanged; ``max_tokens``
(required by the API) defaults to 32000 and is recorded in the config.
Thinking blocks are kept apart from the reply text; each ``tool_use`` block
becomes a tool call whose arguments are the JSON text of its ``input``.

``--native-tool builtin`` offers Anthropic's client-executed bash tool
(``bash_20250124``: input ``command``, or ``restart``) instead of the MCP
function tool; its ``tool_use`` blocks read back the same way. A chain's earlier
turns go back as the assistant's own content blocks (thinking signatures
included), followed by ``tool_result`` blocks (one per ``tool_use``: the first
one's output, "not run" for the rest) or, for a text contract, a user message.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic

from ...replies.contracts import ANTHROPIC_BASH_TOOL
from .base import (
    NOT_RUN, Exchange, Generation, GenerationRequest, MalformedResponse, parse_response, Secret, ToolCall, Usage,
)
from .retry import Failure, RetryPolicy, classify_sdk_error
from ._network import NetworkProvider, check_params, key_from_env, merge_effort, normalise_base_url

DEFAULT_MAX_TOKENS = 32000
RESERVED = ("model", "messages", "system", "tools", "stream")


class AnthropicProvider(NetworkProvider[anthropic.AsyncAnthropic]):
    name = "anthropic"

    def __init__(self, model: str, *, effort: str = "unset", params: dict[str, Any] | None = None,
                 base_url: str | None = None, retry: RetryPolicy | None = None,
                 timeout_s: float | None = None) -> None:
        params = check_params(self.name, dict(params or {}), RESERVED)
        params.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        merge_effort(self.name, params, "output_config", effort or "unset")  # validates early
        base_url = normalise_base_url(base_url, want_v1=False)
        key, var = key_from_env("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
        if key is None:
            if base_url is None:
                raise ValueError("anthropic: no key: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)")
            key, var = "no-key", "ANTHROPIC_API_KEY"  # a local or proxy endpoint that needs none
        self._key_kind = "auth_token" if var == "ANTHROPIC_AUTH_TOKEN" else "api_key"
        super().__init__(model, effort=effort, params=params, base_url=base_url, secret=Secret(key),
                         retry=retry, timeout_s=timeout_s)

    def _make_client(self) -> anthropic.AsyncAnthropic:
        # An explicit timeout also keeps the SDK from refusing large max_tokens without streaming.
        return anthropic.AsyncAnthropic(**{self._key_kind: self._secret.reveal()}, base_url=self.base_url,
                                        max_retries=0, timeout=self.timeout_s)

    def _classify(self, exc: BaseException) -> Failure | None:
        return classify_sdk_error(exc, status_error=anthropic.APIStatusError,
                                  connection_error=anthropic.APIConnectionError,
                                  timeout_error=anthropic.APITimeoutError, sdk_error=anthropic.AnthropicError)

    async def _call(self, client: anthropic.AsyncAnthropic, request: GenerationRequest) -> Generation:
        params = dict(request.params)
        max_tokens = params.pop("max_tokens", DEFAULT_MAX_TOKENS)
        output_config = merge_effort(self.name, params, "output_config", request.effort)
        params.pop("output_config", None)
        kwargs: dict[str, Any] = {}
        if output_config is not None:
            kwargs["output_config"] = output_config
        if request.builtin:
            kwargs["tools"] = [dict(ANTHROPIC_BASH_TOOL)]
        elif request.tools:
            kwargs["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.input_schema}
                               for t in request.tools]
        messages: list[dict[str, Any]] = [{"role": "user", "content": request.user}]
        for turn in request.history:
            messages += _turn_messages(turn)
        msg = await client.messages.create(
            model=self.model, max_tokens=max_tokens, system=request.system,
            messages=messages, extra_body=params or None, **kwargs)
        return parse_response(_generation, msg)


def _turn_messages(turn: Exchange) -> list[dict[str, Any]]:
    """An earlier turn of a chain: the assistant's content as it came, then what its action gave."""
    echo = turn.echo if turn.echo is not None else [{"type": "text", "text": turn.text}]
    if not turn.tool_calls:
        return [{"role": "assistant", "content": echo}, {"role": "user", "content": turn.message}]
    results = [{"type": "tool_result", "tool_use_id": call.id,
                "content": turn.tool_text() if i == 0 else NOT_RUN, "is_error": turn.tool_error() if i == 0 else True}
               for i, call in enumerate(turn.tool_calls)]
    return [{"role": "assistant", "content": echo}, {"role": "user", "content": results}]


def _generation(msg: Any) -> Generation:
    content = getattr(msg, "content", None)
    if not isinstance(content, list):
        raise MalformedResponse("the response has no content list")
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[ToolCall] = []
    for block in content:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text or "")
        elif kind == "thinking":
            thinking.append(getattr(block, "thinking", "") or "")
        elif kind == "tool_use":
            # The SDK hands ``input`` over as parsed JSON; its JSON text is the call's arguments. A
            # non-object input (a broken server) stays visible as such and fails extraction.
            calls.append(ToolCall(name=str(block.name), arguments=json.dumps(block.input, ensure_ascii=False),
                                  id=getattr(block, "id", None)))
    usage = getattr(msg, "usage", None)
    details = getattr(usage, "output_tokens_details", None)
    return Generation(
        text="".join(texts),
        tool_calls=calls,
        usage=Usage(input_tokens=getattr(usage, "input_tokens", None),
                    output_tokens=getattr(usage, "output_tokens", None),
                    reasoning_tokens=getattr(details, "thinking_tokens", None)),
        stop_reason=getattr(msg, "stop_reason", None),
        reasoning="\n\n".join(thinking) if thinking else None,
        response_model=getattr(msg, "model", None),
        response_id=getattr(msg, "id", None),
        echo=[b.model_dump(mode="json", exclude_none=True, warnings=False) for b in content],
    )
