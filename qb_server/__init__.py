"""QuoteBench's MCP tool server: the native contract's shell tool, run through a chosen transport.

An agent connected to this server sees one tool (``bash``, one string field
``command``), the task's instruction as the ``task`` prompt and the
``quotebench://task`` resource. Every call runs through the configured
transport (``raw`` by default) in the sandbox of the caller's session and is
recorded like any other execution (contract ``native``). See
:mod:`qb_server.sessions` for how a request is mapped to its sandbox and
:mod:`qb_server.app` for building and serving.

Inside, from the bottom up, each module importing only those before it:
:mod:`.config`, :mod:`.keys`, :mod:`.budget`, :mod:`.worker`, :mod:`.unfinished`;
:mod:`.sessions` (the session table); :mod:`.tools` (the MCP surface, which says in
:class:`~qb_server.tools.ToolHost` what it needs of a server); :mod:`.server`
(:class:`QBServer`, one configured server, which builds its tools); :mod:`.http`
(serving over HTTP); :mod:`.app` (building, serving over stdio); :mod:`.bench` and
``__main__``.

May import: ``tasks`` and ``transports``, never ``qb_client`` (the driver is one
client of this server among others). This ``__init__`` only re-exports its own
submodules, and none of them imports it back. It re-exports them when first asked
(:pep:`562`): importing one submodule, such as :mod:`.observation` for a campaign's
offline agents, does not import the MCP SDK (about a second).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"build_app": "app", "build_server": "app", "serve": "app", "QBServer": "server", "META_KEY": "sessions"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'qb_server' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
