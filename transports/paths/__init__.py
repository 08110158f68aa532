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
"""

from __future__ import annotations

from collections.abc import Callable

from ..base import Transport


def _docker_sh(safe: bool) -> Callable[[], Transport]:
    def make() -> Transport:
        from .docker_sh import DockerSh

        return DockerSh(safe)
    return make


def _shlex_sh(safe: bool) -> Callable[[], Transport]:
    def make() -> Transport:
        from .shlex_sh import ShlexSh

        return ShlexSh(safe)
    return make


def _shell_quote_eval(safe: bool) -> Callable[[], Transport]:
    def make() -> Transport:
        from .shell_quote_eval import ShellQuoteEval

        return ShellQuoteEval(safe)
    return make


def _make(safe: bool) -> Callable[[], Transport]:
    def make() -> Transport:
        from .make_recipe import MakeRecipe

        return MakeRecipe(safe)
    return make


def _gha(style: str, safe: bool) -> Callable[[], Transport]:
    def make() -> Transport:
        from .gha import Gha

        return Gha(style, safe)
    return make


def _tmux(safe: bool) -> Callable[[], Transport]:
    def make() -> Transport:
        from .tmux import Tmux

        return Tmux(safe)
    return make


PATHS: dict[str, Callable[[], Transport]] = {
    "docker-sh": _docker_sh(False),
    "docker-sh-safe": _docker_sh(True),
    "shlex-sh": _shlex_sh(False),
    "shlex-sh-safe": _shlex_sh(True),
    "shell-quote-eval": _shell_quote_eval(False),
    "shell-quote-eval-safe": _shell_quote_eval(True),
    "make": _make(False),
    "make-safe": _make(True),
    "gha-run": _gha("run", False),
    "gha-run-safe": _gha("run", True),
    "gha-block": _gha("block", False),
    "gha-block-safe": _gha("block", True),
    "tmux": _tmux(False),
    "tmux-safe": _tmux(True),
}
"""Name -> factory, in the order the catalogue lists them. Modules are imported on first use."""
