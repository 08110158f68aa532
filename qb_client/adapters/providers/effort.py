"""``--effort``: the values each provider documents, read from the installed SDK, and a way past them.

A misspelt effort (``--effort hihg``) sent as is would cost a failed campaign
on an API that rejects it, and on one that ignores it would record a config
label that lies. So an effort is checked against what the installed SDK's own
types allow for the field it goes into:

* ``anthropic``: ``output_config.effort`` (``anthropic.types.OutputConfigParam``);
* ``openai``: ``reasoning.effort`` (``openai.types.shared_params.Reasoning``);
* ``openai-chat``: ``reasoning_effort`` (Chat Completions ``CompletionCreateParams``).

Reading the ``Literal`` from the SDK keeps the list in step with the SDK
version installed (a value the SDK documents, such as ``max`` or ``xhigh``, is
accepted exactly when the SDK knows it). For ``replay``, ``reference`` and
``habits`` the effort is a label only and any single word is accepted.

A new value on purpose (a compatible server's own rung, a value newer than the
SDK): prefix it with ``raw:``, e.g. ``--effort raw:ultra``. It is sent and
recorded as ``ultra``, unchecked. ``unset`` sends no effort at all.
"""

from __future__ import annotations

import typing
from collections.abc import Callable

RAW_PREFIX = "raw:"
UNSET = "unset"

# Used only if an SDK's types cannot be read (a restructured SDK): the values every version documented.
_FALLBACK: dict[str, tuple[str, ...]] = {
    "anthropic": ("low", "medium", "high"),
    "openai": ("minimal", "low", "medium", "high"),
    "openai-chat": ("minimal", "low", "medium", "high"),
}


def _literal_values(annotation: object) -> tuple[str, ...]:
    """Every string of the ``Literal`` types inside ``annotation`` (through Optional/Union), in order."""
    if typing.get_origin(annotation) is typing.Literal:
        return tuple(v for v in typing.get_args(annotation) if isinstance(v, str))
    values: list[str] = []
    for arg in typing.get_args(annotation):
        values.extend(v for v in _literal_values(arg) if v not in values)
    return tuple(values)


def _anthropic() -> object:
    from anthropic.types import OutputConfigParam

    return typing.get_type_hints(OutputConfigParam)["effort"]


def _openai_responses() -> object:
    from openai.types.shared_params import Reasoning

    return typing.get_type_hints(Reasoning)["effort"]


def _openai_chat() -> object:
    from openai.types.chat.completion_create_params import CompletionCreateParamsBase

    return typing.get_type_hints(CompletionCreateParamsBase)["reasoning_effort"]


_SOURCES: dict[str, Callable[[], object]] = {
    "anthropic": _anthropic, "openai": _openai_responses, "openai-chat": _openai_chat,
}


def allowed_efforts(provider: str) -> tuple[str, ...] | None:
    """The documented effort values for ``provider``, or None when its effort is a label only."""
    source = _SOURCES.get(provider)
    if source is None:
        return None
    try:
        values = _literal_values(source())
    except Exception:  # noqa: BLE001 - an SDK whose types moved: fall back to the long-documented values
        values = ()
    return values or _FALLBACK[provider]


def resolve_effort(provider: str, effort: str) -> str:
    """The effort to send and record; ``ValueError`` (one line naming the allowed values) when it is not
    one of the provider's documented values. ``raw:VALUE`` passes VALUE unchecked."""
    effort = (effort or UNSET).strip()
    if effort.startswith(RAW_PREFIX):
        value = effort[len(RAW_PREFIX):]
        if not value or any(c.isspace() for c in value):
            raise ValueError(f"--effort '{effort}': give a single word after '{RAW_PREFIX}' (e.g. raw:ultra)")
        return value
    if effort == UNSET:
        return effort
    allowed = allowed_efforts(provider)
    if allowed is not None and effort not in allowed:
        raise ValueError(f"--effort '{effort}': {provider} takes {', '.join(allowed)} (or 'unset' to send none; "
                         f"'{RAW_PREFIX}{effort}' sends it unchecked)")
    return effort
