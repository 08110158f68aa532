"""The two wire formats a harness speaks to its model, as the recording proxy reads and writes them.

Anthropic Messages (Claude Code: ``POST /v1/messages``, SSE when ``"stream": true``) and OpenAI Chat
Completions (mini-swe-agent through litellm: ``POST /v1/chat/completions``, JSON, or SSE chunks when it
streams). Only what a harness run needs:

* :func:`classify`: which format, and whether the request is a turn of the agent's loop (it offers the shell
  tool) or an auxiliary request (a title, a quota probe), which is recorded but never counted as a turn;
* :func:`parse_reply`: the shell commands of a recorded response (the model's tool calls, in order), the
  other tool calls, the text, usage and stop reason; never raises on a hostile body;
* :func:`skeleton`: the part of a request that a replay compares (the tools offered, each earlier tool call
  and tool result; not the system prompt or reminder texts, which carry dates);
* :func:`render`: a response in the format asked for, for the scripted courier and for budget stops.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from transports.results.store import loads

SHELL_TOOLS = {"anthropic": "Bash", "chat": "bash"}
"""The name of the shell tool each format's harness offers: its calls are the run's steps."""


@dataclass
class Reply:
    commands: list[str | None] = field(default_factory=list)
    """The shell tool calls' ``command``, in order (None where the arguments had none)."""
    other_tools: list[str] = field(default_factory=list)
    text: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    stop: str | None = None


def _json(data: bytes | str) -> Any:
    try:
        return loads(data)
    except (ValueError, RecursionError):
        return None


def classify(path: str, body: bytes) -> tuple[str | None, bool, bool]:
    """(format, is a loop turn, asks to stream) of a request; format None for a path neither format has."""
    route = path.split("?", 1)[0]
    doc = _json(body) if body else None
    doc = doc if isinstance(doc, dict) else {}
    tools = [t for t in doc.get("tools") or [] if isinstance(t, dict)]
    stream = doc.get("stream") is True
    if route.endswith("/messages") or route.endswith("/messages/count_tokens"):  # counting is never a turn
        bash = any(t.get("name") == SHELL_TOOLS["anthropic"] for t in tools)
        return "anthropic", bash and route.endswith("/messages"), stream
    if route.endswith("/chat/completions"):
        names = [(t.get("function") or {}).get("name") if isinstance(t.get("function"), dict) else None for t in tools]
        return "chat", SHELL_TOOLS["chat"] in names, stream
    return None, False, stream


def _command(args: Any) -> str | None:
    doc = _json(args) if isinstance(args, str) else args
    return doc.get("command") if isinstance(doc, dict) and isinstance(doc.get("command"), str) else None


def _sse(body: bytes) -> list[Any]:
    events = []
    for line in body.decode("utf-8", "replace").splitlines():
        if line.startswith("data:") and (data := line[5:].strip()) and data != "[DONE]":
            events.append(_json(data))
    return [e for e in events if isinstance(e, dict)]


def parse_reply(fmt: str, body: bytes) -> Reply:
    """The tool calls, text, usage and stop of a response body (JSON or SSE)."""
    r = Reply()
    stripped = body.lstrip()
    is_sse = not stripped.startswith(b"{")
    if fmt == "anthropic":
        blocks: dict[int, dict[str, Any]] = {}
        if is_sse:
            for e in _sse(body):
                kind, idx = e.get("type"), e.get("index") if isinstance(e.get("index"), int) else -1
                if kind == "message_start" and isinstance(e.get("message"), dict):
                    u = e["message"].get("usage") or {}
                    r.input_tokens = u.get("input_tokens") if isinstance(u.get("input_tokens"), int) else None
                elif kind == "content_block_start" and isinstance(e.get("content_block"), dict):
                    blocks[idx] = {**e["content_block"], "json": "", "text": e["content_block"].get("text") or ""}
                elif kind == "content_block_delta" and idx in blocks and isinstance(e.get("delta"), dict):
                    d = e["delta"]
                    if isinstance(d.get("partial_json"), str):
                        blocks[idx]["json"] += d["partial_json"]
                    if isinstance(d.get("text"), str):
                        blocks[idx]["text"] += d["text"]
                elif kind == "message_delta":
                    d, u = e.get("delta") or {}, e.get("usage") or {}
                    r.stop = d.get("stop_reason") if isinstance(d, dict) else None
                    r.output_tokens = u.get("output_tokens") if isinstance(u, dict) else None
            content = [{**b, "input": _json(b["json"]) if b["json"] else b.get("input")} for _, b in sorted(blocks.items())]
        else:
            doc = _json(body)
            doc = doc if isinstance(doc, dict) else {}
            content = [b for b in doc.get("content") or [] if isinstance(b, dict)]
            u = doc.get("usage") if isinstance(doc.get("usage"), dict) else {}
            r.input_tokens, r.output_tokens, r.stop = u.get("input_tokens"), u.get("output_tokens"), doc.get("stop_reason")
        for b in content:
            if b.get("type") == "tool_use":
                if b.get("name") == SHELL_TOOLS["anthropic"]:
                    r.commands.append(_command(b.get("input")))
                else:
                    r.other_tools.append(str(b.get("name")))
            elif b.get("type") == "text" and isinstance(b.get("text"), str):
                r.text += b["text"]
        return r
    calls: dict[int, dict[str, str]] = {}
    if is_sse:
        for e in _sse(body):
            for ch in e.get("choices") or []:
                delta = ch.get("delta") if isinstance(ch, dict) else None
                if not isinstance(delta, dict):
                    continue
                r.text += delta.get("content") or "" if isinstance(delta.get("content") or "", str) else ""
                r.stop = ch.get("finish_reason") or r.stop
                for tc in delta.get("tool_calls") or []:
                    if isinstance(tc, dict):
                        c = calls.setdefault(tc.get("index", len(calls)), {"name": "", "arguments": ""})
                        f = tc.get("function") if isinstance(tc.get("function"), dict) else {}
                        c["name"] += f.get("name") or ""
                        c["arguments"] += f.get("arguments") or ""
            if isinstance(e.get("usage"), dict):
                r.input_tokens, r.output_tokens = e["usage"].get("prompt_tokens"), e["usage"].get("completion_tokens")
        ordered = [c for _, c in sorted(calls.items(), key=lambda kv: str(kv[0]))]
    else:
        doc = _json(body)
        doc = doc if isinstance(doc, dict) else {}
        choice = (doc.get("choices") or [{}])[0]
        msg = choice.get("message") if isinstance(choice, dict) and isinstance(choice.get("message"), dict) else {}
        r.text = msg.get("content") if isinstance(msg.get("content"), str) else ""
        r.stop = choice.get("finish_reason") if isinstance(choice, dict) else None
        u = doc.get("usage") if isinstance(doc.get("usage"), dict) else {}
        r.input_tokens, r.output_tokens = u.get("prompt_tokens"), u.get("completion_tokens")
        ordered = [{"name": str((tc.get("function") or {}).get("name")), "arguments": (tc.get("function") or {}).get("arguments")}
                   for tc in msg.get("tool_calls") or [] if isinstance(tc, dict) and isinstance(tc.get("function"), dict)]
    for c in ordered:
        if c["name"] == SHELL_TOOLS["chat"]:
            r.commands.append(_command(c["arguments"]))
        else:
            r.other_tools.append(c["name"])
    r.input_tokens = r.input_tokens if isinstance(r.input_tokens, int) else None
    r.output_tokens = r.output_tokens if isinstance(r.output_tokens, int) else None
    return r


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def skeleton(fmt: str, body: bytes) -> list[str]:
    """What a replay compares of a request: the tools offered (names, sorted), then each tool call and tool
    result of the conversation so far, in order. Texts (the system prompt, reminders with the date) are out."""
    doc = _json(body)
    doc = doc if isinstance(doc, dict) else {}
    tools = [t for t in doc.get("tools") or [] if isinstance(t, dict)]
    names = sorted(str(t.get("name") or (t.get("function") or {}).get("name")) for t in tools)
    out = ["tools:" + ",".join(names)]
    for m in doc.get("messages") or []:
        if not isinstance(m, dict):
            continue
        if fmt == "anthropic":
            for b in m.get("content") if isinstance(m.get("content"), list) else []:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    out.append(f"call:{b.get('name')}:{json.dumps(b.get('input'), sort_keys=True)}")
                elif isinstance(b, dict) and b.get("type") == "tool_result":
                    out.append("result:" + _result_text(b.get("content")))
        else:
            for tc in m.get("tool_calls") or []:
                f = tc.get("function") if isinstance(tc, dict) and isinstance(tc.get("function"), dict) else {}
                out.append(f"call:{f.get('name')}:{f.get('arguments')}")
            if m.get("role") == "tool":
                out.append("result:" + _result_text(m.get("content")))
    return out


def render(fmt: str, stream: bool, model: str, commands: list[str], text: str, turn: int) -> tuple[bytes, str]:
    """A response carrying ``text`` and one shell tool call per command (none: the end of the turn), as
    ``fmt`` writes it, streamed when asked; (body, content type). Usage is zero: nothing was generated."""
    if fmt == "chat":
        calls = [{"id": f"call_qb_{turn}_{i}", "type": "function",
                  "function": {"name": SHELL_TOOLS["chat"], "arguments": json.dumps({"command": c})}}
                 for i, c in enumerate(commands)]
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = calls
        doc = {"id": f"chatcmpl-qb-{turn}", "object": "chat.completion", "created": 0, "model": model,
               "choices": [{"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": message}],
               "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}
        return json.dumps(doc).encode(), "application/json"
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks += [{"type": "tool_use", "id": f"toolu_qb_{turn}_{i}", "name": SHELL_TOOLS["anthropic"],
                "input": {"command": c}} for i, c in enumerate(commands)]
    stop = "tool_use" if commands else "end_turn"
    usage = {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    msg = {"id": f"msg_qb_{turn}", "type": "message", "role": "assistant", "model": model, "content": blocks,
           "stop_reason": stop, "stop_sequence": None, "usage": usage}
    if not stream:
        return json.dumps(msg).encode(), "application/json"
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": {**msg, "content": [], "stop_reason": None}})]
    for i, b in enumerate(blocks):
        if b["type"] == "tool_use":
            events += [("content_block_start", {"type": "content_block_start", "index": i,
                                                "content_block": {**b, "input": {}}}),
                       ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {
                           "type": "input_json_delta", "partial_json": json.dumps(b["input"])}})]
        else:
            events += [("content_block_start", {"type": "content_block_start", "index": i,
                                                "content_block": {"type": "text", "text": ""}}),
                       ("content_block_delta", {"type": "content_block_delta", "index": i,
                                                "delta": {"type": "text_delta", "text": b["text"]}})]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                  "usage": {"output_tokens": 0}}),
               ("message_stop", {"type": "message_stop"})]
    return b"".join(f"event: {n}\ndata: {json.dumps(d)}\n\n".encode() for n, d in events), "text/event-stream"
