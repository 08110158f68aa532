"""Streamable HTTP serving: where it may listen, who may talk to it.

The server runs arbitrary commands, so it listens on loopback unless the user
says otherwise twice: ``allow_remote`` and a bearer token. The token is checked
in constant time before the MCP app sees the request. The socket is bound here
(port 0 picks a free port) and the real address is printed to stderr, which is
how a test or a harness learns the port without racing for it.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import signal
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import anyio
import anyio.abc
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from .budget import size_text
from .server import QBServer


GRACEFUL_SHUTDOWN_S = 3.0
"""How long a SIGTERM waits for open HTTP connections before they are closed and every session is ended."""


@dataclass(frozen=True)
class Bind:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        return _is_loopback(self.host)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_bind(spec: str) -> Bind:
    """``HOST:PORT``, ``[IPV6]:PORT`` or ``:PORT`` (loopback); a one-line ``ValueError`` otherwise."""
    host, sep, port = spec.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--http '{spec}': expected HOST:PORT, e.g. 127.0.0.1:8765")
    host = host.strip("[]") or "127.0.0.1"
    return Bind(host, int(port))


def check_bind(spec: str, allow_remote: bool, token: str | None) -> Bind:
    """Refuse a non-loopback address unless remote access is allowed and protected by a token."""
    bind = parse_bind(spec)
    if allow_remote and not token:
        raise ValueError("--allow-remote needs a bearer token (--token): an open remote shell is refused")
    if not bind.loopback and not allow_remote:
        raise ValueError(f"--http '{spec}' is not a loopback address; remote access needs --allow-remote and --token")
    return bind


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            got = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(got, self.expected):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": b"missing or wrong bearer token\n"})
                return
        await self.app(scope, receive, send)


def _security(bind: Bind) -> TransportSecuritySettings:
    """DNS-rebinding protection on loopback (a browser must not reach the shell); remote relies on the token."""
    if not bind.loopback:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    host = f"[{bind.host}]" if ":" in bind.host else bind.host
    hosts = sorted({f"{host}:*", "127.0.0.1:*", "localhost:*", "[::1]:*"})
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=[f"http://{h}" for h in hosts])


def _listen(bind: Bind) -> socket.socket:
    family = socket.AF_INET6 if ":" in bind.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # inherited by accepted sockets; without it a JSON response (the stateless protocol's) waits ~40 ms
    # for the client's delayed ACK (Nagle), which asyncio's own server sockets avoid by setting it too
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((bind.host, bind.port))
    except OSError as e:
        sock.close()
        raise ValueError(f"--http {bind.host}:{bind.port}: cannot listen: {e.strerror or e}") from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


class _Server(uvicorn.Server):
    """uvicorn re-raises a captured SIGTERM after its shutdown, which would kill the process before the
    sessions are ended and recorded; signals are handled in :func:`serve_http` instead."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_http(app: QBServer, bind: Bind, token: str | None) -> None:
    """Serve ``/mcp`` until SIGINT/SIGTERM, then end every session."""
    asgi = app.mcp.streamable_http_app(host=bind.host, transport_security=_security(bind),
                                       session_idle_timeout=app.config.idle_timeout_s)
    if token:
        asgi = BearerAuth(asgi, token)
    sock = _listen(bind)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    # a legacy client's open event stream never ends by itself: without a bound, a SIGTERM would wait for it forever
    server = _Server(uvicorn.Config(asgi, log_level="warning", lifespan="on",
                                    timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S))
    try:
        async with anyio.create_task_group() as tg:
            async def stop_on_signal(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    task_status.started()
                    async for _ in signals:
                        app.sessions.stopping = True  # legacy connections closed from now on end by shutdown
                        server.should_exit = True  # uvicorn's graceful shutdown, then our finally
                        return

            await tg.start(stop_on_signal)  # the banner says "ready": a SIGTERM from then on is handled
            budget = app.sessions.budget
            print(f"quotebench serve: MCP on http://{shown}:{port}/mcp (transport {app.config.transport}, "
                  f"task {app.task.id}, at most {budget.max_sandboxes} open sandboxes within the host budget "
                  f"{size_text(budget.total)})", file=sys.stderr, flush=True)
            tg.start_soon(app.sweeper)
            await server.serve(sockets=[sock])
            tg.cancel_scope.cancel()
    finally:
        sock.close()
        await app.aclose("shutdown")
