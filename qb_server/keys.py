"""Which session a request belongs to.

Why keying is explicit
    mcp 2.x clients default to the stateless 2026-07-28 protocol: every request
    is self-contained, arrives on a fresh ``Connection`` and carries no session
    id. "The connection" therefore identifies nobody, and keying a sandbox on it
    would give every call a new sandbox (or, keyed on nothing, one sandbox shared
    by all clients). A sandbox is keyed on the first of these that the request has:

    1. ``_meta["quotebench/sandbox"]`` - an id the client chooses and sends with
       each request. Works on every transport and protocol version; the client
       must make it unguessable if several clients share a server.
    2. the stdio process - a stdio server has exactly one client, so all its
       requests share one session (key ``stdio``).
    3. a handshake-era (legacy) connection - ``Client(..., mode="legacy")``: over
       streamable HTTP that is the ``mcp-session-id``; in-process it is the
       connection object. When the connection ends (HTTP DELETE, the SDK's idle
       timeout, the in-process client leaving) its sandbox is closed at once.
    4. nothing - a stateless request without the ``_meta`` id is a session of
       its own: a fresh sandbox for that one call, closed right after it.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CLIENT_INFO_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

META_KEY = "quotebench/sandbox"
"""The ``_meta`` key a client sets to name its sandbox."""

Kind = Literal["meta", "stdio", "http", "connection", "anonymous"]
Serving = Literal["stdio", "http", "inproc"]
_SAFE = re.compile(r"^[A-Za-z0-9_.-]{1,48}$")


class SessionError(ToolError):
    """A request that cannot be given a session (a malformed ``_meta`` id, too many sessions).

    A ``ToolError``, so wherever it is raised the client gets a tool error with this message."""


@dataclass(frozen=True)
class SessionKey:
    """``id`` keys the session table; ``label`` is short and safe to put into record ids."""

    id: str
    label: str
    kind: Kind

    @classmethod
    def meta(cls, value: str) -> "SessionKey":
        label = value if _SAFE.match(value) else "h" + hashlib.sha256(value.encode()).hexdigest()[:12]
        return cls(f"meta:{value}", f"meta-{label}", "meta")

    @classmethod
    def anonymous(cls) -> "SessionKey":
        u = uuid.uuid4().hex[:12]
        return cls(f"anon:{u}", f"anon-{u}", "anonymous")


STDIO_KEY = SessionKey("stdio", "stdio", "stdio")


def _connection(rc: Any) -> Any:
    """The request's ``Connection``. mcp 2.3 has no public accessor yet (its ``Context.connection``
    is not wired), so this reads the session's private attribute and copes with its absence."""
    return getattr(getattr(rc, "session", None), "_connection", None)


def key_for(rc: Any, serving: Serving) -> tuple[SessionKey, Any]:
    """The session key of a request, and the legacy connection whose end should close it (or None)."""
    meta: Mapping[str, Any] = rc.meta or {}
    if META_KEY in meta:
        value = meta[META_KEY]
        if not isinstance(value, str) or not 1 <= len(value) <= 256:
            raise SessionError(f"_meta['{META_KEY}'] must be a string of 1 to 256 characters")
        return SessionKey.meta(value), None
    if serving == "stdio":
        return STDIO_KEY, None
    if rc.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        conn = _connection(rc)
        if conn is not None and getattr(conn, "state", None) is not None:
            key = conn.state.get("quotebench/key")
            if key is None:
                sid = getattr(conn, "session_id", None)
                u = uuid.uuid4().hex
                key = (SessionKey(f"http:{sid}", f"http-{sid[:12]}", "http") if sid
                       else SessionKey(f"conn:{u}", f"conn-{u[:12]}", "connection"))
                conn.state["quotebench/key"] = key
                return key, conn
            return key, None
        sid = getattr(getattr(rc, "request", None), "headers", {}).get("mcp-session-id")
        if sid:
            return SessionKey(f"http:{sid}", f"http-{sid[:12]}", "http"), None
    return SessionKey.anonymous(), None


def client_name(rc: Any) -> str:
    """The client's self-declared name (handshake params, or the 2026 envelope), for the record's config."""
    params = getattr(getattr(rc, "session", None), "client_params", None)
    info = getattr(params, "client_info", None)
    if info is not None and getattr(info, "name", None):
        return str(info.name)
    env = (rc.meta or {}).get(CLIENT_INFO_META_KEY)
    if isinstance(env, Mapping) and env.get("name"):
        return str(env["name"])
    return "unknown"
