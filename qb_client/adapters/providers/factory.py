"""``make_provider``: the ``--model PROVIDER:MODEL`` grammar of ``quotebench run``."""

from __future__ import annotations

from typing import Any

from .base import Provider
from .effort import resolve_effort
from .retry import RetryPolicy

PROVIDERS: tuple[str, ...] = ("anthropic", "openai", "openai-chat", "replay", "reference", "habits")


def make_provider(spec: str, base_url: str | None = None, effort: str = "unset",
                  params: dict[str, Any] | None = None, *, retry: RetryPolicy | None = None,
                  timeout_s: float | None = None) -> Provider:
    """Build a provider from ``anthropic:MODEL``, ``openai:MODEL``, ``openai-chat:MODEL``, ``replay:FILE``
    or ``reference``. Any problem is a one-line ``ValueError`` (the CLI's bad input, exit 2), an effort the
    provider does not document included (see :mod:`.effort`; ``raw:VALUE`` passes one on purpose)."""
    params = dict(params or {})
    effort = (effort or "unset").strip()
    if not effort or any(c.isspace() for c in effort):
        raise ValueError(f"--effort '{effort}' is not a single word (use 'unset' to send none)")
    name, sep, rest = spec.partition(":")
    name = name.strip()
    if name in ("reference", "habits"):
        if rest:
            raise ValueError(f"--model '{spec}': {name} takes no model ('--model {name}')")
    elif name in PROVIDERS and not rest:
        what = "FILE" if name == "replay" else "MODEL"
        raise ValueError(f"--model '{spec}': {name} needs {what} ('--model {name}:{what}')")
    if name in ("reference", "replay", "habits") and base_url:
        raise ValueError(f"--base-url is only for anthropic, openai and openai-chat, not {name}")
    if name in ("reference", "replay", "habits"):
        effort = resolve_effort(name, effort)  # a label only: any word; raw:WORD is WORD
    if name == "anthropic":
        from .anthropic_messages import AnthropicProvider

        return AnthropicProvider(rest, effort=effort, params=params, base_url=base_url, retry=retry,
                                 timeout_s=timeout_s)
    if name == "openai":
        from .openai_responses import OpenAIResponsesProvider

        return OpenAIResponsesProvider(rest, effort=effort, params=params, base_url=base_url, retry=retry,
                                       timeout_s=timeout_s)
    if name == "openai-chat":
        from .openai_chat import OpenAIChatProvider

        return OpenAIChatProvider(rest, effort=effort, params=params, base_url=base_url, retry=retry,
                                  timeout_s=timeout_s)
    if name == "replay":
        from .offline import ReplayProvider

        return ReplayProvider(rest, effort=effort, params=params)
    if name == "reference":
        from .offline import ReferenceProvider

        return ReferenceProvider(effort=effort, params=params)
    if name == "habits":
        from .habits import HabitsProvider

        return HabitsProvider(effort=effort, params=params)
    raise ValueError(f"--model '{spec}': unknown provider '{name}' (known: {', '.join(PROVIDERS)}; "
                     "e.g. anthropic:MODEL, openai-chat:MODEL, replay:FILE, reference)")
