"""The one retry loop for network providers.

The SDKs' own retries are disabled (``max_retries=0``) so that every attempt is
counted and timed here, with one policy: retry 408, 429, 5xx, connection errors and
timeouts with capped exponential backoff plus jitter, honouring Retry-After;
never retry another 4xx, nor a 2xx whose body is not the API's shape. After the last try a :class:`ProviderError` with a
one-line, key-free message is raised.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from .base import MalformedResponse, ProviderError, Secret

T = TypeVar("T")


class RetryPolicy(BaseModel):
    """Few tries, capped waits: a campaign should move on and record an error, not stall."""

    model_config = ConfigDict(frozen=True)

    tries: int = Field(4, ge=1, description="attempts in all, the first included")
    base_s: float = Field(1.0, ge=0, description="wait before the first retry; doubles each retry")
    cap_s: float = Field(30.0, ge=0, description="longest computed backoff")
    jitter: float = Field(0.25, ge=0, le=1, description="up to this fraction added at random")
    max_retry_after_s: float = Field(120.0, ge=0, description="longest wait a Retry-After header may ask for")

    def backoff(self, retry: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1-based)."""
        delay = min(self.cap_s, self.base_s * (2 ** (retry - 1)))
        return min(self.cap_s, delay * (1 + self.jitter * (rng or random).random()))


@dataclass
class Failure:
    """What went wrong in one attempt, in words that are safe to print."""

    retryable: bool
    status: int | None
    message: str
    retry_after: float | None = None


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds asked for by ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def one_line(text: str, limit: int = 300) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def body_message(body: object) -> str | None:
    """The human message inside an error body, whichever shape the server used
    (Anthropic/OpenAI ``{"error": {"message"}}``, vLLM ``{"message"}``, Ollama ``{"error": "..."}``, text)."""
    if isinstance(body, Mapping):
        err = body.get("error")
        if isinstance(err, Mapping):
            return body_message(err)
        if isinstance(err, str) and err:
            return err
        for key in ("message", "detail", "msg"):
            if isinstance(body.get(key), str) and body[key]:
                return body[key]
        return None
    if isinstance(body, str) and body.strip():
        return body
    return None


_BEARER = re.compile(r"(?i)(bearer\s+)\S+")


def classify_sdk_error(exc: BaseException, *, status_error: type[BaseException],
                       connection_error: type[BaseException], timeout_error: type[BaseException],
                       sdk_error: type[BaseException]) -> Failure | None:
    """Map an SDK exception to a :class:`Failure`; ``None`` for anything that is not the SDK's (a bug).

    A 2xx body that is not JSON (the SDK raises ``JSONDecodeError``) or not the API's shape
    (:class:`MalformedResponse`) is an error that is not retried: the server answered, wrongly.
    """
    if isinstance(exc, MalformedResponse):
        return Failure(False, None, str(exc))
    if isinstance(exc, json.JSONDecodeError):
        return Failure(False, None, "the response body is not valid JSON")
    if isinstance(exc, status_error):
        status = int(getattr(exc, "status_code", 0) or 0)
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
        msg = body_message(getattr(exc, "body", None)) or getattr(response, "reason_phrase", "") or "error"
        retryable = status in (408, 429) or status >= 500
        return Failure(retryable, status, f"HTTP {status}: {msg}", parse_retry_after(headers) if retryable else None)
    if isinstance(exc, timeout_error):
        return Failure(True, None, "request timed out")
    if isinstance(exc, connection_error):
        cause = exc.__cause__ or exc.__context__
        detail = f" ({type(cause).__name__}: {cause})" if cause is not None and str(cause) else ""
        return Failure(True, None, f"connection error{detail}")
    if isinstance(exc, sdk_error):
        return Failure(False, None, f"{type(exc).__name__}: {exc}")
    return None


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    classify: Callable[[BaseException], Failure | None],
    policy: RetryPolicy,
    label: str,
    secret: Secret | None = None,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> tuple[T, int, float]:
    """Run ``attempt`` under ``policy``; returns (result, attempts used, ms of the successful attempt)."""
    for n in range(1, policy.tries + 1):
        started = time.perf_counter()
        try:
            result = await attempt()
        except Exception as exc:  # noqa: BLE001 - classified below; unknown ones re-raised
            failure = classify(exc)
            if failure is None:
                raise
            if not failure.retryable or n == policy.tries:
                text = failure.message if secret is None else secret.scrub(failure.message)
                text = one_line(_BEARER.sub(r"\1***", text))
                tries = f" (after {n} tries)" if n > 1 else ""
                raise ProviderError(f"{label}: {text}{tries}", status=failure.status, attempts=n,
                                    retryable=failure.retryable) from None
            wait = policy.backoff(n)
            if failure.retry_after is not None:
                wait = max(wait, min(failure.retry_after, policy.max_retry_after_s))
            await sleep(wait)
            continue
        return result, n, (time.perf_counter() - started) * 1000
    raise AssertionError("unreachable")  # pragma: no cover
