"""``--model quotebench/reference``: an offline Inspect model that answers like our ``reference`` provider.

It gives each task's reference solution, expressed under the contract the
prompt asks for (:func:`qb_client.replies.contracts.reference_reply`): a fenced block
for the text contracts, one ``bash`` tool call for native. So ``inspect eval``
shows the crossed design offline, with no key and no network: every raw reply
passes on ``raw`` and the same replies lose on ``nested`` what the transport
damages.

Why not Inspect's ``mockllm/model``: from the command line it can only answer
a fixed text, and it counts that answer's tokens with tiktoken, which
downloads its encoding on first use, so it does not run offline on a fresh
machine. (Tests script ``mockllm`` in-process, with usage set.)
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from inspect_ai.model import ChatMessage, GenerateConfig, ModelAPI, ModelOutput, ModelUsage, modelapi
from inspect_ai.tool import ToolChoice, ToolInfo

from tasks.load import suite
from tasks.schema import Task

from ...replies.contracts import CONTRACTS, build_messages, reference_reply

API = "quotebench"
MODEL = "reference"


@lru_cache(maxsize=1)
def _prompts() -> dict[tuple[str, str], tuple[Task, str]]:
    """(system, user) of every task under every contract -> (task, contract)."""
    return {tuple(build_messages(t, c)): (t, c) for t in suite() for c in CONTRACTS}


def _text(message: ChatMessage) -> str:
    return message.text


class ReferenceModel(ModelAPI):
    def __init__(self, model_name: str, base_url: str | None = None, api_key: str | None = None,
                 config: GenerateConfig = GenerateConfig(), **model_args: Any) -> None:
        if model_name != MODEL:
            raise ValueError(f"unknown model '{API}/{model_name}' (the only one is {API}/{MODEL})")
        super().__init__(model_name, base_url, api_key, [], config)

    async def generate(self, input: list[ChatMessage], tools: list[ToolInfo], tool_choice: ToolChoice,
                       config: GenerateConfig) -> ModelOutput:
        system = next((_text(m) for m in input if m.role == "system"), "")
        user = next((_text(m) for m in reversed(input) if m.role == "user"), "")
        found = _prompts().get((system, user))
        if found is None:
            raise ValueError(f"{API}/{MODEL} answers QuoteBench prompts only (run the quotebench/quotebench task)")
        task, contract = found
        ref = reference_reply(task, contract)
        if contract == "native":
            output = ModelOutput.for_tool_call(f"{API}/{MODEL}", ref.tool_calls[0].name, {"command": ref.command},
                                               content="")
        else:
            output = ModelOutput.from_content(f"{API}/{MODEL}", ref.text)
        output.usage = ModelUsage(input_tokens=0, output_tokens=0, total_tokens=0)  # no tiktoken: offline
        return output


@modelapi(name=API)
def reference() -> type[ModelAPI]:
    return ReferenceModel
