"""Deployment paths: the routes agents' commands really take, each run through its real component.

The paper's laboratory wrappers (``nested``, ``nested-single``, JSON, ``ssh``) show that a
boundary damages commands; a user asks whether *their* route does. Each module here is one
route, named as the field names it (``docker-sh``, ``tmux``, ``gha-run``, ``make``, ...),
and each has a ``<name>-safe`` twin: the encoding a careful engineer would use on that route,
held by the property tests to reproduce ``raw`` on the same final shell (verdict equal,
``received == R``).

Every path is a terminal transport (:class:`transports.base.Transport`) with these extra
attributes, which ``quotebench transports list`` prints and the README's table repeats:

``boundary``   one line: what the route does to the text;
``source``     the public tracker issue or documentation the route is modelled on;
``component``  the real program or library that does it here;
``shell``      the final shell (:class:`transports.shells.Shell`);
``fixes``      on a ``-safe`` entry, the path it fixes (None otherwise).

``received`` is the exact program text the final shell got, on every path.

May import: ``tasks`` and, of ``transports``, the top-level modules (``base``, ``shells``, ``capture``,
``components``, ``needs``) and the sandbox (its package API, and ``sandbox.exectrace`` for a trace);
never ``harnesses``, ``ssh`` or a lab transport. Each route module is imported lazily, when its name is first built.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

from ..base import Transport


def _lazy(module: str, cls: str, *args: object) -> Callable[[], Transport]:
    """A factory that imports ``transports.paths.<module>`` only when the path is first built (node, YAML
    and tmux machinery stay unloaded for everyone else)."""
    def make() -> Transport:
        return getattr(import_module(f"{__name__}.{module}"), cls)(*args)
    return make


_ROUTES: tuple[tuple[str, str, str, tuple[object, ...]], ...] = (
    # name, module, class, leading constructor arguments (the safe flag follows)
    ("docker-sh", "docker_sh", "DockerSh", ()),
    ("shlex-sh", "shlex_sh", "ShlexSh", ()),
    ("shell-quote-eval", "shell_quote_eval", "ShellQuoteEval", ()),
    ("make", "make_recipe", "MakeRecipe", ()),
    ("gha-run", "gha", "Gha", ("run",)),
    ("gha-block", "gha", "Gha", ("block",)),
    ("tmux", "tmux", "Tmux", ()),
)

PATHS: dict[str, Callable[[], Transport]] = {
    f"{name}{suffix}": _lazy(module, cls, *args, safe)
    for name, module, cls, args in _ROUTES for suffix, safe in (("", False), ("-safe", True))
}
"""Name -> factory, in the order the catalogue lists them. Modules are imported on first use."""
