"""What the three network providers share: keys, params checks, the SDK client per event loop."""

from __future__ import annotations

import asyncio
import os
import re
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit, urlunsplit

from transports.results.record import ConfigInfo

from .base import Generation, GenerationRequest, Secret
from .effort import resolve_effort
from .retry import Failure, RetryPolicy, call_with_retries

C = TypeVar("C")

DEFAULT_TIMEOUT_S = 600.0

# Names that look like credentials or headers never go into params (params are recorded).
_SECRET_LIKE = re.compile(r"(?i)^(.*_)?(api_?key|auth_?token|access_?token|secret|password|authorization|headers)$")


def check_params(provider: str, params: dict[str, Any], reserved: tuple[str, ...]) -> dict[str, Any]:
    """Refuse params the provider sets itself or that could carry a secret into the records."""
    for name in params:
        if name in reserved:
            raise ValueError(f"{provider}: params may not set '{name}' (the provider sets it; effort goes in --effort)")
        if _SECRET_LIKE.match(name):
            raise ValueError(f"{provider}: params may not hold '{name}': params are recorded; keys come from the environment")
    return dict(params)


def merge_effort(provider: str, params: dict[str, Any], field: str, effort: str) -> dict[str, Any] | None:
    """``params[field]`` (a dict, e.g. Anthropic ``output_config``) with ``effort`` added, or None when there
    is nothing to send. An effort inside params is refused: ``--effort`` is the one place it is set, so the
    config label cannot lie."""
    extra = params.get(field)
    if extra is not None and not isinstance(extra, dict):
        raise ValueError(f"{provider}: params '{field}' must be an object")
    if extra and "effort" in extra:
        raise ValueError(f"{provider}: set the effort with --effort, not in params '{field}'")
    merged = dict(extra or {})
    if effort != "unset":
        merged["effort"] = effort
    return merged or None


def normalise_base_url(url: str | None, *, want_v1: bool) -> str | None:
    """OpenAI SDKs want the base URL to end in ``/v1``; the Anthropic SDK appends ``/v1/messages`` itself.

    A bare ``http://host:port`` gets ``/v1`` for OpenAI; a trailing ``/v1`` is dropped for Anthropic.
    Any other path is left as given (a proxy may mount the API elsewhere).
    """
    if not url:
        return None
    parts = urlsplit(url.strip())
    if not parts.scheme or not parts.netloc:
        raise ValueError(f"--base-url '{url}' is not an http(s) URL")
    path = parts.path.rstrip("/")
    if want_v1 and path == "":
        path = "/v1"
    if not want_v1 and path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, parts.fragment))


def key_from_env(*names: str) -> tuple[str | None, str | None]:
    """(value, variable name) of the first variable set and non-empty."""
    for name in names:
        value = os.environ.get(name)
        if value:
            return value, name
    return None, None


class NetworkProvider(Generic[C]):
    """Base for SDK-backed providers: one retry loop, one SDK client per event loop, key kept in a Secret.

    A client is bound to the loop that created it (its connection pool is), so a
    provider used from two ``asyncio.run`` calls makes a second client rather
    than failing on a closed loop.
    """

    name = "network"

    def __init__(self, model: str, *, effort: str, params: dict[str, Any], base_url: str | None,
                 secret: Secret, retry: RetryPolicy | None, timeout_s: float | None) -> None:
        if not model:
            raise ValueError(f"{self.name}: no model given (use {self.name}:MODEL)")
        effort = resolve_effort(self.name, effort)  # a documented value, or raw:VALUE on purpose
        self.model = model
        self.base_url = base_url
        self.retry = retry or RetryPolicy()
        self.timeout_s = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
        self._secret = secret
        self._client: C | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.config = ConfigInfo(provider=self.name, model=model, effort=effort or "unset", params=dict(params))

    def __repr__(self) -> str:
        where = f", base_url={self.base_url!r}" if self.base_url else ""
        return f"{type(self).__name__}({self.config.label!r}{where})"

    __str__ = __repr__

    # subclasses implement these three
    def _make_client(self) -> C:
        raise NotImplementedError

    async def _call(self, client: C, request: GenerationRequest) -> Generation:
        raise NotImplementedError

    def _classify(self, exc: BaseException) -> Failure | None:
        raise NotImplementedError

    def _client_for_loop(self) -> C:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client, self._loop = self._make_client(), loop
        return self._client

    async def generate(self, request: GenerationRequest) -> Generation:
        client = self._client_for_loop()
        gen, attempts, ms = await call_with_retries(
            lambda: self._call(client, request), self._classify, self.retry, self.config.label, self._secret)
        return gen.model_copy(update={"attempts": attempts, "generate_ms": round(ms, 3)})

    async def aclose(self) -> None:
        """Close the SDK client of the running loop (optional; the campaign may call it at the end)."""
        client, self._client = self._client, None
        close = getattr(client, "close", None)
        if close is not None and self._loop is asyncio.get_running_loop():
            await close()
