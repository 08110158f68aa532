"""One traced process run: spawn, feed, read, time, kill, and the kernel's exec record.

Why its own module
    :class:`~transports.sandbox.Sandbox` decides *what* runs (the launcher: limits,
    uid, bubblewrap); this module decides *how* a run is carried out, the same way for
    every transport: the launcher is spawned by an :class:`~transports.sandbox.exectrace.Tracer`
    thread, its output is read on the event loop without blocking it, and the wall
    clock is measured on the loop against this run alone.

End of a run
    The run ends when the launcher (the sandbox's main process) has exited *and* every
    holder of its stdout and stderr has closed them, or at its timeout: a background
    job that still writes to the output (``A & B`` delivered through ``ssh``) runs and is
    recorded, as ``ssh`` and ``docker exec`` wait for the channel's last writer. Then every
    process of the run is killed by pid (the tracer knows each one, whatever group it
    moved to; under bwrap that includes the pid namespace's init, whose death takes every
    process of the namespace with it) and, where there is no pid namespace, through its
    cgroup; the tracer thread is joined off the loop once nothing of the run is left. A
    background job whose output goes elsewhere is killed when the main process exits.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import anyio

from . import reaper
from .exectrace import Exec, Identity, Trace, Tracer
from .phases import mark

Stdin = bytes | AsyncIterator[bytes] | None
HOLDER_POLL_S = 0.01  # how often a run whose main process is gone checks who still holds its output
BACKSTOP_S = 30.0     # the loop's own deadline past the limit: only if the watching thread could not end the run
_threads = anyio.CapacityLimiter(4096)  # one waiting thread per live run: never the default pool's 40


@dataclass
class Stream:
    text: str = ""
    truncated: bool = False
    drained: bool = False  # the run was killed for writing more than drain_cap


@dataclass
class Outcome:
    """What the process run produced, before any limit is interpreted."""

    status: int | None  # the launcher's exit code (negative: killed by that signal), None if timed out
    stdout: Stream
    stderr: Stream
    timed_out: bool
    exec_ms: float
    trace: Trace


class TooLong(OSError):
    """The kernel refused the argument vector (E2BIG)."""


class NotReleased(Exception):
    """A launcher started ahead ended before its run was handed to it (killed from outside): nothing ran."""


async def run_traced(argv: list[str], *, env: dict[str, str], cwd: str, stdin: Stdin, timeout_s: float,
                     output_cap: int, drain_cap: int, watch: frozenset[Identity], launcher_execs: int,
                     on_end: Callable[[], None], input_of: Callable[[Exec], bool] | None = None,
                     log_fd: int | None = None, inner: bool = False,
                     ready: tuple[Tracer, bytes] | None = None) -> Outcome:
    """Run ``argv`` traced; ``on_end`` kills what the tracer cannot see by pid (the run's cgroup, where no pid
    namespace does it). ``ready``: a launcher started ahead, waiting at its second gate, and the argument file
    it is to run (:func:`transports.sandbox.gate.payload`); then ``argv`` is not started.

    Raises :class:`TooLong` for E2BIG, ``OSError``/``TraceError`` when the launcher cannot start, and
    :class:`NotReleased` when ``ready`` ended before it took the run (the caller starts the run's own)."""
    start = time.perf_counter()
    if ready is not None and not ready[0].release(ready[1], stdin=stdin is not None, watch=watch,
                                                  input_of=input_of, log_fd=log_fd):
        discard_ready(ready[0])
        raise NotReleased
    if ready is not None:
        tracer = ready[0]
        assert tracer.proc is not None
        proc = tracer.proc
    else:
        tracer = Tracer(argv, env=env, cwd=cwd, stdin=stdin is not None, watch=watch, launcher_execs=launcher_execs,
                        input_of=input_of, log_fd=log_fd, inner=inner)
        try:
            # shielded: a cancellation landing after the thread started the run would lose the process
            with anyio.CancelScope(shield=True):
                proc = await anyio.to_thread.run_sync(tracer.start, limiter=_threads)
        except OSError as e:
            if e.errno == errno.E2BIG:
                raise TooLong(e.errno, e.strerror) from None
            raise
    pipes = frozenset(os.fstat(p.fileno()).st_ino for p in (proc.stdout, proc.stderr) if p is not None)
    notify_r, notify_w = os.pipe()
    os.set_blocking(notify_r, False)
    expired = threading.Event()
    ended = threading.Event()  # watch() has killed everything and joined the tracer

    def watch() -> None:
        """The run's clock and end, on a thread of their own: a loop held by other work can neither
        stretch nor cut a run. The end: the command's first program has exited and no process of
        the command holds its output any more (as ssh and docker exec wait for the last writer),
        or the time limit; then everything of the run is killed."""
        deadline = time.monotonic() + timeout_s
        if not tracer.main_exited.wait(max(0.0, deadline - time.monotonic())):
            expired.set()
        else:
            while True:
                began = time.monotonic()
                if not tracer.holds(pipes, deadline):
                    break
                if time.monotonic() >= deadline:
                    expired.set()
                    break
                # checks spaced by twice their own cost: a command with thousands of descriptors cannot
                # keep a harness core busy with them
                time.sleep(max(HOLDER_POLL_S, 2 * (time.monotonic() - began)))
        mark("end: output holders checked")
        tracer.kill_all()  # what is left (bwrap's init, jobs writing elsewhere) ends now
        on_end()
        # joined here, not from the loop: the run is over only when nothing of it is left, and one
        # thread hop fewer per run
        tracer.join()
        mark("end: kill, reap (tracer joined)")
        ended.set()
        os.write(notify_w, b"x")

    out, err = _Sink(output_cap, drain_cap), _Sink(output_cap, drain_cap)
    timed_out = False
    try:
        async with anyio.create_task_group() as outer:
            outer.start_soon(lambda: anyio.to_thread.run_sync(watch, limiter=_threads))
            try:
                with anyio.move_on_after(timeout_s + BACKSTOP_S) as scope:  # a backstop only: watch() ends runs
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(_read, proc.stdout, out, tracer)
                        tg.start_soon(_read, proc.stderr, err, tracer)
                        if stdin is not None:
                            # a stream fed to a launcher started ahead waits for the command's exec: if the
                            # launcher ends first, nothing was taken from it and the run's own gets it whole
                            tg.start_soon(_feed, proc.stdin, stdin,
                                          tracer if ready is not None and not isinstance(stdin, bytes) else None)
                        await anyio.wait_readable(notify_r)
                        # the run is over and all of it killed; a process of another run that was handed
                        # the pipe must not keep the readers waiting: take what is buffered, then stop
                        tg.cancel_scope.cancel()
                    for pipe, sink in ((proc.stdout, out), (proc.stderr, err)):
                        _drain_now(pipe, sink)
                timed_out = expired.is_set() or scope.cancelled_caught
            finally:  # also on a cancellation from outside: watch() can only return once all is killed
                if not ended.is_set():
                    tracer.kill_all()
                    on_end()
    finally:
        if not ended.is_set():  # watch() did not finish the run (it could not start): finish it here
            tracer.kill_all()
            on_end()
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(tracer.join, limiter=_threads)
        for fd in (notify_r, notify_w):
            os.close(fd)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass
    status = None if timed_out or tracer.status is None else os.waitstatus_to_exitcode(tracer.status)
    return Outcome(status=status, stdout=out.stream(), stderr=err.stream(), timed_out=timed_out,
                   exec_ms=(time.perf_counter() - start) * 1000, trace=tracer.trace)


def discard_ready(tracer: Tracer) -> None:
    """End a launcher started ahead that no run will use: everything of it killed, its thread joined and its
    pipes closed off the caller's path (:mod:`transports.sandbox.reaper`)."""
    tracer.kill_all()

    def finish() -> None:
        tracer.join(BACKSTOP_S)
        proc = tracer.proc
        for pipe in (proc.stdin, proc.stdout, proc.stderr) if proc is not None else ():
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass
    reaper.later(finish)


@dataclass
class _Sink:
    """One output stream while it is read: up to ``cap`` bytes kept, every byte counted."""

    cap: int
    drain_cap: int
    buf: bytearray = field(default_factory=bytearray)
    total: int = 0
    truncated: bool = False
    drained: bool = False

    def take(self, chunk: bytes) -> bool:
        """Keep what fits; False once past ``drain_cap`` (the run must be killed)."""
        self.total += len(chunk)
        room = self.cap - len(self.buf)
        if room > 0:
            self.buf += chunk[:room]
        if self.total > self.cap:
            self.truncated = True
        if self.total >= self.drain_cap:
            self.drained = True
            return False
        return True

    def stream(self) -> Stream:
        return Stream(bytes(self.buf).decode("utf-8", errors="replace"), self.truncated, self.drained)


def _drain_now(pipe, sink: _Sink) -> None:
    """What is still buffered in a pipe once the run is over, read without waiting."""
    if pipe is None or pipe.closed or sink.drained:
        return
    try:
        while chunk := os.read(pipe.fileno(), 1 << 16):
            if not sink.take(chunk):
                break
    except OSError:  # BlockingIOError: nothing more buffered
        pass


async def _read(pipe, sink: _Sink, tracer: Tracer) -> None:
    """Read until EOF; past ``drain_cap`` kill the run (closing our end would not stop a writer)."""
    if pipe is None:
        return
    fd = pipe.fileno()
    os.set_blocking(fd, False)
    try:
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                await anyio.wait_readable(fd)
                continue
            if not chunk:
                break
            if not sink.take(chunk):
                tracer.kill_all()
                break
    except OSError:
        pass


async def _feed(pipe, source: bytes | AsyncIterator[bytes], after: Tracer | None = None) -> None:
    """Copy stdin data into the process; a reader that exits early is not an error. Given ``after``, nothing
    is taken from ``source`` before that run's command was exec'd, and nothing at all if it never was."""
    if after is not None:
        if not after.began.is_set():
            await anyio.to_thread.run_sync(after.began.wait, limiter=_threads)  # set at the latest at the end
        if not after.trace.execs:
            pipe.close()
            return
    fd = pipe.fileno()
    os.set_blocking(fd, False)

    async def send(data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                n = os.write(fd, view)
            except BlockingIOError:
                await anyio.wait_writable(fd)
                continue
            view = view[n:]

    try:
        if isinstance(source, bytes):
            await send(source)
        else:
            async for chunk in source:
                await send(chunk)
    except Exception:  # noqa: BLE001 - a reader gone, or a source that failed: the input ends, the run goes on
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass


__all__ = ["Outcome", "Stdin", "Stream", "TooLong", "discard_ready", "run_traced"]
