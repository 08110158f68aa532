"""Installing one component into a per-user cache at most once: the rule the npm and venv caches share.

Why one rule
    A route's component (an npm package, a Python harness in a venv) is installed by the host on first use,
    by whichever run, thread or harness process gets there first. So: an exclusive ``flock`` beside the
    cache entry (another process may finish it meanwhile: look again under the lock), the install into a
    staging directory renamed into place only when it is complete (a killed install leaves no half entry),
    and a failure remembered for the rest of the process (every later run is one harness error at once,
    never a retry per execution); ``quotebench components install`` retries.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..needs import MissingComponent


def install_once(prefix: Path, *, failed: dict[Path, str], installed: Callable[[Path], bool],
                 preflight: Callable[[], None], install: Callable[[Path], None], cache: str, retry_hint: str,
                 retry: bool = False) -> Path:
    """``prefix``, installed by ``install(staging)`` unless ``installed(prefix)`` already; ``preflight`` raises
    MissingComponent when the installer itself is missing. ``failed`` is the caller's memory of failures
    (prefix -> line); a failure outside ``retry`` adds how to retry (``retry_hint``). MissingComponent, one
    line, on any failure."""
    if installed(prefix):
        return prefix
    if not retry and prefix in failed:
        raise MissingComponent(failed[prefix])
    try:
        preflight()
        try:
            prefix.parent.mkdir(parents=True, exist_ok=True)
            lock = open(prefix.parent / ".lock", "w")
        except OSError as e:
            raise MissingComponent(f"cannot create the {cache} cache {prefix.parent}: {e.strerror or e}") from None
    except MissingComponent as e:
        raise _remember(failed, prefix, str(e), retry, retry_hint) from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed(prefix):  # another process finished it meanwhile
            return prefix
        if not retry and prefix in failed:  # another thread of this process failed meanwhile
            raise MissingComponent(failed[prefix])
        try:
            _staged(prefix, install, installed, cache)
        except MissingComponent as e:  # remembered before the lock is let go, so no thread tries again
            raise _remember(failed, prefix, str(e), retry, retry_hint) from None
        failed.pop(prefix, None)
        return prefix


def _staged(prefix: Path, install: Callable[[Path], None], installed: Callable[[Path], bool], cache: str) -> None:
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{prefix.name}-", dir=prefix.parent))
    except OSError as e:
        raise MissingComponent(f"cannot write to the {cache} cache {prefix.parent}: {e.strerror or e}") from None
    try:
        install(staging)
        if not installed(staging):
            raise MissingComponent(f"the install into the {cache} cache did not give the pinned version")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(prefix, ignore_errors=True)
    os.rename(staging, prefix)
    prefix.chmod(0o755)


def _remember(failed: dict[Path, str], prefix: Path, why: str, retry: bool, hint: str) -> MissingComponent:
    """Remember that ``prefix`` could not be had (the error to raise); an automatic attempt says how to retry."""
    if not retry:
        why += f"; not retried in this process ({hint} retries)"
    failed[prefix] = why
    return MissingComponent(why)
