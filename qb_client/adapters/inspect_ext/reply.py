"""The reply, its tool calls and the command R, read from an Inspect model output.

The text is the assistant message's text parts (reasoning excluded, as our
providers do). Inspect hands tool calls over with their arguments already
parsed; they are turned back into our :class:`~qb_client.replies.contracts.ToolCall`
(arguments as JSON text) so that R is extracted by our contract code and by
nothing else. A call whose arguments Inspect could not parse gives no R, with
Inspect's parse error as the reason: the model failed, as under our driver.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...replies.contracts import Extraction, ToolCall, extract


@dataclass(frozen=True)
class Reply:
    text: str
    tool_calls: list[ToolCall]
    extraction: Extraction
    parse_error: str | None = None

    def stored_text(self, contract: str) -> str:
        """The full reply as a campaign stores it: for native, the text and the tool calls as JSON."""
        if contract != "native":
            return self.text
        return json.dumps({"text": self.text, "tool_calls": [c.model_dump(mode="json") for c in self.tool_calls]},
                          ensure_ascii=False)


def _calls(message: Any) -> tuple[list[ToolCall], str | None]:
    calls: list[ToolCall] = []
    first_error: str | None = None
    for call in getattr(message, "tool_calls", None) or []:
        if call.parse_error and first_error is None and not calls:
            first_error = f"tool call '{call.function}': {' '.join(str(call.parse_error).split())}"
        calls.append(ToolCall(name=call.function, arguments=json.dumps(call.arguments, ensure_ascii=False),
                              id=call.id))
    return calls, first_error


def read_reply(output: Any, contract: str) -> Reply:
    """R from a ``ModelOutput`` under ``contract``, by :func:`qb_client.replies.contracts.extract`."""
    message = output.choices[0].message if getattr(output, "choices", None) else None
    text = message.text if message is not None else ""
    calls, parse_error = _calls(message)
    if contract == "native" and parse_error is not None:
        return Reply(text, calls, Extraction(command=None, method="tool-call", error=parse_error), parse_error)
    return Reply(text, calls, extract(contract, text, calls))
