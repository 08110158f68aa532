"""Forks never carry an executable this process is writing (tasks.forking): a fixture's ``cexec`` executed right
after it was written, while other threads start processes, is never "Text file busy"."""

from __future__ import annotations

import errno
import subprocess
import threading
import time
from pathlib import Path

import anyio
import pytest

from tasks import forking
from tasks.fixture import materialize
from tasks.load import get_task
from transports.sandbox import Sandbox


def test_a_fixture_executable_run_at_once_while_threads_spawn_is_never_text_file_busy(tmp_path: Path) -> None:
    # without the lock this failed 5 times in 600 runs: a child forked while cexec was open for writing holds
    # it until its own exec
    task = get_task("container-exec/control")
    stop = threading.Event()

    def spawner() -> None:
        while not stop.is_set():
            forking.run(["/bin/true"])
    threads = [threading.Thread(target=spawner, daemon=True) for _ in range(3)]
    for t in threads:
        t.start()
    busy = ran = 0
    try:
        for k in range(600):
            where = tmp_path / str(k)
            where.mkdir()
            materialize(task.fixture, where)
            try:
                done = subprocess.run([str(where / "cexec"), "true"], capture_output=True, timeout=30)
            except OSError as e:
                assert e.errno == errno.ETXTBSY, e
                busy += 1
                continue
            ran += done.returncode == 0
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert busy == 0 and ran == 600


def test_a_spawn_waits_for_an_executable_being_written_and_a_write_for_spawns_under_way() -> None:
    order: list[str] = []
    with forking.writing_executable():
        t = threading.Thread(target=lambda: (forking.run(["/bin/true"]), order.append("spawned")))
        t.start()
        time.sleep(0.3)
        order.append("written")
    t.join(30)
    assert order == ["written", "spawned"]


@pytest.mark.needs("bwrap")
def test_a_run_s_launcher_is_not_forked_while_an_executable_is_being_written() -> None:
    done: list[int | None] = []

    async def go() -> None:
        with Sandbox.create(get_task("file-write/control")) as box:
            ex = await box.run(["true"])
            done.append(ex.exit_code)

    with forking.writing_executable():
        t = threading.Thread(target=lambda: anyio.run(go))
        t.start()
        time.sleep(0.5)
        assert done == []  # the launcher waits for the write
    t.join(60)
    assert done == [0]
