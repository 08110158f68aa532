"""Executions in worker processes (:mod:`transports.worker`), ``--jobs`` of them, one execution each at a time.

Why
    A record's host-side work holds Python's GIL, so one process uses about one core however many executions
    it runs at once; workers use the cores the machine has. Each is a fresh interpreter (``python -m
    transports.worker``, never a fork of this threaded process) given this process's settings first.

What a caller sees
    :meth:`Workers.execute` is :func:`transports.execute.execute`: the same arguments, the same record (rebuilt
    from the worker's JSON, as the results file would hold it). A worker that dies during an execution makes
    that execution raise :class:`WorkerError` (one line; the campaign writes it to ``errors.jsonl`` and a rerun
    tries again) and is replaced for the next one. An execution cancelled while a worker runs it (a Ctrl-C)
    ends its run at once: the worker is sent ``SIGTERM`` and replaced.

Lifecycle
    ``async with Workers.start(jobs)``: the workers start at once; leaving closes their stdin, and each ends
    after the execution it has in hand (killed after ``CLOSE_WAIT_S``). If this process dies, their stdin ends
    all the same. Their stderr lines are forwarded to ours, each distinct line once (every worker warns about
    the same missing isolation). A campaign of fewer than ``WORKERS_FROM`` executions, and any with
    ``QB_NO_WORKERS=1``, runs them in this process instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from tasks.schema import Task
from transports.execute import execute
from transports.results.record import Record
from transports.sandbox import Limits
from transports.worker import frame, settings

CLOSE_WAIT_S = 60.0
MAX_LINE = 256 << 20


class WorkerError(Exception):
    """A worker ended during an execution, or answered with something that is not a record."""


class RemoteError(WorkerError):
    """What the execution raised in the worker, named as it was there (``kind``): a campaign describes it
    exactly as it describes the same error raised in this process."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def error_name(e: BaseException) -> str:
    """The name an error is recorded under: its own class's, or, raised in a worker, the class's there."""
    return e.kind if isinstance(e, RemoteError) else type(e).__name__


WORKERS_FROM = 64
"""Fewer executions than this run in this process: starting a worker (an interpreter and its imports, about
0.4 s of CPU) pays off only over many records. ``QB_WORKERS_FROM=N`` changes it."""


def enabled(jobs: int, executions: int) -> bool:
    """Whether ``executions`` records, ``jobs`` at once, run in worker processes."""
    if jobs <= 1 or os.environ.get("QB_NO_WORKERS") == "1":
        return False
    try:
        least = int(os.environ.get("QB_WORKERS_FROM", WORKERS_FROM))
    except ValueError:
        print(f"quotebench: QB_WORKERS_FROM={os.environ['QB_WORKERS_FROM']!r} is not a whole number; using "
              f"{WORKERS_FROM}", file=sys.stderr)
        least = WORKERS_FROM
    return executions >= least


class _Worker:
    def __init__(self, proc: Process) -> None:
        self.proc = proc
        assert proc.stdout is not None
        self.lines = BufferedByteReceiveStream(proc.stdout)


class Workers:
    """``jobs`` worker processes and the executions handed to them."""

    def __init__(self, jobs: int, tg: anyio.abc.TaskGroup, here: frozenset[str] = frozenset()) -> None:
        self.here = here  # transports whose executions stay in this process (see maybe_workers)
        self._tg = tg
        self._settings = frame(settings())
        self._idle: list[_Worker] = []
        self._free = anyio.Semaphore(jobs)
        self._seen: set[bytes] = set()
        self._all: list[_Worker] = []

    @classmethod
    @asynccontextmanager
    async def start(cls, jobs: int, here: frozenset[str] = frozenset()) -> AsyncIterator[Workers]:
        async with anyio.create_task_group() as tg:
            pool = cls(jobs, tg, here)
            try:
                async with anyio.create_task_group() as starting:
                    for _ in range(jobs):
                        starting.start_soon(pool._spawn)
                yield pool
            finally:
                with anyio.CancelScope(shield=True):
                    await pool._close()
                tg.cancel_scope.cancel()

    async def _spawn(self) -> None:
        # this process's import path: the workers run the code it runs, wherever that was found
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        proc = await anyio.open_process([sys.executable, "-m", "transports.worker"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        worker = _Worker(proc)
        assert proc.stdin is not None
        await proc.stdin.send(self._settings)
        self._tg.start_soon(self._forward, proc)
        self._all.append(worker)
        self._idle.append(worker)

    async def _forward(self, proc: Process) -> None:
        """The worker's stderr, to ours: each distinct line once."""
        assert proc.stderr is not None
        lines = BufferedByteReceiveStream(proc.stderr)
        while True:
            try:
                line = await lines.receive_until(b"\n", MAX_LINE)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound, anyio.ClosedResourceError):
                return
            if line not in self._seen:
                self._seen.add(line)
                sys.stderr.buffer.write(line + b"\n")
                sys.stderr.flush()

    async def execute(self, task: Task, transport: str, command: str, *, limits: Limits,
                      **fields: Any) -> Record:
        """:func:`transports.execute.execute` in an idle worker."""
        async with self._free:
            if not self._idle:
                await self._spawn()
            worker = self._idle.pop()
            try:
                line = await self._ask(worker, (task, transport, command, limits, fields))
            except WorkerError:
                with anyio.CancelScope(shield=True):
                    await self._retire(worker)
                raise
            self._idle.append(worker)
        if line[:1] == b"E":
            kind, _, message = line[1:].decode("utf-8", "replace").partition(": ")
            raise RemoteError(kind, message)
        try:
            return Record.model_validate(json.loads(line[1:]))  # json.loads: \udcXX escapes are kept
        except ValueError as e:
            raise WorkerError(f"the worker's record does not validate: {str(e).splitlines()[0]}") from None

    async def _ask(self, worker: _Worker, job: tuple[Any, ...]) -> bytes:
        """Send ``job``, wait for its answer. Cancelled meanwhile (a Ctrl-C, a campaign ended), the worker is
        told to end the run (``SIGTERM``) and is retired: an answer left unread would be the next job's."""
        assert worker.proc.stdin is not None
        try:
            await worker.proc.stdin.send(frame(job))
            line = await worker.lines.receive_until(b"\n", MAX_LINE)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._retire(worker, end_run=True)
            raise
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError,
                anyio.ClosedResourceError) as e:
            raise WorkerError(f"the worker process ended during this execution ({type(e).__name__})") from None
        except anyio.DelimiterNotFound:
            raise WorkerError(f"the worker's answer exceeds {MAX_LINE} bytes") from None
        if line[:1] not in (b"R", b"E"):
            raise WorkerError("the worker's answer is not a record")
        return line

    async def _retire(self, worker: _Worker, end_run: bool = False) -> None:
        if worker in self._all:
            self._all.remove(worker)
        if end_run and worker.proc.returncode is None:
            worker.proc.terminate()
        await _stop(worker.proc)

    async def _close(self) -> None:
        async with anyio.create_task_group() as tg:
            for worker in self._all:
                tg.start_soon(_stop, worker.proc)
        self._all.clear()
        self._idle.clear()


async def _stop(proc: Process) -> None:
    """End of stdin: the worker finishes what it has in hand and exits; killed if it does not in time."""
    if proc.stdin is not None:
        await proc.stdin.aclose()
    with anyio.move_on_after(CLOSE_WAIT_S):
        await proc.wait()
        return
    proc.kill()
    await proc.wait()


async def execute_with(workers: Workers | None, task: Task, transport: str, command: str, *, limits: Limits,
                       **fields: Any) -> Record:
    """In a worker where there are workers, else in this process."""
    if workers is None or transport in workers.here:
        return await execute(task, transport, command, limits=limits, **fields)
    return await workers.execute(task, transport, command, limits=limits, **fields)


@asynccontextmanager
async def maybe_workers(jobs: int, transports: list[str], executions: int) -> AsyncIterator[Workers | None]:
    """Workers for ``jobs`` executions at once, or None where one process does (``jobs`` 1, fewer than
    ``WORKERS_FROM`` ``executions``, ``QB_NO_WORKERS``).

    The components ``transports`` need are made ready here first, once (an npm package installed), so that
    no worker installs one; a transport that lacks one keeps its executions in this process, where the
    failure is remembered and each of them becomes its error record at once, as with one process."""
    if not enabled(jobs, executions):
        yield None
        return
    from transports.components import missing
    from transports.registry import get

    here: set[str] = set()
    for t in dict.fromkeys(transports):
        if await anyio.to_thread.run_sync(missing, get(t)) is not None:
            here.add(t)
    async with Workers.start(jobs, frozenset(here)) as pool:
        yield pool
