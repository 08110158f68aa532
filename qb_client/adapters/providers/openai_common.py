"""What the two OpenAI-SDK providers share: the client, the key, error classification."""

from __future__ import annotations

import json
from typing import Any

import openai

from .base import Secret
from .retry import Failure, RetryPolicy, classify_sdk_error
from ._network import NetworkProvider, check_params, key_from_env, normalise_base_url

DUMMY_KEY = "sk-no-key"


class OpenAIBase(NetworkProvider[openai.AsyncOpenAI]):
    """``needs_key``: the Responses provider talks to OpenAI and needs ``OPENAI_API_KEY``; the Chat
    Completions provider is for any compatible server and falls back to a dummy key."""

    name = "openai-base"
    needs_key = True
    reserved: tuple[str, ...] = ()
    effort_field = ""

    def __init__(self, model: str, *, effort: str = "unset", params: dict[str, Any] | None = None,
                 base_url: str | None = None, retry: RetryPolicy | None = None,
                 timeout_s: float | None = None) -> None:
        params = check_params(self.name, dict(params or {}), self.reserved)
        self._check_effort_params(params, effort or "unset")
        base_url = normalise_base_url(base_url, want_v1=True)
        key, _ = key_from_env("OPENAI_API_KEY")
        if key is None:
            if self.needs_key and base_url is None:
                raise ValueError(f"{self.name}: no key: set OPENAI_API_KEY")
            key = DUMMY_KEY
        super().__init__(model, effort=effort, params=params, base_url=base_url, secret=Secret(key),
                         retry=retry, timeout_s=timeout_s)

    def _check_effort_params(self, params: dict[str, Any], effort: str) -> None:
        """Refuse an effort hidden in params (the config label must say what was sent)."""

    def _make_client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(api_key=self._secret.reveal(), base_url=self.base_url, max_retries=0,
                                  timeout=self.timeout_s)

    def _classify(self, exc: BaseException) -> Failure | None:
        return classify_sdk_error(exc, status_error=openai.APIStatusError,
                                  connection_error=openai.APIConnectionError,
                                  timeout_error=openai.APITimeoutError, sdk_error=openai.OpenAIError)


def field(obj: Any, name: str) -> Any:
    """An attribute of an SDK object, or a field a compatible server added (kept in ``model_extra``)."""
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None) or {}
        value = extra.get(name)
    return value


def raw_arguments(value: Any) -> str:
    """Tool-call arguments as text: a string is kept byte for byte; a server that sent an object
    (non-standard) gets its JSON text, so the call stays visible and extraction decides."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)
