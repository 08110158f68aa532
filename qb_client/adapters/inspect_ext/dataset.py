"""One Inspect sample per task: the contract's system and user messages, as our driver sends them.

The messages come from :func:`qb_client.replies.contracts.build_messages`, never from a
copy, and go in as chat messages rather than through Inspect's
``system_message`` solver, which formats its text as a template: instructions
are full of braces and must reach the model byte for byte.
"""

from __future__ import annotations

from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser

from tasks.load import select
from tasks.schema import Task

from ...replies.contracts import build_messages


def sample_for(task: Task, contract: str) -> Sample:
    system, user = build_messages(task, contract)
    return Sample(id=task.id, input=[ChatMessageSystem(content=system), ChatMessageUser(content=user)],
                  metadata={"task_id": task.id, "family": task.family, "tier": task.tier, "contract": contract})


def dataset_for(contract: str, pattern: str | None = None) -> MemoryDataset:
    """The tasks matching ``pattern`` (every task of the suite by default) under ``contract``."""
    tasks = select(pattern)
    return MemoryDataset([sample_for(t, contract) for t in tasks], name="quotebench")
