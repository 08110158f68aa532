"""QuoteBench's library API: what a harness author calls before handing a command to a route.

``lint(R, path)`` predicts what the route does to R (damaged or not, the exact text the final shell would
receive, the hazards, a safe text); ``deliver(R, path)`` is the safe delivery alone. Both are pure Python over
the text: importing this package starts no server, no sandbox and no process. ``path`` is a transport name
as ``quotebench transports list`` prints it (``nested``, ``ssh``, ``docker-sh``, ``json-naive+ssh``, ...).
See docs/lint.md.

It re-exports :mod:`transports.lint` and may import only ``transports``; nothing in the project imports it.
"""

from transports.lint import Hazard, Lint, LintError, Safe, deliver, lint

__all__ = ["Hazard", "Lint", "LintError", "Safe", "deliver", "lint"]
