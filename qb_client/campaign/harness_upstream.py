"""Who answers a harness's requests behind the recording proxy: a provider, the scripted courier, or a replay.

All three sit behind the same proxy (:mod:`qb_client.campaign.harness_proxy`), so the dry run with the courier
exercises the very path a paid run takes: the relay, the socket, the recording, the budgets, the store.

* :class:`ProviderUpstream` forwards the request to the provider (Anthropic, OpenAI, or an OpenAI-compatible
  base URL such as vLLM or Ollama), with only the headers the format needs and the key added here; the
  response is streamed back chunk by chunk as it arrives.
* :class:`ScriptUpstream` is the courier: a fixed script of tool calls per turn (:mod:`.harness_script`),
  rendered in the format the harness asked for. It never looks at the tool results, so a run is
  deterministic, and it never sees the verdict.
* :class:`ReplayUpstream` answers from a recorded run's stored responses, matched by (kind, index): loop turns
  by turn, auxiliary requests by their own count. It compares each loop request's skeleton with the recorded
  one and keeps the first difference of each turn (``divergences``, with ``what`` differs: ``tools`` offered,
  a ``call`` the harness sent back, a tool ``result``, or ``beyond`` the recording): a different harness
  version shows where its requests part from the recorded ones. A ``result`` alone can also be the task's
  own nondeterminism (a git commit's hash holds the time), not the harness's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from .harness_proxy import SUBMIT, Answer, Request, stop_answer
from .harness_wire import render, skeleton

FORWARD_HEADERS = ("anthropic-version", "anthropic-beta", "accept")
"""The only request headers passed on (besides the key and content type added here): whatever else the
harness sends (its dummy key, its user agent, a forged header) stays in the sandbox."""
DEFAULT_BASE = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com"}


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


def join_url(base: str, path: str) -> str:
    """``base`` + the harness's path, without doubling a ``/v1`` the base already ends with."""
    base = base.rstrip("/")
    if base.endswith("/v1") and path.startswith("/v1/"):
        return base + path[3:]
    return base + path


class ProviderUpstream:
    """The provider itself: ``kind`` is ``anthropic`` (``x-api-key``) or ``openai`` (``Authorization: Bearer``)."""

    def __init__(self, kind: str, model: str, key: str | None, base_url: str | None = None,
                 timeout_s: float = 600.0) -> None:
        import httpx

        self.kind, self.model, self.key = kind, model, key
        self.base = base_url or DEFAULT_BASE[kind]
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s, connect=30.0), follow_redirects=False,
                                        trust_env=True)

    async def answer(self, request: Request) -> Answer:
        headers = {k: v for k, v in request.headers.items() if k in FORWARD_HEADERS}
        headers["content-type"] = "application/json"
        headers["accept-encoding"] = "identity"
        if self.key:
            if self.kind == "anthropic":
                headers["x-api-key"] = self.key
                headers.setdefault("anthropic-version", "2023-06-01")
            else:
                headers["authorization"] = f"Bearer {self.key}"
        req = self.client.build_request("POST", join_url(self.base, request.path), content=request.body,
                                        headers=headers)
        response = await self.client.send(req, stream=True)

        async def chunks() -> AsyncIterator[bytes]:
            try:
                async for data in response.aiter_raw():
                    yield data
            finally:
                await response.aclose()

        return Answer(response.status_code, response.headers.get("content-type", "application/json"), chunks())

    async def aclose(self) -> None:
        await self.client.aclose()


class ScriptUpstream:
    """The courier behind the proxy: turn k answers ``script[k]`` (a list of shell commands, one tool call
    each; an empty list, or a turn past the script, ends the run: text for Messages, mini-swe-agent's submit
    command for Chat Completions)."""

    def __init__(self, script: list[list[str]], model: str = "courier") -> None:
        self.script, self.model = script, model

    async def answer(self, request: Request) -> Answer:
        assert request.fmt is not None
        if not request.loop:
            body, ctype = render(request.fmt, request.stream, self.model, [], "Done.", request.index)
            return Answer(200, ctype, _once(body))
        turn = request.turn or 0
        commands = self.script[turn] if turn < len(self.script) else []
        if not commands:
            end = [SUBMIT] if request.fmt == "chat" else []  # mini-swe-agent ends only on its submit command
            body, ctype = render(request.fmt, request.stream, self.model, end, "Done.", turn)
            return Answer(200, ctype, _once(body))
        body, ctype = render(request.fmt, request.stream, self.model, commands, "Running a command.", turn)
        return Answer(200, ctype, _once(body))


@dataclass
class ReplayUpstream:
    """A recorded run's responses, by (kind, index); the divergences of the harness's requests, by turn."""

    exchanges: list[dict[str, Any]]
    model: str = "replay"
    attempt: str | None = None
    divergences: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.by_key = {(e.get("kind"), e.get("index")): e for e in self.exchanges}

    async def answer(self, request: Request) -> Answer:
        assert request.fmt is not None
        stored = self.by_key.get((request.kind, request.index))
        if request.loop:
            if stored is None:
                self.divergences.append({"turn": request.turn, "at": None, "what": "beyond", "recorded": None,
                                         "now": "a loop request past the recorded run"})
                return stop_answer(request.fmt, request.stream, self.model, request.turn or 0, "recording")
            now, then = skeleton(request.fmt, request.body), stored.get("skeleton") or []
            now = [s[:4096] for s in now]
            if now != then:
                at = next((i for i, (a, b) in enumerate(zip(then, now)) if a != b), min(len(then), len(now)))
                seen = then[at] if at < len(then) else now[at] if at < len(now) else ""
                self.divergences.append({"turn": request.turn, "at": at, "what": seen.split(":", 1)[0] or "length",
                                         "recorded": then[at][:300] if at < len(then) else None,
                                         "now": now[at][:300] if at < len(now) else None})
        if stored is None:  # an auxiliary request the recording did not have (they race): a plain end of turn
            body, ctype = render(request.fmt, request.stream, self.model, [], "Done.", request.index)
            return Answer(200, ctype, _once(body))
        return Answer(int(stored.get("status") or 200), str(stored.get("content_type") or "application/json"),
                      _once(str(stored.get("response") or "").encode("utf-8")))
