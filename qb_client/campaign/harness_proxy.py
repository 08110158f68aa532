"""The recording proxy: the host side of a harness run's only way out of its sandbox.

Why on the host, behind a Unix socket
    The harness is hostile input: it runs the model's commands as its own user. So the provider's key must
    never be where it can read it. The proxy runs in the quotebench process on the host and listens on a Unix
    socket in a fresh host directory that is bound read-only into the sandbox; inside, the stdlib relay
    (:mod:`transports.harnesses.relay`) listens on 127.0.0.1 and copies bytes to the socket. The sandbox keeps
    its own network namespace (loopback only): the socket is reached through the file system, and it is the
    one door. The harness is given a dummy key; the proxy drops every header it sent but the few the format
    needs and adds the real key itself (:mod:`qb_client.campaign.harness_upstream`).

What it records
    Every request and response, as an :class:`Exchange`: its place (``kind`` ``loop`` for a turn of the agent's
    loop, a request offering the shell tool, numbered by ``turn``; ``aux`` for anything else, numbered apart),
    the request body and the response body (each capped: :data:`REQUEST_STORE_CAP`, :data:`RESPONSE_CAP`; the
    harness never gets more of a response than is stored, so a replay gives it the same bytes), the status,
    the time, and the request's skeleton (what a replay compares). The key is scrubbed from everything stored
    and from every byte sent back into the sandbox, whatever the provider echoes.

Who is asking
    Each exchange keeps the connecting process's pid as the kernel reports it (``SO_PEERCRED``). The first
    process to ask is pinned as the relay (no command can run before the model's first answer); a request
    from any other process gets 403, takes no turn and goes nowhere, and is recorded as ``foreign``. After
    the run the pin is checked against the relay the launcher started, from the exec trace
    (:mod:`qb_client.campaign.harness_run`): if they differ, every exchange is foreign and no step counts.

Bounds
    At most :data:`MAX_CONNECTIONS` connections at once. A request: its head within :data:`HEAD_CAP` bytes and :data:`READ_TIMEOUT_S`, a ``content-length`` body (no
    chunked upload) of at most :data:`REQUEST_CAP` bytes; at most :data:`MAX_EXCHANGES` exchanges per run; one
    answer within the upstream's timeout. The budgets (turns, tokens) are checked before a loop turn goes
    upstream: past one, the proxy answers itself with the end of the run (``synthetic``), and says which.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import socket
import struct
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .harness_wire import classify, parse_reply, render, skeleton

HEAD_CAP = 64 * 1024
REQUEST_CAP = 16 * 1024 * 1024
REQUEST_STORE_CAP = 2 * 1024 * 1024
RESPONSE_CAP = 8 * 1024 * 1024
READ_TIMEOUT_S = 30.0
MAX_EXCHANGES = 400
MAX_CONNECTIONS = 32
SKELETON_ITEM_CAP = 4096
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
"""mini-swe-agent's own way of ending its run: what a budget stop answers on Chat Completions."""


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    fmt: str | None
    loop: bool
    stream: bool
    kind: str
    index: int
    turn: int | None


@dataclass
class Answer:
    status: int
    content_type: str
    chunks: AsyncIterator[bytes]


class Upstream(Protocol):
    """Who answers: a provider (the key added here), the scripted courier, or a replay."""

    model: str

    async def answer(self, request: Request) -> Answer: ...


@dataclass
class Budget:
    max_turns: int = 30
    max_tokens: int | None = None


@dataclass
class Exchange:
    fmt: str | None
    kind: str
    index: int
    turn: int | None
    method: str
    path: str
    request: str
    request_truncated: bool
    status: int
    content_type: str
    response: str
    response_truncated: bool
    ms: float
    skeleton: list[str] = field(default_factory=list)
    synthetic: str | None = None
    """Set when the proxy answered itself: ``turns`` or ``tokens`` (a budget spent)."""
    error: str | None = None
    peer_pid: int | None = None
    """The connecting process as the kernel names it (``SO_PEERCRED``): the relay's pid, or someone else's."""
    foreign: bool = False
    """Set after the run when the request did not come through the relay the launcher started."""

    def dump(self) -> dict[str, Any]:
        return asdict(self)


class Scrubber:
    """Replaces the key in a byte stream, across chunk boundaries (it holds back len(key) - 1 bytes)."""

    def __init__(self, secret: str | None) -> None:
        self.secret = secret.encode() if secret else b""
        self.held = b""

    def feed(self, data: bytes) -> bytes:
        if not self.secret:
            return data
        buf = (self.held + data).replace(self.secret, b"[key]")
        keep = len(self.secret) - 1
        if keep <= 0:
            self.held = b""
            return buf
        if len(buf) <= keep:
            self.held = buf
            return b""
        self.held = buf[-keep:]
        return buf[:-keep]

    def end(self) -> bytes:
        out, self.held = self.held, b""
        return out


def scrub(text: str, secret: str | None) -> str:
    return text.replace(secret, "[key]") if secret else text


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


def stop_answer(fmt: str, stream: bool, model: str, turn: int, why: str) -> Answer:
    """The proxy's own end of the run (a budget spent): end of turn, or mini-swe-agent's submit command."""
    text = f"quotebench: the {why} budget is spent; the run ends here."
    body, ctype = render(fmt, stream, model, [SUBMIT] if fmt == "chat" else [], text, turn)
    return Answer(200, ctype, _once(body))


class RecordingProxy:
    """One harness run's proxy: serves on ``<dir>/proxy.sock`` while ``serving()`` is open."""

    def __init__(self, upstream: Upstream, budget: Budget, secret: str | None = None) -> None:
        self.upstream = upstream
        self.budget = budget
        self.secret = secret
        self.exchanges: list[Exchange] = []
        self.counts = {"loop": 0, "aux": 0}
        self.tokens = 0
        self.stop: str | None = None
        self.pinned: int | None = None
        """The first process to ask: the relay (no command runs before the model's first answer)."""
        self._lock = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[Path]:
        """A fresh host directory with the socket in it (the caller binds it into the sandbox); closed after."""
        where = Path(tempfile.mkdtemp(prefix="qb-proxy-"))
        where.chmod(0o755)
        sock = where / "proxy.sock"
        server = await asyncio.start_unix_server(self._handle, path=str(sock), limit=HEAD_CAP)
        os.chmod(sock, 0o666)  # the sandbox's dropped uid connects too
        tasks: set[asyncio.Task[Any]] = set()
        self._tasks = tasks
        try:
            yield where
        finally:
            server.close()
            for t in list(tasks):
                t.cancel()
            with contextlib.suppress(Exception):
                await server.wait_closed()
            with contextlib.suppress(OSError):
                sock.unlink()
            with contextlib.suppress(OSError):
                where.rmdir()

    # -- one connection: one request ---------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        except (asyncio.CancelledError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                TimeoutError, ValueError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()
            if task is not None:
                self._tasks.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._tasks) > MAX_CONNECTIONS:
            return
        sock = writer.get_extra_info("socket")
        peer: int | None
        try:
            peer = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[0]
        except (OSError, AttributeError, struct.error):
            peer = None
        while True:  # keep-alive: one request after the other on the connection
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            except asyncio.IncompleteReadError:
                return
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
                await self._plain(writer, 400, "bad request line")
                return
            method, path = parts[0], parts[1]
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            if "chunked" in headers.get("transfer-encoding", "").lower():
                await self._plain(writer, 411, "a chunked request body is not accepted; send content-length")
                return
            try:
                length = int(headers.get("content-length") or 0)
            except ValueError:
                length = -1
            if length < 0 or length > REQUEST_CAP:
                await self._plain(writer, 413, f"the request body must be 0 to {REQUEST_CAP} bytes")
                return
            body = await asyncio.wait_for(reader.readexactly(length), READ_TIMEOUT_S) if length else b""
            await self._exchange(method, path, headers, body, writer, peer)
            if headers.get("connection", "").lower() == "close":
                return

    async def _plain(self, writer: asyncio.StreamWriter, status: int, text: str) -> None:
        data = json.dumps({"type": "error", "error": {"type": "proxy_error", "message": f"quotebench proxy: {text}"}}).encode()
        writer.write(f"HTTP/1.1 {status} Error\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n"
                     "connection: close\r\n\r\n".encode() + data)
        await writer.drain()

    async def _exchange(self, method: str, path: str, headers: dict[str, str], body: bytes,
                        writer: asyncio.StreamWriter, peer: int | None) -> None:
        start = time.perf_counter()
        fmt, loop, stream = classify(path, body)
        synthetic: str | None = None
        if self.pinned is None:
            self.pinned = peer
        if peer is None or peer != self.pinned:  # not the relay: answered nothing, counted as nothing
            await self._plain(writer, 403, "only the harness's relay may ask")
            async with self._lock:
                self.exchanges.append(Exchange(fmt, "foreign", len(self.exchanges), None, method, path.split("?", 1)[0],
                                               scrub(body[:4096].decode("utf-8", "replace"), self.secret),
                                               len(body) > 4096, 403, "", "", False, 0.0, peer_pid=peer, foreign=True))
            raise ConnectionResetError  # closes the connection
        async with self._lock:
            if len(self.exchanges) + 1 > MAX_EXCHANGES:
                await self._plain(writer, 429, f"more than {MAX_EXCHANGES} requests in one run")
                return
            kind = "loop" if loop else "aux"
            index = self.counts[kind]
            self.counts[kind] += 1
            turn = index if loop else None
            if loop and fmt is not None and self.stop is None:
                if index >= self.budget.max_turns:
                    self.stop = synthetic = "turns"
                elif self.budget.max_tokens is not None and self.tokens >= self.budget.max_tokens:
                    self.stop = synthetic = "tokens"
            elif loop and fmt is not None and self.stop is not None:
                synthetic = self.stop
        request = Request(method, path, headers, body, fmt, loop, stream, kind, index, turn)
        error = None
        if fmt is None or method != "POST":
            answer = Answer(404, "application/json", _once(json.dumps(
                {"type": "error", "error": {"type": "not_found_error", "message": "quotebench proxy: no such path"}}).encode()))
        elif synthetic is not None:
            answer = stop_answer(fmt, stream, self.upstream.model, index, f"{synthetic}")
        else:
            try:
                answer = await self.upstream.answer(request)
            except Exception as e:  # noqa: BLE001 - the harness gets an error, the exchange says why
                error = scrub(f"{type(e).__name__}: {e}", self.secret).splitlines()[0][:500] if str(e) else type(e).__name__
                answer = Answer(502, "application/json", _once(json.dumps(
                    {"type": "error", "error": {"type": "api_error", "message": f"quotebench proxy: {error}"}}).encode()))
        if method == "HEAD":  # a reachability probe (Claude Code sends one): a head, never a body
            writer.write(f"HTTP/1.1 {answer.status} OK\r\ncontent-length: 0\r\n\r\n".encode())
            await writer.drain()
            async with self._lock:
                self.exchanges.append(Exchange(fmt, kind, index, turn, method, path.split("?", 1)[0], "", False,
                                               answer.status, "", "", False, 0.0, peer_pid=peer))
            return
        writer.write(f"HTTP/1.1 {answer.status} OK\r\ncontent-type: {answer.content_type}\r\n"
                     "transfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n".encode())
        scrubber, kept, truncated = Scrubber(self.secret), bytearray(), False
        try:
            async for chunk in answer.chunks:
                data = scrubber.feed(chunk)
                room = RESPONSE_CAP - len(kept)
                if len(data) > room:
                    data, truncated = data[:room], True
                kept += data
                if data:
                    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    await writer.drain()
                if truncated:
                    break
        except Exception as e:  # noqa: BLE001 - a stream cut upstream: the harness sees the cut, the exchange says why
            error = scrub(f"{type(e).__name__}: {e}", self.secret).splitlines()[0][:500] if str(e) else type(e).__name__
        tail = scrubber.end()[: max(0, RESPONSE_CAP - len(kept))]
        if tail:
            kept += tail
            writer.write(f"{len(tail):x}\r\n".encode() + tail + b"\r\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        text = scrub(body[:REQUEST_STORE_CAP].decode("utf-8", "replace"), self.secret)
        skel = [scrub(s[:SKELETON_ITEM_CAP], self.secret) for s in skeleton(fmt, body)] if fmt and loop else []
        ex = Exchange(fmt, kind, index, turn, method, path.split("?", 1)[0], text,
                      len(body) > REQUEST_STORE_CAP, answer.status, answer.content_type,
                      bytes(kept).decode("utf-8", "replace"), truncated, round((time.perf_counter() - start) * 1000, 3),
                      skel, synthetic, error, peer)
        if loop and fmt is not None and answer.status == 200:
            reply = parse_reply(fmt, bytes(kept))
            self.tokens += (reply.input_tokens or 0) + (reply.output_tokens or 0)
        async with self._lock:
            self.exchanges.append(ex)


def digest(items: list[str]) -> str:
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()[:16]
