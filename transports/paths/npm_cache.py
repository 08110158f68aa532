"""An npm package in a per-user cache, installed on first use: how a path gets a real npm component.

Why a cache and not a vendored copy
    The route's component is third-party code (the npm ``shell-quote`` package); the project never
    vendors it. The host installs the pinned version once, outside any sandbox (it is the only
    step that touches the network), into ``$XDG_CACHE_HOME/quotebench/npm`` (``~/.cache/...``);
    every later run binds that directory read-only into the sandbox, where node loads it.

Concurrency
    Several harness processes may start at once: the install runs under an exclusive ``flock`` on a
    lock file next to the directory, into a temporary prefix that is renamed into place only when
    the installed ``package.json`` names the pinned version, so a reader never sees half a package.

Failure
    Never a traceback: :class:`MissingComponent` carries one line naming what is missing (node, npm,
    or the package and npm's own reason), which becomes the record's harness ``error``
    (:mod:`transports.components`), never a transport error. A failed install is remembered for the
    rest of the process: npm retries an unreachable registry for about 70 s, and paying that again
    for every execution made a replay block for minutes and say nothing new. ``quotebench components
    install`` (``retry=True``) is the way to try again.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from .. import needs
from ..needs import MissingComponent, Status
from ..sandbox import SYSTEM_PATH
from .install_once import install_once

__all__ = ["MissingComponent", "cache_root", "node_program", "npm_reason", "package_dir", "prefix_of", "status"]

INSTALL_TIMEOUT_S = 180

_failed: dict[Path, str] = {}
"""prefix -> the one-line reason its install failed in this process (never retried but on request)."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "quotebench" / "npm"


def node_program() -> str:
    """The node executable, or MissingComponent naming the Debian package."""
    found = needs.find_program("node")
    if found is None:
        raise MissingComponent("node is not installed (Debian package: nodejs; apt-get install nodejs)")
    return found


def _host_env() -> dict[str, str]:
    """The user's own environment for a host-side install: its proxy, CA certificates
    (``NODE_EXTRA_CA_CERTS``), registry and npm configuration are what reach the registry here. Only
    what enters a sandbox is scrubbed; an install is not a sandboxed command. The system directories
    lead PATH so that the npm found is the one checked above."""
    env = dict(os.environ)
    env["PATH"] = SYSTEM_PATH + (":" + env["PATH"] if env.get("PATH") else "")
    return env


def npm_reason(stderr: str) -> str:
    """npm's own reason for a failure on one line: its error code and the line that says why
    (``npm error code ECONNREFUSED: request to ... failed, reason: connect ECONNREFUSED ...``), never the
    line pointing at its debug log, nor the stack, syscall and errno lines, which say nothing of the cause."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    useful = [ln for ln in lines if "complete log of this run" not in ln and not ln.endswith("-debug-0.log")]
    code = next((ln for ln in useful if ln.startswith(("npm error code ", "npm ERR! code "))), None)
    said = [_npm_text(ln) for ln in useful if ln != code]
    said = [t for t in said if t and not t.startswith(_NOISE)]
    why = next((t for t in said if "reason:" in t), None) or (said[0] if said else None)
    if code is None:
        return why or (lines or ["(no output)"])[0]
    return code + (f": {why}" if why else "")


_NOISE = ("syscall ", "errno ", "at ", "{", "}", "code:", "errno:", "syscall:", "address:", "port:", "type:",
          "requiredBy:", "If you are behind a proxy")


def _npm_text(line: str) -> str:
    """A line of npm's error output without its ``npm error`` / ``npm ERR!`` prefix; a FetchError's class
    name is dropped too (its message is the reason)."""
    for prefix in ("npm error", "npm ERR!"):
        if line.startswith(prefix):
            line = line[len(prefix):].strip()
    return line.removeprefix("FetchError: ")


def _installed_version(prefix: Path, package: str) -> str | None:
    try:
        meta = json.loads((prefix / "node_modules" / package / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    version = meta.get("version") if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


def component_name(package: str) -> str:
    """The name ``quotebench components install`` knows a package by: a scoped package's own name
    (``@anthropic-ai/claude-code`` is ``claude-code``)."""
    return package.rsplit("/", 1)[-1]


def prefix_of(package: str, version: str) -> Path:
    """The cache directory of ``package@version``: a scoped name's ``/`` becomes ``+``
    (``@anthropic-ai+claude-code@2.1.197``), so every prefix is one directory next to the lock."""
    return cache_root() / f"{package.replace('/', '+')}@{version}"


def status(package: str, version: str, *, node: bool = True) -> Status:
    """Whether ``package@version`` is in the cache (and, when ``node``, node there to run it: a package that
    ships a native program, such as Claude Code's, does not need it), without installing."""
    prefix = prefix_of(package, version)
    if _installed_version(prefix, package) == version:
        if node:
            try:
                node_program()
            except MissingComponent as e:
                return Status(False, f"installed in {prefix}, but {e}")
        return Status(True, f"{version} in {prefix}")
    if prefix in _failed:
        return Status(False, _failed[prefix])
    npm = "" if needs.find_program("npm") else "; npm is not installed (Debian package: npm)"
    return Status(False, f"not installed in {prefix} (quotebench components install {component_name(package)}{npm})")


def package_dir(package: str, version: str, *, retry: bool = False, timeout_s: float = INSTALL_TIMEOUT_S) -> Path:
    """The prefix holding ``node_modules/<package>`` at exactly ``version``; installed on first use
    (:func:`~transports.paths.install_once.install_once`: a failure is remembered, later calls in this process
    raise the same line at once, unless ``retry``). ``timeout_s`` bounds npm (Claude Code's 235 MB gets longer)."""
    npm: list[str] = []

    def preflight() -> None:
        node_program()
        found = needs.find_program("npm")
        if found is None:
            raise MissingComponent(f"npm is not installed, so {package}@{version} cannot be installed "
                                   "(Debian package: npm; apt-get install npm)")
        npm.append(found)

    return install_once(prefix_of(package, version), failed=_failed,
                        installed=lambda where: _installed_version(where, package) == version, preflight=preflight,
                        install=lambda staging: _install(npm[0], staging, package, version, timeout_s), cache="npm",
                        retry_hint=f"quotebench components install {component_name(package)}", retry=retry)


def _install(npm: str, staging: Path, package: str, version: str, timeout_s: float) -> None:
    """npm into the staging prefix, its version checked (the caller holds the lock and renames it into place)."""
    try:
        done = subprocess.run(
            [npm, "install", "--prefix", str(staging), f"{package}@{version}", "--no-audit", "--no-fund",
             "--ignore-scripts", "--no-package-lock", "--loglevel=error"],
            capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL,
            env=_host_env(),
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise MissingComponent(f"npm install {package}@{version} failed: {e}") from None
    if done.returncode != 0 or _installed_version(staging, package) != version:
        raise MissingComponent(f"npm install {package}@{version} failed (exit {done.returncode}): "
                               f"{npm_reason(done.stderr)}")
