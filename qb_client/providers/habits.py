"""``habits``: the deterministic human-habits baseline (:mod:`qb_client.agents.habits`) as a provider.

It lets the demo and tests run the whole pipeline, extraction included, with a
second offline "config" whose replies are not the references: a baseline, not a model.
"""

from __future__ import annotations

import json
from typing import Any

from transports.record import ConfigInfo

from ..agents.habits import habitual_reply
from ..contracts import NATIVE_TOOL, ToolCall
from .base import Generation, GenerationRequest, ProviderError


class HabitsProvider:
    def __init__(self, effort: str = "unset", params: dict[str, Any] | None = None) -> None:
        self.config = ConfigInfo(provider="habits", model="human-habits", effort=effort or "unset",
                                 params=dict(params or {}))

    def __repr__(self) -> str:
        return f"HabitsProvider({self.config.label!r})"

    async def generate(self, request: GenerationRequest) -> Generation:
        if request.task is None or request.contract is None:
            raise ProviderError("habits: the request carries no task and contract (use GenerationRequest.for_task)")
        reply = habitual_reply(request.task, request.contract)
        if request.contract == "native":
            call = ToolCall(name=NATIVE_TOOL.name, arguments=json.dumps({"command": reply}, ensure_ascii=False))
            return Generation(text="", tool_calls=[call], stop_reason="habits")
        return Generation(text=reply, stop_reason="habits")
