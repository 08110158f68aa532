"""QuoteBench's MCP tool server: the native contract's shell tool, run through a chosen transport.

An agent connected to this server sees one tool (``bash``, one string field
``command``), the task's instruction as the ``task`` prompt and the
``quotebench://task`` resource. Every call runs through the configured
transport (``raw`` by default) in the sandbox of the caller's session and is
recorded like any other execution (contract ``native``). See
:mod:`qb_server.sessions` for how a request is mapped to its sandbox and
:mod:`qb_server.app` for building and serving.
"""

from .app import build_app, build_server, serve
from .server import QBServer
from .sessions import META_KEY

__all__ = ["META_KEY", "QBServer", "build_app", "build_server", "serve"]
