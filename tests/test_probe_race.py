"""The start-up probes (can bwrap build a sandbox here; can root be dropped before it) against mounts that come
and go on the host, as every other sandbox's root does: a probe that failed once would decide, for the whole
process, that there is no isolation or that commands run as host root."""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator

import pytest

from transports.sandbox import hostuid
from transports.sandbox.diskcap import libc
from transports.sandbox.isolation import bwrap_program, starts

ROUNDS = 60


@pytest.fixture
def churning_mounts() -> Iterator[None]:
    """Eight threads mounting and unmounting tmpfs under /tmp, each mount a few milliseconds old at most
    (a recursive bind of / took in 38 of 100 probes' time window here and failed)."""
    lib, stop = libc(), threading.Event()
    assert lib is not None

    def churn() -> None:
        while not stop.is_set():
            d = tempfile.mkdtemp(prefix="qb-churn-", dir="/tmp")
            try:
                if lib.mount(b"tmpfs", d.encode(), b"tmpfs", 0, None) == 0:
                    time.sleep(0.002)
                    lib.umount2(d.encode(), 2)
            finally:
                os.rmdir(d)
    threads = [threading.Thread(target=churn, daemon=True) for _ in range(8)]
    for t in threads:
        t.start()
    yield
    stop.set()
    for t in threads:
        t.join(5)


@pytest.mark.needs("bwrap", "root")
def test_the_probes_never_fail_while_other_sandboxes_mount_and_unmount(churning_mounts: None) -> None:
    bwrap = bwrap_program()
    assert bwrap is not None
    isolation = [starts(bwrap) for _ in range(ROUNDS)]
    drop = [hostuid.drop_problem(bwrap) for _ in range(ROUNDS // 3)]
    assert [p for p in isolation + drop if p is not None] == []


@pytest.mark.needs("bwrap", "root")
def test_the_drop_probe_does_not_depend_on_the_harness_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A harness started with a PATH without /usr/bin (a bare virtualenv's) can drop root as well as any: the
    probe's shell looks its programs up on the system's PATH, as every run does."""
    monkeypatch.setenv("PATH", "/opt/venv/bin")
    assert hostuid.drop_problem(bwrap_program()) is None


def test_a_drop_probe_that_times_out_once_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe killed by its timeout on a loaded machine is the most transient failure there is: it must not
    decide that every command of the process runs as host root."""
    calls: list[list[str]] = []

    def slow_once(argv: list[str], **kw: object) -> subprocess.CompletedProcess[bytes]:
        calls.append(argv)
        if len(calls) == 1:
            raise subprocess.TimeoutExpired(argv, 15)
        return subprocess.CompletedProcess(argv, 0, b"", b"")

    monkeypatch.setattr(subprocess, "run", slow_once)
    monkeypatch.setattr(time, "sleep", lambda s: None)
    if hostuid.setpriv() is None:
        pytest.skip("setpriv is not installed: nothing is probed")
    assert hostuid.drop_problem("/usr/bin/bwrap") is None and len(calls) == 2
