"""A scripted local LLM server speaking the Messages, Responses and Chat Completions wire formats.

Shared by the provider and campaign tests: it records every request it sees (path,
headers, JSON body) and answers from a per-test script or a ``responder`` function,
so tests assert on what went over the wire and on what came back. Loopback only.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

# ---------------------------------------------------------------- the scripted server


@dataclass
class Scripted:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class FakeServer:
    def __init__(self) -> None:
        self.url = ""
        self.seen: list[Seen] = []
        self.script: list[Scripted] = []
        self.forever: Scripted | None = None
        self.responder: Callable[[Seen], Scripted] | None = None
        self.lock = threading.Lock()

    def reset(self) -> None:
        with self.lock:
            self.seen, self.script, self.forever, self.responder = [], [], None, None

    def queue(self, *replies: Scripted) -> None:
        with self.lock:
            self.script.extend(replies)

    def next(self) -> Scripted:
        with self.lock:
            if self.script:
                return self.script.pop(0)
            if self.forever is not None:
                return self.forever
        return Scripted(599, {"error": {"message": "the test scripted no reply"}})

    async def endpoint(self, request: Request) -> Response:
        raw = await request.body()
        seen = Seen(request.url.path, dict(request.headers), json.loads(raw))
        with self.lock:
            self.seen.append(seen)
        reply = self.responder(seen) if self.responder else self.next()
        if reply.delay:
            await asyncio.sleep(reply.delay)
        content = reply.body if isinstance(reply.body, (str, bytes)) else json.dumps(reply.body)
        return Response(content, status_code=reply.status, headers=reply.headers, media_type="application/json")


def running_fake_server() -> Iterator[FakeServer]:
    """Start a FakeServer on a free loopback port in a thread; stop it when the generator closes."""
    fake = FakeServer()
    app = Starlette(routes=[Route("/{path:path}", fake.endpoint, methods=["POST"])])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    fake.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.started, "fake server did not start"
    yield fake
    server.should_exit = True
    thread.join(5)
    sock.close()


# ---------------------------------------------------------------- wire-format bodies


def usage_for(kind: str, inp: int = 11, out: int = 22, reasoning: int | None = None) -> dict[str, Any]:
    if kind == "anthropic":
        u: dict[str, Any] = {"input_tokens": inp, "output_tokens": out}
        if reasoning is not None:
            u["output_tokens_details"] = {"thinking_tokens": reasoning}
        return u
    if kind == "openai":
        return {"input_tokens": inp, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": out,
                "output_tokens_details": {"reasoning_tokens": reasoning or 0}, "total_tokens": inp + out}
    u = {"prompt_tokens": inp, "completion_tokens": out, "total_tokens": inp + out}
    if reasoning is not None:
        u["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return u


def body_for(kind: str, text: str | None = None, calls: list[Any] | None = None,
             thinking: str | None = None, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    """A complete non-streaming response. ``calls``: arguments strings (OpenAI) or input objects (Anthropic)."""
    calls = calls or []
    if kind == "anthropic":
        content: list[dict[str, Any]] = []
        if thinking is not None:
            content += [{"type": "thinking", "thinking": thinking, "signature": "sig"},
                        {"type": "redacted_thinking", "data": "opaque"}]
        if text is not None:
            content.append({"type": "text", "text": text})
        content += [{"type": "tool_use", "id": f"toolu_{i}", "name": "bash", "input": c} for i, c in enumerate(calls)]
        return {"id": "msg_1", "type": "message", "role": "assistant", "model": "test-model", "content": content,
                "stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None,
                "usage": usage or usage_for(kind)}
    if kind == "openai":
        output: list[dict[str, Any]] = []
        if thinking is not None:
            output.append({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": thinking}]})
        if text is not None:
            output.append({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                           "content": [{"type": "output_text", "text": text, "annotations": []}]})
        output += [{"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": "bash",
                    "arguments": c, "status": "completed"} for i, c in enumerate(calls)]
        return {"id": "resp_1", "object": "response", "created_at": 0, "model": "test-model", "status": "completed",
                "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
                "usage": usage or usage_for(kind)}
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if thinking is not None:
        message["reasoning_content"] = thinking
    if calls:
        message["tool_calls"] = [{"id": f"call_{i}", "type": "function", "function": {"name": "bash", "arguments": c}}
                                 for i, c in enumerate(calls)]
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "test-model",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": usage or usage_for(kind)}


def call_for(kind: str, command: Any, ensure_ascii: bool = True) -> Any:
    args = {"command": command}
    return args if kind == "anthropic" else json.dumps(args, ensure_ascii=ensure_ascii)


def error_body(message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": "api_error", "message": message}}
