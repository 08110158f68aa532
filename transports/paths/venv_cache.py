"""A PyPI distribution in a per-user virtual environment, installed on first use: how a route gets a real
Python harness (mini-swe-agent), as :mod:`transports.paths.npm_cache` gets an npm one.

Why a venv of the system's python3
    The harness runs inside the sandbox, which sees only the system directories: the venv is made with the
    system ``python3`` (:func:`transports.needs.find_program`), so its ``bin/python`` (a link to that
    interpreter) works once the venv is bound read-only into the sandbox. The route runs ``bin/python -m
    MODULE``, never the venv's console scripts, whose ``#!`` lines name the host path.

Where, when, how
    ``$XDG_CACHE_HOME/quotebench/venv/<dist>@<version>`` (``~/.cache/...``), by the host, once, outside any
    sandbox, with the user's own pip configuration (index, proxy, certificates), under an exclusive
    ``flock``, into a staging directory renamed into place only when the pinned version is installed (a
    venv run by ``bin/python -m`` does not depend on its own path). ``pins`` fixes more distributions
    (mini-swe-agent's litellm), so every machine gets the measured set.

Failure
    :class:`MissingComponent`, one line (pip's last line of error), remembered for the process like npm's;
    ``quotebench components install`` retries.

Another interpreter (``min_python``)
    A distribution that needs a newer Python than the system's (Harbor needs 3.12, QuoteBench runs on 3.11)
    and runs on the host only, never inside the sandbox, gets a venv of the first interpreter found by
    :func:`find_python`: ``python3.N`` on PATH for N from the minimum up (the oldest that qualifies: the one a package's
    floor was made for), then pyenv's ``versions/*/bin/python3``, oldest first. Each candidate is asked for its own version and ``sys.executable`` (a pyenv
    shim resolves to the real program, or fails and is skipped), so the venv links the real interpreter.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .. import needs
from ..needs import MissingComponent, Status
from ..sandbox import SYSTEM_PATH
from .install_once import install_once

INSTALL_TIMEOUT_S = 900

_failed: dict[Path, str] = {}


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "quotebench" / "venv"


def prefix_of(dist: str, version: str) -> Path:
    return cache_root() / f"{dist}@{version}"


def installed_version(prefix: Path, dist: str) -> str | None:
    """The version of ``dist`` in the venv at ``prefix``, from its ``*.dist-info`` directory name."""
    norm = dist.replace("-", "_").lower()
    for info in prefix.glob("lib/python3*/site-packages/*.dist-info"):
        name, _, version = info.name[: -len(".dist-info")].partition("-")
        if name.replace("-", "_").lower() == norm and (info / "METADATA").is_file():
            return version
    return None


def status(dist: str, version: str) -> Status:
    prefix = prefix_of(dist, version)
    if installed_version(prefix, dist) == version:
        return Status(True, f"{version} in {prefix}")
    if prefix in _failed:
        return Status(False, _failed[prefix])
    return Status(False, f"not installed in {prefix} (quotebench components install {dist})")


def _ask(candidate: str) -> tuple[tuple[int, int], str] | None:
    """(major, minor) and ``sys.executable`` of the interpreter ``candidate``, or None if it does not run."""
    probe = "import sys, venv, ensurepip; print(sys.version_info[0], sys.version_info[1], sys.executable)"
    try:
        done = subprocess.run([candidate, "-I", "-c", probe], capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    fields = done.stdout.split(maxsplit=2)
    if done.returncode != 0 or len(fields) != 3 or not (fields[0].isdigit() and fields[1].isdigit()):
        return None
    return (int(fields[0]), int(fields[1])), fields[2].strip()


def find_python(minimum: tuple[int, int]) -> str | None:
    """The real path of an interpreter of at least ``minimum`` with ``venv`` and ``ensurepip``, or None
    (see the module docstring for the order)."""
    import shutil

    names = [f"python{minimum[0]}.{n}" for n in range(minimum[1], minimum[1] + 10)]
    candidates = [found for n in names if (found := shutil.which(n))]
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    def by_version(p: Path) -> list[int]:
        return [int(x) if x.isdigit() else 0 for x in p.parent.parent.name.split(".")]

    candidates += [str(p) for p in sorted(pyenv.glob("*/bin/python3"), key=by_version)]
    for c in candidates:
        got = _ask(c)
        if got is not None and got[0] >= minimum:
            return got[1]
    return None


def venv_dir(dist: str, version: str, pins: tuple[str, ...] = (), *, retry: bool = False,
             timeout_s: float = INSTALL_TIMEOUT_S, min_python: tuple[int, int] | None = None,
             no_deps: bool = False) -> Path:
    """The venv holding ``dist`` at exactly ``version`` (and ``pins``); installed on first use
    (:func:`~transports.paths.install_once.install_once`). With ``min_python``, of an interpreter at least
    that new (:func:`find_python`), for a distribution run on the host only. With ``no_deps``, pip installs
    ``dist`` and ``pins`` only (``--no-deps``): the pins are then the whole environment, for a distribution of
    which only some modules are used (Harbor's models, without its agents' dependencies)."""
    python: list[str] = []

    def preflight() -> None:
        if min_python is not None:
            newer = find_python(min_python)
            if newer is None:
                want = ".".join(map(str, min_python))
                raise MissingComponent(f"{dist}=={version} needs Python >= {want}, and none was found (python{want} "
                                       "or newer on PATH, or under ~/.pyenv/versions)")
            python.append(newer)
            return
        found = needs.find_program("python3")
        if found is None:
            raise MissingComponent(f"python3 is not installed, so {dist}=={version} cannot be installed "
                                   "(Debian package: python3)")
        python.append(found)

    return install_once(prefix_of(dist, version), failed=_failed,
                        installed=lambda where: installed_version(where, dist) == version, preflight=preflight,
                        install=lambda staging: _install(python[0], staging, dist, version, pins, timeout_s, no_deps),
                        cache="venv", retry_hint=f"quotebench components install {dist}", retry=retry)


def _install(python: str, staging: Path, dist: str, version: str, pins: tuple[str, ...], timeout_s: float,
             no_deps: bool = False) -> None:
    """A venv of the system's python3 in the staging directory, then pip, the version checked."""
    env = dict(os.environ)
    env["PATH"] = SYSTEM_PATH + (":" + env["PATH"] if env.get("PATH") else "")
    env.pop("PYTHONPATH", None)
    steps = ([python, "-m", "venv", str(staging)],
             [str(staging / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
              "-q", *(["--no-deps"] if no_deps else []), f"{dist}=={version}", *pins])
    try:
        for argv in steps:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL,
                                  env=env)
            if done.returncode != 0:
                said = [ln.strip() for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
                why = next((ln for ln in reversed(said) if ln.startswith("ERROR")), said[-1] if said else "(no output)")
                raise MissingComponent(f"pip install {dist}=={version} failed (exit {done.returncode}): {why[:300]}")
    except (OSError, subprocess.TimeoutExpired) as e:
        raise MissingComponent(f"pip install {dist}=={version} failed: {e}") from None
    if installed_version(staging, dist) != version:
        raise MissingComponent(f"pip install {dist}=={version} did not install that version")
