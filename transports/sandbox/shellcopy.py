"""What one interactive shell read and wrote, copied by the host from its memory at its system calls.

Why
    On the ``tmux`` paths the program that gets R is an interactive bash that reads its terminal: no
    exec carries R, so :mod:`transports.sandbox.exectrace` also stops that one shell at its system calls
    (``PTRACE_SYSCALL``) and copies what it ``read(2)``s from fd 0 (``received``). What bash then did
    with the text (history expansion, a line read as data) is its own record, written by its prompt
    hooks. That record used to be a file the host read after the run, so a later line could rewrite
    the record of an earlier one. Here nothing is read back: every ``write(2)`` of the shell (and of
    its hooks) to the record is copied at the syscall's exit, in the order the tracer sees them. A
    line's entry is written by ``PS0``, before the line runs, so it is in the host's hands before
    anything of that line can act: a later line can only append.

Which writes are the record
    A builtin writes through fd 1 even when told ``>&N`` (bash dup2s N onto 1), so a write is the
    record's by the open file it goes to, never by its descriptor number: the file the shell's
    descriptor ``log_fd`` referred to at the shell's exec stop, when nothing of R had been typed yet
    (the pane starts before any key). Its device and inode are compared at each write's exit, from
    ``/proc/PID/fd``. Replacing or renaming the file changes nothing: the descriptor keeps its inode.

    Whose writes: the shell's own (``PROMPT_COMMAND`` runs in it), and those of the one fork it
    makes first after it read from its terminal, until that fork execs: bash expands ``PS0`` (a
    command was read) or ``PS2`` (a continuation) right after the read, before anything else, and
    a prompt's ``$(...)`` is a fork that stays bash. Syscall-tracing every fork of the shell until
    it execs would cost ~3 ms per command the pane runs (bash resets its signals in each child).

Who wrote it
    Each copied write is attributed to its writer (``Trace.shell_log_writers``): the shell itself, or
    the hook fork. The hooks write ``P`` only from the shell (``PROMPT_COMMAND``) and ``C``/``W`` only
    from the fork (``PS0``/``PS2``'s ``$(...)``), so the route's parser takes an entry from the other
    writer as written by the command: a builtin of the shell (``printf >&N``, after ``read`` took a later
    line as data, or through a moved descriptor) cannot write a command's entry unseen.

Why nothing here can hide damage
    A write that is copied but is not a hook's (a command's fork that happened to come first, a
    builtin writing to the file) is one more entry after those already copied: the route's parser
    counts what the hooks never write, or an entry from the wrong writer, as damage. A hook's write that is not copied (its fork
    missed, another program's write, a ``writev``) leaves an entry out, and a missing entry makes
    bash's record differ from what was read, which is damage too. So the choice of processes is a
    matter of cost and of honest runs staying undamaged, never of what a command can hide.

Bounds
    ``MAX_INPUT`` bytes of input and ``MAX_LOG`` of record; past either, the copy is marked
    incomplete (``Trace.input_complete``, ``Trace.shell_log_complete``), never silently cut.

Cost
    Only the shell and those forks stop at their system calls (two stops each): about 1000 stops for
    ``true`` typed into the pane, within the noise of a tmux run (~90 ms). A write costs one
    ``stat`` of its descriptor more, a copy one ``pread`` of ``/proc/PID/mem``.
"""

from __future__ import annotations

import ctypes
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .trace import Exec, Identity, Trace

_libc = ctypes.CDLL(None, use_errno=True)

PTRACE_GET_SYSCALL_INFO = 0x420E
SYSCALLS = {0xC000003E: (0, 1), 0xC00000B7: (63, 64)}  # AUDIT_ARCH_X86_64, AUDIT_ARCH_AARCH64 -> (read, write)
MAX_INPUT = 1 << 20
MAX_LOG = 4 << 20


class ShellCopy:
    """The tracer's state for the one shell it copies: which pids stop at their system calls, and the copies.

    The results go to ``trace`` (``reader``, ``input``, ``input_complete``, ``shell_log``,
    ``shell_log_complete``, ``reader_status``); the tracer asks :meth:`stops` how to resume a pid."""

    def __init__(self, trace: Trace, log_fd: int | None) -> None:
        self.trace = trace
        self.log_fd = log_fd
        self.reader: int | None = None     # the shell's pid while it is the shell (None after it execs another program)
        self.shell: int | None = None      # its pid for good: whose exit status is the shell's
        self.log_file: Identity | None = None  # the open file the hooks write their record to
        self.forks: set[int] = set()       # the shell's forks that run a hook (PS0, PS2), until they exec
        self._armed = False                # the shell read from its terminal since its last fork
        self._entries: dict[int, tuple[int, int, int, int]] = {}  # pid -> (nr, fd, buffer, count) at syscall entry
        self._input = bytearray()
        self._log = bytearray()

    def stops(self, pid: int) -> bool:
        """Whether ``pid`` is resumed with ``PTRACE_SYSCALL`` (else ``PTRACE_CONT``)."""
        return pid == self.reader or pid in self.forks

    def finish(self) -> None:
        """The run is over: hand the copies to the trace."""
        self.trace.input, self.trace.shell_log = bytes(self._input), bytes(self._log)

    # -- the process tree -------------------------------------------------------------

    def adopt(self, pid: int, program: Exec) -> None:
        """``pid`` has just exec'd the shell (nothing of it ran yet): copy it, and take the record's file."""
        self.reader = self.shell = pid
        self.trace.reader = program
        if self.log_fd is not None:
            try:
                st = os.stat(f"/proc/{pid}/fd/{self.log_fd}")
                self.log_file = (st.st_dev, st.st_ino)
            except OSError:
                self.trace.shell_log_complete = False  # no record to copy: every entry would be missing

    def forked(self, parent: int, child: int, seen: bool) -> None:
        """A fork event (``seen``: the child stopped before it, and :meth:`early` decided): the shell's first
        fork since it read from its terminal is where it expands PS0 or PS2, so that one is copied."""
        if parent == self.reader:
            if self._armed and not seen:
                self.forks.add(child)
            self._armed = False

    def early(self, child: int) -> None:
        """A child stopped before its parent's fork event was seen: its parent, from the kernel's stat (the
        parent is still in that fork, so whether it had read since its last fork is still current)."""
        if self.reader is None or not self._armed:
            return
        try:
            with open(f"/proc/{child}/stat", "rb") as f:
                stat = f.read(1024)
            ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            return
        if ppid == self.reader:
            self.forks.add(child)

    def execed(self, pid: int) -> None:
        """Another program in ``pid``: not bash any more, so none of its writes is a hook's."""
        self.forks.discard(pid)
        self._entries.pop(pid, None)
        if pid == self.reader:
            self.reader = None

    def exited(self, pid: int, status: int) -> None:
        self.forks.discard(pid)
        self._entries.pop(pid, None)
        if pid == self.shell and self.trace.reader_status is None:
            # when, in the trace's order: the latest fork or exec recorded so far (forks are never dropped)
            last = max((seq for _, seq in self.trace.forks.values()), default=0)
            self.trace.reader_exit_seq = max(last, self.trace.execs[-1].seq if self.trace.execs else 0)
            self.trace.reader_status = status

    # -- the system calls ---------------------------------------------------------------

    def syscall(self, pid: int) -> None:
        """A system-call stop: remember the call at entry; at exit copy a read of the shell's fd 0, or a
        write of the shell or its forks to the record's file."""
        info = (ctypes.c_uint8 * 88)()
        if _libc.ptrace(PTRACE_GET_SYSCALL_INFO, pid, ctypes.c_void_p(88), info) <= 0:
            return
        raw = bytes(info)
        op, arch = raw[0], int.from_bytes(raw[4:8], "little")
        if op == 1:  # entry
            nr, fd, buf, count = (int.from_bytes(raw[o:o + 8], "little") for o in (24, 32, 40, 48))
            self._entries[pid] = (nr, fd, buf, count)
            return
        entry = self._entries.pop(pid, None)
        if op != 2 or entry is None:  # an exit with no entry: the first stop of a fork, say
            return
        nr, fd, buf, count = entry
        rval = int.from_bytes(raw[24:32], "little", signed=True)
        if rval <= 0:
            return
        read, write = SYSCALLS.get(arch, (-1, -1))
        if nr == read and fd == 0 and pid == self.reader:
            self._armed = True
            if not _append(pid, buf, min(rval, count), self._input, MAX_INPUT):
                self.trace.input_complete = False
        elif nr == write and self.log_file is not None and self._is_log(pid, fd):
            self.trace.shell_log_writers.append((len(self._log), pid != self.reader))
            if not _append(pid, buf, min(rval, count), self._log, MAX_LOG):
                self.trace.shell_log_complete = False

    def _is_log(self, pid: int, fd: int) -> bool:
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self.log_file


def _append(pid: int, address: int, size: int, into: bytearray, cap: int) -> bool:
    """Append ``size`` bytes of the tracee's memory at ``address`` to ``into``, keeping it within ``cap``;
    whether all of them were copied."""
    room = cap - len(into)
    if room <= 0:
        return False
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        data = os.pread(fd, min(size, room), address)
    except OSError:
        return False
    finally:
        os.close(fd)
    into += data
    return len(data) == size
