"""``habits``: the deterministic human-habits baseline (:mod:`qb_client.adapters.agents.habits`) as a provider.

It lets the demo and tests run the whole pipeline, extraction included, with a
second offline "config" whose replies are not the references: a baseline, not a model.
In the multi-turn arm (``--turns K``) it is :mod:`qb_client.adapters.agents.habits_loop`: the same first command,
then one retry in its other quoting form when the exit code or stderr shows a failure, then a stop.
"""

from __future__ import annotations

import json
from typing import Any

from transports.results.record import ConfigInfo

from ..agents.habits import PROSE, fence, habitual_reply
from ..agents.habits_loop import RETRY_PROSE, next_command
from ...replies.contracts import NATIVE_TOOL, STOP_WORD, ToolCall
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
        if request.turns > 1:
            return self._next(request)
        reply = habitual_reply(request.task, request.contract)
        if request.contract == "native":
            call = ToolCall(name=NATIVE_TOOL.name, arguments=json.dumps({"command": reply}, ensure_ascii=False))
            return Generation(text="", tool_calls=[call], stop_reason="habits")
        return Generation(text=reply, stop_reason="habits")

    def _next(self, request: GenerationRequest) -> Generation:
        """A turn of a chain: what the baseline does after seeing the earlier turns' exit codes and stderr."""
        assert request.task is not None and request.contract is not None
        seen = [(o.exit_code, o.stderr, o.timed_out, o.exit_code is None and not o.timed_out)
                for o in (ex.observations[0] for ex in request.history if ex.observations)]
        command = next_command(request.task, request.contract, seen)
        if command is None:
            if request.contract == "native":
                return Generation(text="Done.", stop_reason="habits")
            return Generation(text=STOP_WORD, stop_reason="habits")
        if request.contract == "native":
            call = ToolCall(name=NATIVE_TOOL.name, arguments=json.dumps({"command": command}, ensure_ascii=False),
                            id=f"habits-{len(request.history)}")
            return Generation(text="", tool_calls=[call], stop_reason="habits")
        prose = PROSE[request.contract] if not request.history else RETRY_PROSE
        return Generation(text=f"{prose}\n\n{fence(command)}", stop_reason="habits")
