"""The kernel's tracing interface as the tracer uses it: ptrace request numbers and options, wait flags, and
the calls that read a tracee's ``/proc`` files or act on a tracee that may be gone meanwhile (killed), where
that is not an error. Nothing here keeps state; :mod:`transports.sandbox.exectrace` is the state machine.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal

_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.restype = ctypes.c_long
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]

PTRACE_CONT = 7
PTRACE_GETEVENTMSG = 0x4201
PTRACE_SEIZE = 0x4206
PTRACE_LISTEN = 0x4208
PTRACE_SYSCALL = 24
PTRACE_SETOPTIONS = 0x4200
PTRACE_INTERRUPT = 0x4207
TRACEEXEC = 0x10
OPTIONS = 0x1 | 0x2 | 0x4 | 0x8 | TRACEEXEC | 0x100000  # TRACESYSGOOD, TRACEFORK, TRACEVFORK, TRACECLONE, EXITKILL
SEIZE_OPTIONS = OPTIONS & ~TRACEEXEC
"""What the launcher is seized with. Its own exec may still be under way when the tracer seizes it (a vfork
parent wakes before the exec is reported), and an exec event reported then would count as one of the
launcher's stages; with exec events off at the seize, none is. They are turned on at a stop: an auto-attached
child's first stop, or one interrupt of the launcher where it executes the command itself (no bwrap)."""
SYSCALL_STOP = signal.SIGTRAP | 0x80
EVENT_FORK, EVENT_VFORK, EVENT_CLONE, EVENT_EXEC, EVENT_STOP = 1, 2, 3, 4, 128
WALL = 0x40000000
WNOTHREAD = 0x20000000
STOP_SIGNALS = (signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)


def call(request: int, pid: int, data: int = 0) -> int:
    """One ptrace request; OSError with the kernel's errno when refused."""
    result = _libc.ptrace(request, pid, None, ctypes.c_void_p(data))
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def event_msg(pid: int) -> int:
    """The stopped tracee's event message (a new child's pid, an exec's former thread id); 0 if gone."""
    out = ctypes.c_ulong()
    if _libc.ptrace(PTRACE_GETEVENTMSG, pid, None, ctypes.byref(out)) == -1:
        return 0
    return out.value


def read_proc(pid: int, name: str, cap: int) -> tuple[bytes, bool] | None:
    """Up to ``cap`` bytes of ``/proc/PID/name`` and whether that was all of it."""
    try:
        fd = os.open(f"/proc/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks, total = [], 0
        while total <= cap:
            chunk = os.read(fd, min(1 << 16, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        data = b"".join(chunks)
        return data[:cap], len(data) <= cap
    except OSError:
        return None
    finally:
        os.close(fd)


def split(data: bytes) -> tuple[bytes, ...]:
    """A NUL-separated ``/proc`` list (cmdline, environ) as its items."""
    return tuple(data[:-1].split(b"\0")) if data.endswith(b"\0") else tuple(data.split(b"\0")) if data else ()


def request(req: int, pid: int, data: int = 0) -> None:
    """A ptrace request on a tracee that may be gone meanwhile (killed): then there is nothing to do."""
    try:
        call(req, pid, data)
    except OSError as e:
        if e.errno != errno.ESRCH:
            raise


def kill(pid: int) -> None:
    """SIGKILL, where a process already gone is not an error."""
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
