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
    or the package and npm's last line of error output), which the path turns into a transport error.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..sandbox import SYSTEM_PATH

INSTALL_TIMEOUT_S = 180


class MissingComponent(RuntimeError):
    """A program or package a path needs is not available; the message is one line naming it."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "quotebench" / "npm"


def node_program() -> str:
    """The node executable, or MissingComponent naming the Debian package."""
    found = shutil.which("node", path=SYSTEM_PATH)
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
    """npm's own reason for a failure (``npm error code ...``, ``ERR! ...``), not the line that points at
    its debug log, which says nothing of the cause."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    useful = [ln for ln in lines if "complete log of this run" not in ln and not ln.endswith("-debug-0.log")]
    for ln in useful:
        if " code " in f" {ln} " or ln.startswith(("npm error code", "npm ERR! code")):
            rest = [u for u in useful if u != ln]
            return ln + (f" ({rest[0]})" if rest else "")
    return (useful or lines or ["(no output)"])[0]


def _installed_version(prefix: Path, package: str) -> str | None:
    try:
        meta = json.loads((prefix / "node_modules" / package / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    version = meta.get("version") if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


def package_dir(package: str, version: str) -> Path:
    """The prefix holding ``node_modules/<package>`` at exactly ``version``; installed on first use."""
    prefix = cache_root() / f"{package}@{version}"
    if _installed_version(prefix, package) == version:
        return prefix
    node_program()
    npm = shutil.which("npm", path=SYSTEM_PATH)
    if npm is None:
        raise MissingComponent(f"npm is not installed, so {package}@{version} cannot be installed "
                               "(Debian package: npm; apt-get install npm)")
    try:
        prefix.parent.mkdir(parents=True, exist_ok=True)
        lock = open(prefix.parent / ".lock", "w")
    except OSError as e:
        raise MissingComponent(f"cannot create the npm cache {prefix.parent}: {e.strerror or e}") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _installed_version(prefix, package) == version:  # another process finished it meanwhile
            return prefix
        return _install(npm, prefix, package, version)


def _install(npm: str, prefix: Path, package: str, version: str) -> Path:
    """Install into a staging prefix, check the version, rename into place (the caller holds the lock)."""
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{package}@{version}-", dir=prefix.parent))
    except OSError as e:
        raise MissingComponent(f"cannot write to the npm cache {prefix.parent}: {e.strerror or e}") from None
    try:
        done = subprocess.run(
            [npm, "install", "--prefix", str(staging), f"{package}@{version}", "--no-audit", "--no-fund",
             "--ignore-scripts", "--no-package-lock", "--loglevel=error"],
            capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, stdin=subprocess.DEVNULL,
            env=_host_env(),
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        shutil.rmtree(staging, ignore_errors=True)
        raise MissingComponent(f"npm install {package}@{version} failed: {e}") from None
    if done.returncode != 0 or _installed_version(staging, package) != version:
        shutil.rmtree(staging, ignore_errors=True)
        raise MissingComponent(f"npm install {package}@{version} failed (exit {done.returncode}): "
                               f"{npm_reason(done.stderr)}")
    shutil.rmtree(prefix, ignore_errors=True)
    os.rename(staging, prefix)
    prefix.chmod(0o755)
    return prefix
