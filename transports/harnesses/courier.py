"""The courier: a scripted fake Anthropic Messages server that a harness route starts *inside* the sandbox.

Why a standalone script
    It runs in the sandbox's own network namespace (loopback only), started by the route's launcher
    with ``python3 -I courier.py COMMAND_FILE LOG_FILE PORT_FILE``: no project import, stdlib only, so
    nothing of the host's Python path or environment reaches it. It binds 127.0.0.1 on an ephemeral
    port and writes the port to PORT_FILE (renamed into place, so the launcher never reads half a number).

Why it listens before its imports
    The launcher waits for the port before it starts the harness, and ``http.server`` takes about 30 ms to
    import, more than twice the interpreter's own start. So the script reads R, listens and writes the port first,
    then imports: the harness starts meanwhile, and a request it sends before the server is ready waits in
    the listen backlog. What it reads and writes is the same either way; only the wait moves.

What it answers (docs/harnesses.md; the wire formats measured in the harness survey)
    Anthropic Messages (``POST .../v1/messages``, Claude Code):

    * a request that offers the tool ``Bash`` and carries no ``tool_result`` yet: one ``tool_use`` of
      ``Bash`` with input ``{"command": R}``, R read byte-exact from COMMAND_FILE (UTF-8) and written
      with ``json.dumps``, so the harness's JSON parser gives back exactly R;
    * every other request (the tool result, a title or quota request without tools): a text reply,
      ``end_turn``;
    * streamed as SSE when the request says ``"stream": true``, else one JSON message;
    OpenAI Chat Completions (``POST .../v1/chat/completions``, non-streaming; mini-swe-agent through litellm):

    * a request that offers the function tool ``bash``: with no ``tool`` message yet, a tool call of ``bash``
      with arguments ``{"command": R}``; after it, a tool call of ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``,
      mini-swe-agent's way of ending its run.
    OpenAI Responses (``POST .../v1/responses``; Codex streams SSE, the Agents SDK does not):

    * a request that offers a shell tool (``exec_command``: Codex) with no ``function_call_output`` yet: one
      ``function_call`` with arguments ``{"cmd": R}`` (or the offered tool's own argument name); after it a
      text message that ends the turn.

    Gemini API (``POST .../v1beta/models/<model>:<method>``, Gemini CLI through the ``@google/genai`` SDK):

    * ``streamGenerateContent?alt=sse`` and ``generateContent``: a request that offers the function
      ``run_shell_command`` and carries no ``functionResponse`` yet gets the function call
      ``run_shell_command {"command": R}``; every later one a text part; both with ``finishReason`` STOP;
    * ``countTokens`` a count, any other method (Code Assist's ``/v1internal:loadCodeAssist``, ...) an empty
      object, each logged.

    Any other path: ``404`` with an error body.

What it never does
    It never sees the verdict and takes no part in ``received``, which the host reads from the kernel's
    exec trace. Its log (LOG_FILE: each request's path and body, each answer's kind, capped at
    :data:`LOG_CAP` bytes) is for debugging only: the command runs as the same user and can rewrite it.
"""

from __future__ import annotations

import os
import socket
import sys


def listen(command_file: str, port_file: str) -> tuple[str, socket.socket]:
    """R, read from ``command_file``, and a socket listening on 127.0.0.1 whose port is in ``port_file``."""
    with open(command_file, "rb") as fh:
        command = fh.read().decode("utf-8")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    with open(port_file + ".new", "w") as fh:
        fh.write(str(listener.getsockname()[1]))
    os.rename(port_file + ".new", port_file)
    return command, listener


# before the imports below (see "Why it listens before its imports"); None when imported as a module
EARLY = listen(sys.argv[1], sys.argv[3]) if __name__ == "__main__" and len(sys.argv) == 4 else None

import json  # noqa: E402
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402
from typing import Any  # noqa: E402

LOG_CAP = 64 * 1024
TOOL_ID = "toolu_01QuoteBenchCourier0001"
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


class Courier(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    r_command = ""  # not `command`: BaseHTTPRequestHandler sets that to the HTTP method
    log_path = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
        """Quiet: nothing on stderr (the route's stderr is the harness's)."""

    def note(self, text: str) -> None:
        """Append one line to the log, never past LOG_CAP bytes."""
        try:
            size = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
            data = (text.replace("\n", "\\n")[:4096] + "\n").encode("utf-8", "replace")
            if size + len(data) <= LOG_CAP:
                with open(self.log_path, "ab") as fh:
                    fh.write(data)
        except OSError:
            pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.note(f"GET {self.path}")
        self.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": "courier: no such path"}})

    def do_HEAD(self) -> None:  # noqa: N802
        self.send_json(200, {})

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        self.note(f"POST {self.path} {raw[:2048].decode('utf-8', 'replace')}")
        if self.path.split("?", 1)[0].endswith("/chat/completions"):
            self.chat(raw)
            return
        if "/models/" in self.path.split("?", 1)[0] or "/v1internal:" in self.path:  # Gemini API, Code Assist
            self.gemini(raw)
            return
        if self.path.split("?", 1)[0].endswith("/responses"):
            self.openai_responses(raw)
            return
        if not self.path.split("?", 1)[0].endswith("/v1/messages"):
            self.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": "courier: no such path"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        model = body.get("model") if isinstance(body.get("model"), str) else "claude-courier"
        tools = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
        results = [b for m in body.get("messages") or [] if isinstance(m, dict)
                   for b in (m.get("content") if isinstance(m.get("content"), list) else [])
                   if isinstance(b, dict) and b.get("type") == "tool_result"]
        answered = bool(results)
        for b in results:  # R's output as the harness reported it to the model
            self.note(result_line(b.get("content")))
        if "Bash" in tools and not answered:
            block: dict[str, Any] = {"type": "tool_use", "id": TOOL_ID, "name": "Bash", "input": {"command": self.r_command}}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": "Done."}
            stop = "end_turn"
        self.note(f"answer {stop}")
        if body.get("stream"):
            self.send_stream(model, block, stop)
        else:
            self.send_json(200, message(model, [block], stop))

    def chat(self, raw: bytes) -> None:
        """One Chat Completions answer: R as the ``bash`` tool call first, then the submit command."""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        model = body.get("model") if isinstance(body.get("model"), str) else "courier"
        results = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "tool"]
        answered = bool(results)
        for m in results:
            self.note(result_line(m.get("content")))
        command = SUBMIT if answered else self.r_command
        self.note(f"answer bash {'submit' if answered else 'R'}")
        call = {"id": "call_qb_1" if not answered else "call_qb_2", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": command})}}
        self.send_json(200, {"id": "chatcmpl-qb", "object": "chat.completion", "created": 0, "model": model,
                             "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                                 "role": "assistant", "content": "Running the command.", "tool_calls": [call]}}],
                             "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    # -- OpenAI Responses (Codex, the Agents SDK), a self-contained block (not `responses`: http.server's table) --

    def openai_responses(self, raw: bytes) -> None:
        """One Responses answer: the first request that offers a shell tool (``exec_command``, Codex's; else
        ``shell_command``, ``shell``, ``bash`` or ``run_shell_command``) and carries no ``function_call_output``
        yet gets one ``function_call`` with R under the offered tool's own argument name (``cmd`` for
        ``exec_command``, else ``command``/``cmd`` as its schema names it); every other request gets a text
        message that ends the turn. Streamed as SSE when the request says ``"stream": true`` (the events Codex
        0.171 reads: ``response.created``, ``response.output_item.added``/``.done``, ``response.completed``
        with usage; a stream without ``response.completed`` is an error to Codex), else one response object."""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        model = body.get("model") if isinstance(body.get("model"), str) else "courier"
        items = body.get("input") if isinstance(body.get("input"), list) else []
        results = [i for i in items if isinstance(i, dict)
                   and i.get("type") in ("function_call_output", "custom_tool_call_output")]
        for i in results:
            self.note(result_line(i.get('output')))
        tools = {t.get("name"): t for t in body.get("tools") or []
                 if isinstance(t, dict) and t.get("type", "function") == "function" and isinstance(t.get("name"), str)}
        name = next((n for n in self.RESPONSES_SHELL_TOOLS if n in tools), None)
        if name is not None and not results:
            props = (tools[name].get("parameters") or {}).get("properties") or {}
            key = "cmd" if name == "exec_command" or "cmd" in props else "command"
            value: Any = self.r_command
            if isinstance(props.get(key), dict) and props[key].get("type") == "array":
                value = ["bash", "-lc", self.r_command]  # a shell tool whose command is an argv (Codex's older `shell`)
            item: dict[str, Any] = {"type": "function_call", "id": "fc_qb_1", "call_id": "call_qb_1", "name": name,
                                    "arguments": json.dumps({key: value}), "status": "completed"}
            self.note(f"answer {name} R")
        else:
            item = {"type": "message", "id": "msg_qb_1", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}
            self.note("answer end_turn")
        done = self.responses_object(model, [item])
        if not body.get("stream"):
            self.send_json(200, done)
            return
        events = [{"type": "response.created", "sequence_number": 0,
                   "response": {**done, "status": "in_progress", "output": [], "usage": None}},
                  {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
                   "item": {**item, "status": "in_progress"}},
                  {"type": "response.output_item.done", "sequence_number": 2, "output_index": 0, "item": item},
                  {"type": "response.completed", "sequence_number": 3, "response": done}]
        self.send_events([(e["type"], e) for e in events])

    RESPONSES_SHELL_TOOLS = ("exec_command", "shell_command", "shell", "bash", "run_shell_command")
    """The shell tools a Responses request may offer, in the order the courier prefers them."""

    @staticmethod
    def responses_object(model: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        """A completed Responses object (the fields openai-python's ``Response`` and Codex read), with usage."""
        return {"id": "resp_qb_1", "object": "response", "created_at": 0, "status": "completed", "model": model,
                "output": output, "error": None, "incomplete_details": None, "instructions": None, "metadata": {},
                "parallel_tool_calls": False, "temperature": 1.0, "top_p": 1.0, "tool_choice": "auto", "tools": [],
                "usage": {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 1,
                          "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2}}

    def send_events(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        """Named SSE events (``event:`` and ``data:`` lines), as the Anthropic and OpenAI SDKs read them."""
        self.send_sse(b"".join(f"event: {name}\ndata: {json.dumps(doc)}\n\n".encode() for name, doc in events))

    def send_sse(self, data: bytes) -> None:
        """One whole event stream, sent at once with its length."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    # -- Gemini API (Gemini CLI 0.61.0, through the @google/genai SDK) ------------------------------------
    def gemini(self, raw: bytes) -> None:
        """``POST .../models/<model>:<method>``. ``streamGenerateContent`` (``?alt=sse``) and ``generateContent``:
        R as the function call ``run_shell_command {"command": R}`` to the first request that offers that
        function and carries no ``functionResponse`` yet, else a text part with ``finishReason`` STOP.
        ``countTokens`` gets a count; any other method (``loadCodeAssist`` and the like) an empty object. The SSE
        form is what the SDK's parser takes: ``data: <one-line JSON>`` events ended by a blank line, and no
        ``event:`` line (its pattern is anchored on ``data:``)."""
        method = self.path.split("?", 1)[0].rsplit(":", 1)[-1]
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        if method == "countTokens":
            self.note("answer countTokens")
            self.send_gemini({"totalTokens": 1})
            return
        if method not in ("generateContent", "streamGenerateContent"):
            self.note(f"answer {method} empty")
            self.send_gemini({})
            return
        functions = [f.get("name") for t in body.get("tools") or [] if isinstance(t, dict)
                     for f in t.get("functionDeclarations") or [] if isinstance(f, dict)]
        responses = [p["functionResponse"] for c in body.get("contents") or [] if isinstance(c, dict)
                     for p in (c.get("parts") if isinstance(c.get("parts"), list) else [])
                     if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)]
        for r in responses:  # R's output (or the harness's refusal) as the harness reported it to the model
            self.note(result_line(r.get('response')))
        if "run_shell_command" in functions and not responses:
            part: dict[str, Any] = {"functionCall": {"name": "run_shell_command", "args": {"command": self.r_command}}}
            self.note(f"answer {method} functionCall")
        else:
            part = {"text": "Done."}
            self.note(f"answer {method} text")
        doc = {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
               "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
               "modelVersion": "gemini-courier"}
        self.send_gemini(doc, sse=method == "streamGenerateContent")

    def send_gemini(self, doc: dict[str, Any], *, sse: bool = False) -> None:
        """One Gemini answer: JSON, or one SSE event (``data: `` + one line of JSON + a blank line)."""
        if not sse:
            self.send_json(200, doc)
            return
        self.send_sse(f"data: {json.dumps(doc)}\r\n\r\n".encode())

    def send_json(self, status: int, doc: dict[str, Any]) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_stream(self, model: str, block: dict[str, Any], stop: str) -> None:
        events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": message(model, [], None)})]
        if block["type"] == "tool_use":
            events += [("content_block_start", {"type": "content_block_start", "index": 0,
                                                "content_block": {**block, "input": {}}}),
                       ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
                           "type": "input_json_delta", "partial_json": json.dumps(block["input"])}})]
        else:
            events += [("content_block_start", {"type": "content_block_start", "index": 0,
                                                "content_block": {"type": "text", "text": ""}}),
                       ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                "delta": {"type": "text_delta", "text": block["text"]}})]
        events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
                   ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                      "usage": {"output_tokens": 1}}),
                   ("message_stop", {"type": "message_stop"})]
        self.send_events(events)


def result_line(content: Any) -> str:
    """The log line of one tool result: ``tool_result chars=N tail=JSON JSON``: N the length in characters of the
    text the harness reported (a string, or the ``text`` of a list of blocks) and its last 256 characters, taken
    before the log line is cut at 4 KiB, so a harness's output cap can be measured (``quotebench harness audit``)."""
    if isinstance(content, str):
        text = content
    elif isinstance(content, dict):  # Gemini's functionResponse.response: {"output": ...} or {"error": ...}
        text = next((v for v in (content.get("output"), content.get("error")) if isinstance(v, str)),
                    json.dumps(content))
    else:
        text = "".join(b["text"] for b in content or [] if isinstance(b, dict) and isinstance(b.get("text"), str))
    return f"tool_result chars={len(text)} tail={json.dumps(text[-256:])} {json.dumps(content)}"


def logged_result(line: str) -> Any:
    """The content of one ``tool_result`` log line (:func:`result_line`; also the older form without ``chars=``
    and ``tail=``). Raises ValueError when the line is not one, or was cut at 4 KiB inside its JSON."""
    if not line.startswith("tool_result "):
        raise ValueError("not a tool_result line")
    rest = line[len("tool_result "):]
    if rest.startswith("chars="):
        rest = rest.split(" ", 1)[1] if " " in rest else ""
    if rest.startswith("tail="):
        _, end = json.JSONDecoder().raw_decode(rest, len("tail="))
        rest = rest[end:].lstrip(" ")
    return json.loads(rest)


def message(model: str, content: list[dict[str, Any]], stop: str | None) -> dict[str, Any]:
    return {"id": "msg_01QuoteBenchCourier", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0}}


def main(argv: list[str]) -> int:
    command_file, log_file, port_file = argv
    Courier.r_command, listener = EARLY or listen(command_file, port_file)
    Courier.log_path = log_file
    server = ThreadingHTTPServer(("127.0.0.1", 0), Courier, bind_and_activate=False)
    server.socket.close()  # the unbound socket the constructor made: the server serves the one listening already
    server.socket = listener
    server.server_address = listener.getsockname()
    server.daemon_threads = True
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
