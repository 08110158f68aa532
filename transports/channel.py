"""The received channel: how the host learns what an inner shell received, in a way R cannot forge.

Why not a file
    The first design had the capture shim write its argument vector to a file in
    the sandbox, which the host then read. Everything in the sandbox belongs to the
    command: it could replace that file with a FIFO (the host hung), a symlink to a
    host file (the host copied it into the record) or plain forged text.

The channel
    A ``SOCK_SEQPACKET`` Unix socket pair. The host keeps one end, with
    ``SO_PASSCRED``, so the kernel attaches the sender's pid (translated into the
    host's pid namespace) to every message; the other end is inherited by the outer
    shell as an open file descriptor. Nothing of it exists in the file system, and a
    socket cannot be reopened through ``/proc/PID/fd``.

Protocol (see :mod:`transports.capture` for the shell side)
    1. The outer shell's ``BASH_ENV`` file, which runs before any of the outer
       program, sends ``outer``: the first message's pid is the outer shell.
    2. The capture shim, run where the outer program says ``bash``, sends ``shim``
       and stops itself (SIGSTOP). Once it is stopped the host reads the *kernel's*
       view of the sender: ``/proc/PID/exe`` must be bash, ``/proc/PID/cmdline``
       must be ``bash -p SHIM ARGS...`` and its environment must not preload code
       (``LD_PRELOAD``, ``LD_AUDIT``, ``LD_LIBRARY_PATH``); ``received`` is taken
       from ``ARGS`` as the kernel holds them, not from anything the shim says.
       Only then does the host resume it (SIGCONT, addressed to that pid: several shims
       announcing at once cannot take each other's answer), and the shim closes the channel and execs
       the real bash, so the inner shell and everything R runs there never hold it.
    3. A sender that is neither the outer shell (the boundary, exec'd in place) nor
       one of its children (a paste split at ``&`` or ``;`` forked it) is ignored,
       and so is a message that fails the checks; the record's ``received_note``
       says so.

Bounds
    At most ``MAX_MESSAGES`` messages from forked shells are inspected (later ones
    are answered, not read; the outer shell's own pid is always inspected), a message is at most 64 bytes, and a command line is read up to
    ``MAX_CMDLINE`` bytes. ``/proc`` files are kernel files named by a kernel pid:
    no path the command controls is ever opened.

Residual risk (documented in docs/sandbox.md)
    A process that can write into the shim's memory between its message and the
    host's read (ptrace of one's own child) could make the host read a command line
    it chose; no bash would then have run it. Nothing short of a seccomp filter
    closes that, and the channel never lets it reach a file or a host process.
"""

from __future__ import annotations

import os
import signal
import time
import socket
import struct
from dataclasses import dataclass, field

import anyio

MAX_MESSAGES = 64
BATCH = 128        # messages read before the event loop gets a turn
MAX_READ = 8192    # messages read in one run at most
MAX_CMDLINE = 1 << 20
_CREDS = struct.calcsize("3i")
PRELOAD_VARS = (b"LD_PRELOAD=", b"LD_AUDIT=", b"LD_LIBRARY_PATH=")


@dataclass
class Capture:
    """What the channel saw during one run."""

    outer_pid: int | None = None
    boundary: list[list[bytes]] = field(default_factory=list)  # argv of shims exec'd in the outer shell's pid
    forked: list[tuple[int, list[bytes]]] = field(default_factory=list)  # (pid, argv) of shims the outer shell forked
    ignored: list[str] = field(default_factory=list)            # one line per message not taken


def _read_proc(pid: int, name: str, cap: int) -> bytes | None:
    try:
        fd = os.open(f"/proc/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks: list[bytes] = []
        total = 0
        while total <= cap:
            chunk = os.read(fd, min(1 << 16, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


STOP_WAIT_S = 2.0


def _stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped (state T), or gone (nothing to wait for)."""
    stat = _read_proc(pid, "stat", 4096)
    if stat is None:
        return True
    state = stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3]
    return state in (b"T", b"t", b"Z", b"X", b"")


MAX_NOTES = 8


def _note(cap: Capture, line: str) -> None:
    """At most MAX_NOTES lines of what was ignored, then one count (the note stays one short line)."""
    if len(cap.ignored) < MAX_NOTES:
        cap.ignored.append(line[:200])
    elif len(cap.ignored) == MAX_NOTES:
        cap.ignored.append("more messages were ignored")


def _resume(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except OSError:
        pass


def _ppid(pid: int) -> int | None:
    status = _read_proc(pid, "status", 1 << 14)
    if status is None:
        return None
    for line in status.splitlines():
        if line.startswith(b"PPid:"):
            try:
                return int(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


class ReceivedChannel:
    """One run's channel; see the module docstring. Use as a context manager around the run.

    ``fd`` is the end to pass to the child (``pass_fds``). A genuine announcer runs one of
    the interpreters ``exe`` (by the basename of ``/proc/PID/exe``) and its command line,
    after the interpreter's own name, starts with ``expect`` (the capture shim: ``-p SHIM``;
    the ssh transport's client wrapper: ``WRAPPER``); what follows is its argument vector.
    """

    def __init__(self, shim: str, *, expect: tuple[str, ...] | None = None,
                 exe: frozenset[str] = frozenset({"bash"})) -> None:
        self.expect = tuple(e.encode() for e in (expect if expect is not None else ("-p", shim)))
        self.exe = exe
        self._host, self._child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._host.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self._host.setblocking(False)
        self._child.set_inheritable(True)
        self.capture = Capture()
        self._seen = 0
        self._outer_seen = 0
        self._read = 0
        self._pending: dict[int, tuple[list | None, float]] = {}

    @property
    def fd(self) -> int:
        return self._child.fileno()

    def __enter__(self) -> "ReceivedChannel":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._child.close()
        self._host.close()

    # -- receiving -------------------------------------------------------------

    async def serve(self) -> None:
        """Answer messages until cancelled (the caller cancels when the run is over)."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._resumer)
            while self._read < MAX_READ:  # past it, a flood of R's own waits on a full socket until its run ends
                await anyio.wait_readable(self._host)
                self._receive()
                await anyio.sleep(0)  # never starve the run's own timeout

    def drain(self) -> None:
        """Handle what is waiting now, without blocking (after the run: its senders are gone)."""
        self._receive()
        for pid, (where, _since) in list(self._pending.items()):
            if where is not None:
                self._take(pid, where)
            _resume(pid)
        self._pending.clear()

    async def _resumer(self) -> None:
        """One task for every announcer: once a pid has stopped itself, read it (when it is to be inspected)
        and resume it by its pid. At most one entry per live process (the run's pids cgroup bounds them);
        a pid that never stops is given up after STOP_WAIT_S and resumed anyway."""
        while True:
            now = time.monotonic()
            for pid, (where, since) in list(self._pending.items()):
                if _stopped(pid) or now - since > STOP_WAIT_S:
                    del self._pending[pid]
                    try:
                        if where is not None and _stopped(pid):
                            self._take(pid, where)
                    finally:
                        _resume(pid)
            await anyio.sleep(0.0002 if self._pending else 0.002)

    def _receive(self) -> None:
        """Read what is waiting (at most BATCH messages): every announcer joins ``_pending`` with where its
        argv belongs, or None: only to be resumed once it has stopped, never before, or it would stop for good."""
        for _ in range(BATCH):
            self._read += 1
            try:
                msg, anc, _flags, _addr = self._host.recvmsg(64, socket.CMSG_SPACE(_CREDS))
            except OSError:  # BlockingIOError: nothing more now
                return
            pid = None
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(data) >= _CREDS:
                    pid = struct.unpack("3i", data[:_CREDS])[0]
            if not msg and pid is None:
                return
            if msg == b"shim" and pid and pid in self._pending:
                continue  # the same announcer again (a loop of R's own): one entry is enough
            where = self._classify(pid, msg)
            if msg == b"shim" and pid:
                self._pending[pid] = (where, time.monotonic())

    def _classify(self, pid: int | None, msg: bytes) -> list | None:
        """Where a message's argv would go (the boundary or the forked list), or None to leave it."""
        cap = self.capture
        if cap.outer_pid is None:
            if msg == b"outer" and pid:
                cap.outer_pid = pid
            else:
                cap.ignored.append("the channel's first message did not come from the outer shell")
            return None
        if msg != b"shim":
            _note(cap, f"an unexpected message from pid {pid}")
            return None
        if pid is None:
            cap.ignored.append("a message without the sender's credentials")
            return None
        if pid == cap.outer_pid:  # at most one shell can be exec'd in the outer shell's place
            self._outer_seen += 1
            return cap.boundary if self._outer_seen == 1 else None
        self._seen += 1
        if self._seen > MAX_MESSAGES:
            if self._seen == MAX_MESSAGES + 1:
                cap.ignored.append(f"more than {MAX_MESSAGES} shells were forked; the rest were not inspected")
            return None
        if _ppid(pid) != cap.outer_pid:
            return None  # a bash run deeper inside the outer expansion: not at the boundary
        return cap.forked

    def _take(self, pid: int, where: list) -> None:
        argv, why = self._verified_argv(pid)
        if argv is None:
            _note(self.capture, f"a capture message from pid {pid} failed verification: {why}")
        elif where is self.capture.boundary:
            self.capture.boundary.append(argv)
        else:
            self.capture.forked.append((pid, argv))

    def _verified_argv(self, pid: int) -> tuple[list[bytes] | None, str]:
        """The shim's arguments as the kernel holds them, or None and why not."""
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            return None, "the process was gone"
        if os.path.basename(exe) not in self.exe:
            return None, f"it runs {exe}, not {' or '.join(sorted(self.exe))}"
        cmdline = _read_proc(pid, "cmdline", MAX_CMDLINE)
        if cmdline is None:
            return None, "its command line could not be read"
        if len(cmdline) > MAX_CMDLINE:
            return None, f"its command line is longer than {MAX_CMDLINE} bytes"
        parts = cmdline.split(b"\0")
        if parts and parts[-1] == b"":
            parts.pop()
        k = len(self.expect)
        if len(parts) < k + 1 or tuple(parts[1:k + 1]) != self.expect:
            return None, "it is not the capture shim"
        environ = _read_proc(pid, "environ", MAX_CMDLINE) or b""
        for var in environ.split(b"\0"):
            if var.startswith(PRELOAD_VARS):
                return None, f"it was started with {var.split(b'=')[0].decode()} set"
        return parts[k + 1:], ""
