"""Exec tracing: the kernel's own record of every program a run executed.

Why the kernel
    ``received`` used to be reported by processes inside the sandbox (a shim, a
    channel, a history file), which run as the same user as the command they
    measure, so a command could close, forge or replace them. Here the host traces
    the run's whole process tree with ``ptrace``, for exec and fork events only
    (``PTRACE_O_TRACEEXEC``, ``TRACEFORK``, ``TRACEVFORK``, ``TRACECLONE``,
    resumed with ``PTRACE_CONT``, so ordinary system calls never stop; the one exception
    is the interactive shell ``input_of`` picks, see :mod:`transports.sandbox.shellcopy`). At an exec
    stop the new program image is loaded but none of its instructions has run; the
    host then reads ``/proc/PID/cmdline``, ``/proc/PID/environ`` and the device and
    inode of ``/proc/PID/exe``. Nothing in the sandbox takes part: a process has one
    tracer, so no process of the run can trace another or detach itself, and a
    program is identified by the file it executes, never by a name it was given.

Why ptrace and not seccomp user notification
    A ``SECCOMP_RET_USER_NOTIF`` filter must be installed inside the sandbox (bwrap
    takes a compiled filter but hands back no listener), needs libseccomp to build,
    and at the notification the exec has not happened yet (a path to resolve, a race
    with the file). The ptrace exec stop is after the kernel committed the exec, and
    costs two wait round trips per fork or exec: measured 1.3 ms on top of a 7.1 ms
    bwrap run (``quotebench bench``).

Threads
    ptrace binds a tracee to the *thread* that traces it, and ptrace stops are
    reported to ``waitpid``. So one dedicated thread per run spawns the launcher,
    traces it and waits with ``__WALL | __WNOTHREAD``: it sees only its own child
    and its own tracees, never the event loop's other children, and nothing else
    in the process can steal its events (no other thread waits on its pids). The
    launcher's first line waits for one line on its stdin (:data:`GATE_PREFIX`), which
    the thread writes only once it has seized the launcher, so the trace starts before
    the launcher executes anything, with no stop at all under bwrap (where the launcher
    itself is never stopped at: its execs of setpriv and bwrap are not the command's) and
    one interrupt without it (see :data:`transports.sandbox.ptrace.SEIZE_OPTIONS`); a launcher that stopped itself
    cost a stop, a wait and a ``SIGCONT`` stop more, and two exec stops. A harness that
    dies before it wrote that line closes the pipe, and the launcher's ``read`` ends it
    (exit 125, nothing of the run started); one that dies after the seize takes the
    launcher with it (``PTRACE_O_EXITKILL``). Nothing can be left waiting, untraced.

Killing
    The tracer knows every live process of the run (each is a tracee from its
    fork on), so :meth:`Tracer.kill_all` ends all of them by pid, whatever process
    group, session or cgroup they moved to; ``PTRACE_O_EXITKILL`` ends them too if
    the tracer thread dies.

Bounds
    At most ``MAX_EXECS`` execs are kept (later ones are counted); a command line
    is read up to ``MAX_ARGV`` bytes for the programs the caller watches (shells)
    and ``SHORT_ARGV`` for others; an environment up to ``MAX_ENV``. Every read is
    of a kernel file named by a kernel pid.

Why one module (over 400 lines)
    The spawn, the wait loop and the event handlers share one state machine per run (which pids are
    alive, which is the command's first program, what is being killed); split,
    each part would reach into the others' state. The data it fills (:mod:`transports.sandbox.trace`),
    the one shell's system-call copy (:mod:`transports.sandbox.shellcopy`) and the kernel's calls and
    numbers (:mod:`transports.sandbox.ptrace`) are apart.

Errors
    :class:`TraceError` (one line) when ptrace is not permitted here (a container
    seccomp profile, Yama ``ptrace_scope`` 2 or 3), raised by :meth:`Tracer.start`;
    ``Sandbox.run`` turns it into a one-line ``SandboxError`` (a recorded harness error).
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from tasks import forking

from . import phases, ptrace
from .dispositions import catch_ignored
from .shellcopy import ShellCopy
from .trace import Exec, Identity, Trace, identity

__all__ = ["GATE_PREFIX", "Exec", "Identity", "Trace", "TraceError", "Tracer", "identity"]

MAX_EXECS = 1024
MAX_IN_PLACE = 64
MAX_ARGV = 2 << 20       # more than the kernel passes to one exec (its stack limit / 4 caps that)
SHORT_ARGV = 4096
MAX_ENV = 1 << 20
MAX_KEPT = 16 << 20      # all watched command lines and environments of one run together: past it, SHORT_ARGV and no env
GATE_PREFIX = "read qb_gate || exit 125; case $qb_gate in -) exec </dev/null;; esac; "
"""What the launcher's first shell runs before anything else: it waits for the tracer's line on stdin
(:data:`GATE_INPUT` when the run's input follows on that pipe, :data:`GATE_NO_INPUT` when the run's stdin is
``/dev/null``), and exits 125, having run nothing, when the pipe closes first. ``read`` takes its input one
byte at a time from a pipe, so input that follows the line is left for the command, whole."""
GATE_INPUT = b"\n"
GATE_NO_INPUT = b"-\n"

class TraceError(RuntimeError):
    """Exec tracing is not possible on this machine; the message is one line."""


class Tracer:
    """Spawns one launcher argv in its own thread and traces its process tree.

    The command's first program is the first exec traced past the launcher's own (``inner``,
    ``launcher_execs``); the run's exit status is that program's, as the kernel reported it, whatever
    its parent (bwrap's init, which outlives it while background jobs run) does later.

    ``input_of``: a test on an exec; the first program it accepts (an interactive shell whose input is
    a terminal) is also stopped at its system calls, and every byte it ``read(2)``s from fd 0 is kept
    in ``trace.input``, read from its memory by the host at the syscall's exit. ``log_fd``: that
    shell's descriptor for its own record; what it and its forks write to that file is kept in
    ``trace.shell_log`` (:mod:`transports.sandbox.shellcopy`).

    ``watch``: the program files (identities) whose command line is read whole and whose
    environment is read; every other exec keeps ``SHORT_ARGV`` bytes. ``inner``: the command's
    first program starts in a child of the launcher (bwrap's pid 2), so the launcher's own execs
    (setpriv, bwrap) are never stopped at, and the first exec traced is the command's.
    ``launcher_execs``: how many execs traced at the start belong to the launcher (setpriv, without
    bwrap; 0 with ``inner``): they are left out of :attr:`trace`.

    Lifecycle: :meth:`start` (blocking until the child exists and is seized, or raising
    ``OSError``/``TraceError``), then the caller reads the pipes, awaits :attr:`main_exited`
    (a threading.Event) and calls :meth:`kill_all`; :meth:`join` returns when every traced
    process is gone. ``status`` is the launcher's wait status."""

    def __init__(self, argv: list[str], *, env: dict[str, str], cwd: str, stdin: bool,
                 watch: frozenset[Identity] = frozenset(), launcher_execs: int = 0, inner: bool = False,
                 input_of: Callable[[Exec], bool] | None = None, log_fd: int | None = None,
                 late_fd: int | None = None, pass_fds: tuple[int, ...] = ()) -> None:
        self.argv, self.env, self.cwd, self.stdin = argv, env, cwd, stdin
        self.late_fd = late_fd  # a pre-started launcher's argument file: the run is bound by release()
        self._passed = tuple(fd for fd in (late_fd, *pass_fds) if fd is not None)  # and what its gate reads besides
        self.gate_reached = threading.Event()  # a launcher started ahead is at its second gate, or the run is over
        self.watch = watch
        self.inner = inner
        self.skip = launcher_execs
        self.input_of = input_of
        self._root: int | None = None     # the command's first program: its exit ends the run's main part
        self._holder: int | None = None   # the last process found holding the run's output
        self.trace = Trace()
        self.copy = ShellCopy(self.trace, log_fd)  # the shell input_of picks: stopped at its system calls
        self.status: int | None = None
        self.main_exited = threading.Event()
        self.began = threading.Event()  # the command's first program was exec'd, or the run is over
        self.proc: subprocess.Popen[bytes] | None = None
        self._alive: set[int] = set()
        self._unforked: set[int] = set()    # alive, seen at a stop before their parent's fork event was read
        self._gone_early: set[int] = set()  # exited before their parent's fork event was read (at a stop or not)
        self._lock = threading.Lock()
        self._killing = False
        self._seq = 0
        self._in_place = 0
        self._kept = 0  # bytes of watched command lines and environments kept so far (MAX_KEPT)
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._main, name="qb-tracer", daemon=True)
        self._phases = phases.current()  # the tracer thread does not inherit the caller's context

    # -- the caller's side ---------------------------------------------------------------

    def start(self) -> subprocess.Popen[bytes]:
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            raise self._error
        assert self.proc is not None
        return self.proc

    def release(self, payload: bytes, *, stdin: bool, watch: frozenset[Identity],
                input_of: Callable[[Exec], bool] | None, log_fd: int | None) -> bool:
        """Bind the run to a launcher started ahead (``late_fd``) that waits at its second gate
        (:mod:`transports.sandbox.gate`): what the tracer must know is set first, then ``payload``
        (the command's argv) is written to the argument file and the gate's line sent. False
        when the launcher is gone (nothing of the run started)."""
        assert self.late_fd is not None and self.proc is not None and self.proc.stdin is not None
        if self.main_exited.is_set():
            return False
        self.stdin, self.watch, self.input_of, self.copy.log_fd = stdin, watch, input_of, log_fd
        self._phases = phases.current()
        os.ftruncate(self.late_fd, 0)
        os.pwrite(self.late_fd, payload, 0)
        # the clock before the line: the gate's exec, which the tracer marks, may come first
        released_at = time.perf_counter_ns() if self._phases is not None else 0
        try:  # one line into an empty pipe: never blocks
            os.write(self.proc.stdin.fileno(), GATE_INPUT if stdin else GATE_NO_INPUT)
        except OSError:
            return False
        if self._phases is not None:
            self._phases.mark("launch: release the launcher started ahead", released_at)
        if not stdin:
            self.proc.stdin.close()
            self.proc.stdin = None
        return True

    def kill_all(self) -> None:
        """SIGKILL every process of the run, now and as any still being forked appears."""
        with self._lock:
            self._killing = True
            for pid in self._alive:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

    def join(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def holds(self, pipes: frozenset[int], deadline: float) -> bool:
        """Whether a live process of the command (its first program's descendants, by fork, wherever
        they were reparented) still holds one of the ``pipes`` (inode numbers) open: read from the
        kernel's ``/proc/PID/fd`` links, never from anything the command says. The last holder found is
        looked at first, its standard descriptors first, so a run waiting on one background job costs a
        few reads per check. A check that reaches ``deadline`` (time.monotonic) stops there and answers
        True: the caller's clock decides."""
        if self._root is None:
            return False
        with self._lock:
            alive = set(self._alive)
        order = sorted(alive, key=lambda p: p != self._holder)
        for pid in order:
            if not self._descends(pid):
                continue
            if self._holding(pid, pipes, deadline):
                self._holder = pid
                return True
        self._holder = None
        return time.monotonic() >= deadline

    def _holding(self, pid: int, pipes: frozenset[int], deadline: float) -> bool:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")[:4096]
        except OSError:
            return False
        fds.sort(key=lambda fd: (len(fd), fd))  # 0, 1, 2 first: where a job's output usually is
        for i, fd in enumerate(fds):
            if i % 256 == 0 and time.monotonic() >= deadline:
                return True
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("pipe:[") and int(link[6:-1]) in pipes:
                return True
        return False

    def _descends(self, pid: int) -> bool:
        for _ in range(100_000):  # a chain of forks; bounded, never a loop
            if pid == self._root:
                return True
            parent = self.trace.forks.get(pid)
            if parent is None:
                return False
            pid = parent[0]
        return False

    # -- the tracer thread ---------------------------------------------------------------

    def _main(self) -> None:
        try:
            self._spawn()
        except BaseException as e:  # noqa: BLE001 - handed to start()'s caller
            self._error = e
            self._started.set()
            self.gate_reached.set()
            self.began.set()
            self._done.set()
            return
        self._started.set()
        try:
            self._loop()
        finally:
            self._link_parents()
            self.copy.finish()
            self.main_exited.set()
            self.gate_reached.set()
            self.began.set()
            self._done.set()

    def _link_parents(self) -> None:
        """A new child can report its exec before its parent reports the fork: name the parents now."""
        forks = self.trace.forks
        self.trace.execs = [replace(e, parent=forks[e.pid][0], forked_at=forks[e.pid][1])
                            if e.parent is None and e.pid in forks else e for e in self.trace.execs]

    def _spawn(self) -> None:
        if self._phases is not None:
            self._phases.mark("launch: thread hops to the tracer")
        proc = forking.popen(  # no executable is open for writing while the launcher is forked
            self.argv, env=self.env, cwd=self.cwd, start_new_session=True, close_fds=True,
            pass_fds=self._passed,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self.proc = proc
        pid = proc.pid
        assert proc.stdin is not None
        if self._phases is not None:
            self._phases.mark("launch: spawn (fork, exec of the limits shell)")
        try:
            ptrace.call(ptrace.PTRACE_SEIZE, pid, ptrace.SEIZE_OPTIONS)
        except OSError as e:
            ptrace.kill(pid)
            _, status = os.waitpid(pid, ptrace.WNOTHREAD)
            proc.returncode = os.waitstatus_to_exitcode(status)
            proc.stdin.close()
            if e.errno == errno.ESRCH:  # the launcher died before its first line: nothing of the run started
                self._finish_main(status)
                return
            raise TraceError(f"exec tracing is not permitted here (ptrace: {e.strerror}); received cannot be "
                             "taken from the kernel") from None
        with self._lock:
            self._alive.add(pid)
        ended = None if self.inner else self._trace_execs_of(pid)
        if ended is not None:  # killed from outside before its gate: nothing of the run started
            with self._lock:
                self._alive.discard(pid)
            proc.returncode = os.waitstatus_to_exitcode(ended)
            proc.stdin.close()
            self._finish_main(ended)
            return
        try:  # one line into an empty pipe: never blocks
            os.write(proc.stdin.fileno(), GATE_INPUT if self.stdin or self.late_fd is not None else GATE_NO_INPUT)
        except OSError:  # the launcher is gone already: its exit is reported to the loop
            pass
        if not self.stdin and self.late_fd is None:
            proc.stdin.close()
            proc.stdin = None
        if self._phases is not None:
            self._phases.mark("launch: seize, gate line")

    def _trace_execs_of(self, pid: int) -> int | None:
        """Turn exec events on for the seized launcher, which executes the command itself: interrupted (it is
        at most waiting at its gate: no exec of it can come before), given every option, resumed. Returns
        its wait status if it ended instead (killed from outside)."""
        ptrace.request(ptrace.PTRACE_INTERRUPT, pid)
        while True:
            _, status = os.waitpid(pid, ptrace.WALL | ptrace.WNOTHREAD)
            if not os.WIFSTOPPED(status):
                return status
            if status >> 16 == ptrace.EVENT_STOP:
                break
            ptrace.request(ptrace.PTRACE_CONT, pid, os.WSTOPSIG(status))  # a signal on its way: deliver it
        ptrace.request(ptrace.PTRACE_SETOPTIONS, pid, ptrace.OPTIONS)
        ptrace.request(ptrace.PTRACE_CONT, pid)
        return None

    def _finish_main(self, status: int) -> None:
        """The command's first program (or, if it never started, the launcher) has exited."""
        if self.status is None:
            self.status = status
            if self._phases is not None:
                self._phases.mark("command: its own run (exec to exit)")
        self.main_exited.set()

    def _loop(self) -> None:
        main = self.proc.pid if self.proc is not None else -1
        while True:
            try:
                pid, status = os.waitpid(-1, ptrace.WALL | ptrace.WNOTHREAD)
            except ChildProcessError:
                return
            if os.WIFEXITED(status) or os.WIFSIGNALED(status):
                with self._lock:
                    known = pid in self._alive
                    self._alive.discard(pid)
                    if (pid in self._unforked or not known) and pid != main:
                        self._gone_early.add(pid)  # its parent's fork event is still to come: it must not revive it
                    self._unforked.discard(pid)
                if len(self.trace.exits) < 64 * MAX_EXECS:  # threads exit too; bounded; a reused pid keeps its last status
                    self.trace.exits[pid] = status
                self.copy.exited(pid, status)
                if pid == main and self.proc is not None:
                    self.proc.returncode = os.waitstatus_to_exitcode(status)  # never reaped again by subprocess
                if pid == self._root or (pid == main and self._root is None):
                    self._finish_main(status)
                continue
            if not os.WIFSTOPPED(status):
                continue
            self._stopped(pid, status)

    def _stopped(self, pid: int, status: int) -> None:
        sig, event = os.WSTOPSIG(status), status >> 16
        inject = 0
        if event in (ptrace.EVENT_FORK, ptrace.EVENT_VFORK, ptrace.EVENT_CLONE):
            child = ptrace.event_msg(pid)
            if child:
                self._seq += 1
                self.trace.forks[child] = (pid, self._seq)
                with self._lock:
                    early = child in self._alive  # it stopped before this event: the copy asked the kernel then
                    self._unforked.discard(child)
                    if child in self._gone_early:
                        # it stopped, ran and exited before this event was read (waitpid reports tracees in no
                        # order of time): adding it would leave a dead pid in the kill list, which the end of the
                        # run would SIGKILL once the kernel has given that number to another process
                        self._gone_early.discard(child)
                    else:
                        self._alive.add(child)
                        if self._killing:
                            ptrace.kill(child)
                self.copy.forked(pid, child, early)
        elif event == ptrace.EVENT_EXEC:
            self._exec(pid)
        elif event == ptrace.EVENT_STOP:
            if self.inner and self.proc is not None and pid != self.proc.pid:
                # an auto-attached child's first stop (or any later one): exec events on before it runs on; the
                # launcher alone keeps SEIZE_OPTIONS
                ptrace.request(ptrace.PTRACE_SETOPTIONS, pid, ptrace.OPTIONS)
            if sig in ptrace.STOP_SIGNALS:  # a group stop: stay stopped until SIGCONT, as without a tracer
                ptrace.request(ptrace.PTRACE_LISTEN, pid)
                return
        elif event == 0 and sig == ptrace.SYSCALL_STOP:
            self.copy.syscall(pid)
        elif event == 0:
            inject = sig  # a signal on its way: deliver it
        with self._lock:
            new = pid not in self._alive  # a new child can report before its parent's fork event
            if new:
                self._alive.add(pid)
                self._unforked.add(pid)
            if self._killing:
                ptrace.kill(pid)
        if new:
            self.copy.early(pid)
        ptrace.request(ptrace.PTRACE_SYSCALL if self.copy.stops(pid) else ptrace.PTRACE_CONT, pid, inject)

    def _exec(self, pid: int) -> None:
        self._seq += 1
        # a thread other than the leader that execs takes the leader's id; its own id is gone without an
        # exit to report, so it must leave the live set, or the end-of-run kill would signal whatever host
        # process is given that number next
        former = ptrace.event_msg(pid)
        if former and former != pid:
            with self._lock:
                self._alive.discard(former)
        self.copy.execed(pid)  # whatever pid was (the shell, one of its forks), it is another program now
        if self.skip > 0:
            self.skip -= 1
            if self.late_fd is not None:
                self.gate_reached.set()
            return
        if self._root is None:
            self._root = pid
            if self._phases is not None:
                self._phases.mark("launch: cgroup join, rlimits, setpriv, bwrap, to the command's exec"
                                  if self.late_fd is None else "launch: the gate reads the run, the command's exec")
        # past the cap only the first program's own pid is followed (an exec in place there is the
        # boundary's candidate), and only MAX_IN_PLACE more times: a flood elsewhere cannot hide the final shell
        if len(self.trace.execs) >= MAX_EXECS and (
                not self.trace.execs or pid != self.trace.execs[0].pid or self._in_place >= MAX_IN_PLACE):
            self.trace.dropped += 1
            return
        if len(self.trace.execs) >= MAX_EXECS:
            self._in_place += 1
        exe = None
        try:
            st = os.stat(f"/proc/{pid}/exe")
            exe = (st.st_dev, st.st_ino)
        except OSError:
            pass
        watched = exe in self.watch
        # 1024 execs of a shell with 2 MiB of arguments and 1 MiB of environment would be 3 GiB in the
        # harness: past MAX_KEPT a watched exec is read short and without its environment, so it is
        # incomplete (a boundary found there is split), never a kept copy
        full = watched and self._kept < MAX_KEPT
        argv = ptrace.read_proc(pid, "cmdline", MAX_ARGV if full else SHORT_ARGV)
        env = ptrace.read_proc(pid, "environ", MAX_ENV) if full else None
        if full:
            self._kept += len(argv[0]) if argv else 0
            self._kept += len(env[0]) if env else 0
        parent, forked_at = self.trace.forks.get(pid, (None, None))
        record = Exec(
            seq=self._seq, pid=pid, parent=parent, forked_at=forked_at, exe=exe,
            argv=ptrace.split(argv[0]) if argv else (), argv_complete=bool(argv and argv[1]),
            env=ptrace.split(env[0]) if env else None, env_complete=not watched or bool(env and env[1]),
        )
        self.trace.execs.append(record)
        if not self.began.is_set():
            self.began.set()
        if self.input_of is not None and self.trace.reader is None and self.input_of(record):
            self.copy.adopt(pid, record)


catch_ignored()  # before any run: a signal ignored here is not ignored in what a run executes
