"""Host work of one session, off the serving event loop and bounded in time.

Why
    Everything the server does for a session touches what its commands made:
    the delivery reads back what the inner shell received, the validator reads
    the working directory, cleanup walks it. Any of these can block (a FIFO
    opened for reading), recurse too deep, or take long on a hostile tree. Run
    on the serving loop, one such read freezes every client at once, and an
    exception escaping a background task ends the server.

How
    Each session gets a :class:`Worker`: a daemon thread running its own event
    loop. Sandbox creation, the delivery (the transport's coroutine), the
    verdict and the cleanup run there; the serving loop only waits, at most a
    bound, and stays free for the other sessions. Work that overruns its bound
    raises :class:`Overrun` and is abandoned with its worker (the session gets
    a new one): a thread blocked in a system call cannot be stopped from
    outside, but a daemon thread neither blocks the others nor the exit of
    the process. Abandoned workers that are still blocked are counted
    (:func:`stuck`), so the operator can see them.

    The serving side needs the asyncio backend (the one ``serve`` and the
    tests use); on another backend the work runs in the caller's loop as
    before, unbounded.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

T = TypeVar("T")

_abandoned: list["Worker"] = []
_abandoned_lock = threading.Lock()


class Overrun(TimeoutError):
    """Host work of a session did not finish within its bound; it was abandoned."""

    def __init__(self, what: str, bound_s: float) -> None:
        super().__init__(f"{what} did not finish within {bound_s:g} s (abandoned)")


def stuck() -> int:
    """How many abandoned workers are still running (blocked host work the process carries)."""
    with _abandoned_lock:
        _abandoned[:] = [w for w in _abandoned if w.thread.is_alive()]
        return len(_abandoned)


def one_line(exc: BaseException, cap: int = 300) -> str:
    """``Type: message`` on one line, capped: what a record and stderr say about a harness failure."""
    text = " ".join(str(exc).split())
    what = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return what if len(what) <= cap else what[: cap - 3] + "..."


class Worker:
    """A daemon thread with its own event loop, for one session's host work."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self.retired = False
        self.thread = threading.Thread(target=self._main, name=f"qb-worker {name}", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            self._ready.set()
            await self._stop.wait()

        try:
            anyio.run(serve)  # on exit, asyncio's runner cancels and awaits what is still scheduled here
        finally:
            self._ready.set()  # never leave a waiter hanging, even if the loop could not start

    async def _started(self) -> asyncio.AbstractEventLoop:
        with anyio.move_on_after(5.0):
            while not self._ready.is_set():  # a thread start: well under a millisecond
                await anyio.sleep(0.0005)
        if self._loop is None or self._loop.is_closed():
            raise RuntimeError(f"worker {self.name} has no running loop")
        return self._loop

    async def call(self, what: str, bound_s: float, fn: Callable[..., Awaitable[T] | T], *args: Any) -> T:
        """``fn(*args)`` (a coroutine function or a plain one) on this worker, waited for at most ``bound_s``.

        Raises what ``fn`` raised, or :class:`Overrun` (the worker is then retired and must not be reused).
        The wait is not cut short by the caller's cancellation: callers shield it where a started
        command must be recorded, and otherwise the bound ends it."""
        if not _on_asyncio():
            result = fn(*args)
            return await result if inspect.isawaitable(result) else result  # type: ignore[return-value]
        loop = await self._started()
        future = asyncio.run_coroutine_threadsafe(_as_coroutine(fn, *args), loop)
        try:
            with anyio.fail_after(bound_s):
                return await asyncio.wrap_future(future)  # cancelling the wait cancels the work there
        except TimeoutError:
            self.retire(abandoned=True)
            raise Overrun(what, bound_s) from None

    def retire(self, abandoned: bool = False) -> None:
        """Stop the loop once it is free (at once when idle); ``abandoned``: it may never be, count it."""
        if self.retired:
            return
        self.retired = True
        if abandoned:
            with _abandoned_lock:
                _abandoned.append(self)
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:  # the loop is already closed
                pass


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def _as_coroutine(fn: Callable[..., Any], *args: Any) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        return await result
    return result
