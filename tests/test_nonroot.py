"""The sandbox's promises for a harness that is not root, with the system and the bundled bwrap.

The harness runs as uid 4321 here: this Python's prefix is bind-mounted read-only where that uid can
reach it (it may live under root's home), and ``quotebench exec`` runs through it. Without root
nothing is dropped (``user: caller``); the sandbox still cannot write kernel interfaces, and
``received`` still comes from the kernel's exec trace.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from transports.sandbox import hostuid

UID = 4321
pytestmark = [pytest.mark.needs("root"), pytest.mark.needs("bwrap")]


@pytest.fixture(scope="module")
def python() -> Iterator[tuple[str, str]]:
    """This Python, reachable by another uid (a read-only bind mount of its prefix)."""
    libc = ctypes.CDLL(None, use_errno=True)
    prefix = Path(sys.prefix).resolve()
    d = Path(tempfile.mkdtemp(prefix="qb-test-prefix-", dir="/tmp"))
    d.chmod(0o755)
    point = d / "p"
    point.mkdir()
    assert libc.mount(os.fsencode(str(prefix)), os.fsencode(str(point)), None, 4096, None) == 0
    libc.mount(None, os.fsencode(str(point)), None, 4096 | 32 | 1, None)
    try:
        exe = point / Path(sys.executable).resolve().relative_to(prefix)
        site = [point / Path(p).relative_to(prefix) for p in sys.path
                if p.endswith("site-packages") and Path(p).resolve().is_relative_to(prefix)]
        yield str(exe), os.pathsep.join(str(p) for p in site)
    finally:
        libc.umount2(os.fsencode(str(point)), 2)
        point.rmdir()
        d.rmdir()


def exec_as_user(python: tuple[str, str], command: str, transport: str = "raw", **env: str) -> dict:
    home = tempfile.mkdtemp(prefix="qb-test-home-", dir="/tmp")
    os.chown(home, UID, UID)
    setpriv = hostuid.setpriv()
    assert setpriv is not None
    done = subprocess.run(
        [setpriv, f"--reuid={UID}", f"--regid={UID}", "--clear-groups", "--", python[0], "-m", "qb_client", "exec",
         "--json", "--task", "file-write/control", "--transport", transport, "--command", command],
        capture_output=True, text=True, timeout=120, cwd=home,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
             "PYTHONHOME": str(Path(python[0]).parents[1]), "LD_LIBRARY_PATH": str(Path(python[0]).parents[1] / "lib"),
             "PYTHONPATH": os.pathsep.join((str(Path(__file__).resolve().parents[1]), python[1])), **env})
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("bwrap", ["system", "bundled"])
def test_a_non_root_harness_isolates_and_traces(python: tuple[str, str], bwrap: str) -> None:
    env = {"QB_BWRAP": "bundled"} if bwrap == "bundled" else {}
    rec = exec_as_user(python, 'echo "hello world" > out.txt; id -u; echo 1 > /proc/sys/vm/swappiness', **env)
    assert rec["isolation"] == "bwrap"
    assert rec["limits_applied"]["user"] == "caller" and rec["limits_applied"]["kernel"] == "read-only"
    assert rec["verdict"]["passed"]
    assert rec["stdout"]["text"].split()[0] == str(UID)
    assert "Read-only file system" in rec["stderr"]["text"]


def test_a_non_root_harness_takes_received_from_the_kernel(python: tuple[str, str]) -> None:
    rec = exec_as_user(python, 'echo "hello world" > out.txt', transport="nested")
    assert rec["received"] == "echo hello" and rec["damaged"]
