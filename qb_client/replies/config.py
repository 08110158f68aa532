"""The label of a model configuration, ``provider:model@effort`` (``+variant`` for another design).

One label names one configuration everywhere a reply or a record is keyed by it: the reply store's
duplicate rule, a campaign's ``errors.jsonl``, the report's cells. It sits with the replies because
the campaign and the report both read it, and neither may import the other.
"""

from __future__ import annotations

from typing import Any


def config_label(config: dict[str, Any]) -> str:
    """``provider:model@effort`` (``@unset`` when no effort was sent)."""
    effort = config.get("effort")
    label = f"{config.get('provider')}:{config.get('model')}@{effort if effort not in (None, '') else 'unset'}"
    variant = config.get("variant")  # builtin tool, turns=K: another design, never pooled (ConfigInfo.variant)
    return f"{label}+{variant}" if variant else label
