"""Attacks on tasks/forking.py: a writer interrupted while it waits, process starts that must take the lock
(the ssh master, dequote's bash), and forking.run against the subprocess.run it replaces.

Every test uses a fresh lock (monkeypatched), so a leaked state cannot hang the rest of the suite."""

from __future__ import annotations

import signal
import subprocess
import threading
import time

import pytest

from tasks import forking


@pytest.fixture(autouse=True)
def fresh_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forking, "_lock", forking._Lock())


class _Interrupt(Exception):
    pass


def _spawn_in_thread() -> threading.Event:
    done = threading.Event()

    def go() -> None:
        with forking.spawning():
            pass
        done.set()
    threading.Thread(target=go, daemon=True).start()
    return done


def test_a_writer_interrupted_while_it_waits_does_not_block_every_later_spawn() -> None:
    # writing_executable() counts itself as a waiting writer, then waits; an exception raised in the wait
    # (KeyboardInterrupt, the worker's SIGTERM -> SystemExit, any signal handler that raises) must give that
    # place back, or every later spawning() waits forever for a writer that no longer exists.
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with forking.spawning():
            held.set()
            release.wait(10)
    t = threading.Thread(target=holder, daemon=True)
    t.start()
    assert held.wait(5)

    def boom(*_: object) -> None:
        raise _Interrupt
    old = signal.signal(signal.SIGALRM, boom)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(_Interrupt):
            with forking.writing_executable():
                pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    release.set()
    t.join(5)
    assert forking._lock.writers_waiting == 0, "the interrupted writer is still counted as waiting"
    assert _spawn_in_thread().wait(2), "a spawn after the interrupted write never starts"


def _blocked_by_a_write(start: "callable[[], object]") -> bool:
    """Whether ``start`` (a process start) waits while an executable is being written."""
    done = threading.Event()
    with forking.writing_executable():
        threading.Thread(target=lambda: (start(), done.set()), daemon=True).start()
        waited = not done.wait(1.0)
    done.wait(10)
    return waited


def test_the_ssh_master_is_not_forked_while_an_executable_is_being_written() -> None:
    # transports.ssh.master.spawn starts the OpenSSH master (Endpoint.start_master, reached from records'
    # worker threads) under spawning()
    from transports.ssh import master
    assert _blocked_by_a_write(lambda: master.spawn(["/bin/true"]).wait())


def test_dequote_s_bash_is_not_forked_while_an_executable_is_being_written() -> None:
    # transports.harnesses.dequote runs bash after every claude-code record, concurrently with other
    # records' fixture writes: under spawning()
    from transports.harnesses.dequote import dequote
    assert _blocked_by_a_write(lambda: dequote("'a b'"))


def test_forking_run_matches_subprocess_run() -> None:
    # check, input, timeout, returncode and text behave as subprocess.run(capture_output=True)
    argv = ["sh", "-c", "cat; echo err >&2; exit 3"]
    with pytest.raises(subprocess.CalledProcessError) as mine:
        forking.run(argv, input=b"in", check=True)
    with pytest.raises(subprocess.CalledProcessError) as theirs:
        subprocess.run(argv, input=b"in", capture_output=True, check=True)
    assert (mine.value.returncode, mine.value.stdout, mine.value.stderr) == \
        (theirs.value.returncode, theirs.value.stdout, theirs.value.stderr)
    with pytest.raises(subprocess.TimeoutExpired) as to:
        forking.run(["sh", "-c", "echo partial; exec sleep 5"], timeout=0.5)
    assert to.value.stdout == b"partial\n"
    assert forking.run(["cat"], input="x", text=True).stdout == "x"
    assert forking.run(["sh", "-c", "kill -9 $$"]).returncode == -9


def test_a_write_is_not_held_up_by_a_running_command() -> None:
    # forking.run holds the shared side only until exec, not while the command runs
    t = threading.Thread(target=lambda: forking.run(["sleep", "2"]), daemon=True)
    t.start()
    time.sleep(0.3)
    start = time.monotonic()
    with forking.writing_executable():
        pass
    assert time.monotonic() - start < 0.5
    t.join(5)
