"""The embedded SSH server of the ``ssh`` transport: asyncssh on 127.0.0.1, one per process.

Why a thread of its own
    The server has to outlive any one event loop: pytest runs every test in its
    own ``anyio.run``, the CLI may run several, and the OpenSSH master connection
    (started once, outside every sandbox) is bound to the server's port. A server
    living on a caller's loop would die with that loop and take the master with
    it. So the server runs on a private asyncio loop in a daemon thread, started
    once per process (and again after a fork, or if that thread ever died);
    callers on any loop, of any anyio backend, talk to it through thread-safe
    calls. Cost: one thread, and one thread hop only on the slow path of
    :meth:`EmbeddedServer.finish`.

Which sandbox a request belongs to
    Every delivery registers its sandbox under a fresh random token
    (:meth:`EmbeddedServer.open`); the client sends the token as the environment
    variable ``QB_SANDBOX`` in an SSH ``env`` request of the session (OpenSSH:
    ``SendEnv QB_SANDBOX``; a mux client forwards it through the shared master,
    one session at a time, so one master connection serves every sandbox). The
    server reads it from ``process.env``. No token, or one that is not (or no
    longer) registered: the request is refused, exit status 255, one line on
    stderr. The remote side never sees the variable: it runs with the sandbox's
    own scrubbed environment.

What a request runs
    An exec request runs as ``Sandbox.run(["bash", "-c", request])`` of that
    sandbox: the same working directory, environment, limits and isolation (no
    network) as every other transport's final shell; never a login shell, so no
    rc file is read. stdout and stderr go back as the sandbox captured them
    (capped like every transport's), and the exit status is the sandbox's: a
    death by signal n is 128+n (sent as an ``exit-status``, not an
    ``exit-signal``, which OpenSSH would turn into 255); a timeout is reported to
    the client as 137 (SIGKILL) and to the transport as ``timed_out``. A shell
    request (OpenSSH sends one when the command is empty) runs ``bash`` reading
    nothing, as sshd would, and records no program. If the client goes away
    mid-run (the local side timed out) the run is cancelled, which kills its
    process group.

Limits of the emulation
    Output is sent when the run is over, not streamed (the sandbox collects it);
    the two streams are separate anyway, so only timing differs. An exec request
    that is not valid UTF-8 (the local shell can make one, e.g. from ``$(printf
    '\\377')``) is refused by asyncssh before it reaches us: OpenSSH then exits
    255 without a message and ``received`` is None; a real sshd would run it.

Listeners
    A Unix socket (in the endpoint's directory, bound into the sandboxes) for
    the OpenSSH master, which reaches it from its own network namespace (see
    :mod:`transports.ssh.master`), and for the fallback client, which runs
    inside the sandbox with no network (a socket path is not
    network-namespaced); and TCP on 127.0.0.1 (ephemeral port), which names
    the server in known_hosts and serves an unconfined setup.

Sessions only, nothing else
    A reply can reach this server with any SSH channel or request it likes
    (``ssh -O proxy`` makes the shared master a plain relay, with no question
    asked). The server runs in the harness's process, outside every sandbox,
    so anything it opened would act on the host: it accepts session channels
    and nothing else. asyncssh's ``SSHServer`` already refuses direct-tcpip,
    direct-streamlocal, tcpip-forward, streamlocal-forward, tun and tap by
    default (2.24: every ``*_requested`` returns False); :class:`SessionsOnly`
    says so explicitly, so that a future default cannot open a hole, and the
    client key carries ``no-port-forwarding,no-agent-forwarding,
    no-X11-forwarding,no-pty`` on top (asyncssh enforces them before asking
    the server object). Agent and X11 forwarding, ptys, scp and sftp are off in
    the listener's options as well.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import secrets
import socket
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import asyncssh

from ..sandbox import Execution, Sandbox, SandboxError
from ..shells import DEFAULT, Shell

TOKEN_ENV = "QB_SANDBOX"
"""The session environment variable that names the sandbox of a request."""

REFUSED = 255
TIMEOUT_STATUS = 128 + 9

KEY_RESTRICTIONS = "no-port-forwarding,no-agent-forwarding,no-X11-forwarding,no-pty"
"""authorized_keys options of the client key: asyncssh enforces these before any server callback."""


def new_token() -> str:
    """An unguessable sandbox token (128 bits)."""
    return secrets.token_hex(16)


class SessionsOnly(asyncssh.SSHServer):
    """Refuses every forwarding channel and request, explicitly (see "Sessions only, nothing else")."""

    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int) -> bool:
        return False  # direct-tcpip (-L, -D, -W): would connect from the host

    def server_requested(self, listen_host: str, listen_port: int) -> bool:
        return False  # tcpip-forward (-R): would listen on the host

    def unix_connection_requested(self, dest_path: str) -> bool:
        return False  # direct-streamlocal: would connect to a host socket

    def unix_server_requested(self, listen_path: str) -> bool:
        return False  # streamlocal-forward: would create a host socket

    def tun_requested(self, unit: int | None) -> bool:
        return False

    def tap_requested(self, unit: int | None) -> bool:
        return False


@dataclass
class Session:
    """One delivery's registration: its sandbox and what the server did for it.

    ``requests`` are the exec request strings received for this token, in
    order (the first is the transport's ``received``); ``executions`` the
    sandbox runs they produced. Both are appended on the server thread and
    read by the delivering caller only after :meth:`EmbeddedServer.finish`.
    """

    sandbox: Sandbox
    shell: Shell = DEFAULT  # the remote side's shell: what a real sshd's login shell would be
    requests: list[str] = field(default_factory=list)
    executions: list[Execution] = field(default_factory=list)
    shell_requests: int = 0
    active: int = 0
    cancelled: bool = False
    idle: threading.Event = field(default_factory=threading.Event)
    scopes: set[anyio.CancelScope] = field(default_factory=set)


class EmbeddedServer:
    """An asyncssh server on 127.0.0.1 (and optionally a Unix socket) running requests in registered sandboxes."""

    def __init__(self, host_key: asyncssh.SSHKey, client_public_key: str, unix_path: Path | None = None) -> None:
        self._host_key = host_key
        self._authorized = asyncssh.import_authorized_keys(KEY_RESTRICTIONS + " " + client_public_key)
        self.unix_path = unix_path
        self.port = 0
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._pid = os.getpid()
        self.connections = 0
        """SSH connections accepted so far: with the OpenSSH master it stays at 1 however many commands run."""

    # -- lifecycle (called from any thread) ----------------------------------

    def start(self, timeout: float = 10.0) -> int:
        """Start the server thread and return the TCP port once both listeners accept."""
        ready: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._main, args=(ready,), name="qb-ssh-server", daemon=True)
        self._thread.start()
        self.port = ready.result(timeout)
        return self.port

    def alive(self) -> bool:
        """False after a fork (the thread is not in the child) or if the server thread ended."""
        return (self._pid == os.getpid() and self._thread is not None and self._thread.is_alive()
                and self._loop is not None and not self._loop.is_closed())

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel running requests, close the listeners and end the thread."""
        loop, stop = self._loop, self._stop
        if loop is None or stop is None or self._pid != os.getpid():
            return
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
        try:
            for s in sessions:
                self._cancel_threadsafe(s)
            loop.call_soon_threadsafe(stop.set)
        except RuntimeError:  # the loop is already closed
            return
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _main(self, ready: concurrent.futures.Future[int]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve(ready))
        except BaseException as e:  # noqa: BLE001 - reported to start() when it happens before ready
            if not ready.done():
                ready.set_exception(e)
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    async def _serve(self, ready: concurrent.futures.Future[int]) -> None:
        self._stop = asyncio.Event()
        options = dict(
            server_host_keys=[self._host_key], authorized_client_keys=self._authorized,
            server_factory=SessionsOnly, process_factory=self._handle, encoding=None,
            password_auth=False, kbdint_auth=False, gss_host=None, allow_pty=False,
            agent_forwarding=False, x11_forwarding=False, allow_scp=False, sftp_factory=None,
            keepalive_interval=0, login_timeout=30, acceptor=self._accepted,
        )
        listeners = [await asyncssh.listen("127.0.0.1", 0, **options)]  # type: ignore[arg-type]
        port = listeners[0].sockets[0].getsockname()[1]
        if self.unix_path is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(str(self.unix_path))
            os.chmod(self.unix_path, 0o600)
            listeners.append(await asyncssh.listen(sock=sock, **options))  # type: ignore[arg-type]
        ready.set_result(port)
        try:
            await self._stop.wait()
        finally:
            for acceptor in listeners:
                acceptor.close()
            for acceptor in listeners:
                await acceptor.wait_closed()

    def _accepted(self, _conn: asyncssh.SSHServerConnection) -> None:
        self.connections += 1

    # -- sandbox registry (called from the delivering loop) --------------------

    def open(self, sandbox: Sandbox, shell: Shell = DEFAULT, token: str | None = None) -> str:
        """Register ``sandbox`` for one delivery, run by ``shell``, under ``token`` (made by :func:`new_token`
        for it alone; a token already registered is not reused) or a fresh one."""
        session = Session(sandbox, shell)
        session.idle.set()
        with self._lock:
            if token is None or token in self._sessions:
                token = new_token()
            self._sessions[token] = session
        return token

    async def finish(self, token: str) -> Session:
        """Unregister ``token``, cancel what still runs for it, and return what the server did.

        Fast path (the usual one: a request is released as soon as its
        sandbox run is over, before the exit status is sent, so by the time
        the client has exited there is nothing left): no thread hop.
        Otherwise (the local side timed out or was cancelled while a run was
        still going) the runs are cancelled, which kills their process
        groups, and this waits for them in a worker thread, so that nothing
        of the delivery outlives ``deliver``.
        """
        with self._lock:
            session = self._sessions.pop(token)
        if not session.idle.is_set():
            self._cancel_threadsafe(session)
            await anyio.to_thread.run_sync(session.idle.wait)
        return session

    def _cancel_threadsafe(self, session: Session) -> None:
        loop = self._loop
        if loop is None:
            return

        def cancel() -> None:
            session.cancelled = True
            for scope in list(session.scopes):
                scope.cancel()

        try:
            loop.call_soon_threadsafe(cancel)
        except RuntimeError:
            session.idle.set()  # the loop is gone, and its runs with it

    # -- request handling (server thread) ----------------------------------------

    async def _handle(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        token = process.env.get(TOKEN_ENV)
        with self._lock:
            session = self._sessions.get(token) if token else None
            if session is not None:
                session.active += 1
                session.idle.clear()
        if session is None:
            why = "no sandbox token (" + TOKEN_ENV + ")" if not token else "unknown sandbox token"
            await self._refuse(process, f"quotebench ssh: request refused: {why}; "
                                        "this server only runs commands for registered sandboxes\n")
            return
        released = False

        def release() -> None:
            # called as soon as the sandbox run is over, *before* the exit status goes out, so that
            # the client (and with it the delivery) can never finish first: finish() then takes its
            # fast path, and a cancellation never lands on a run that is already done
            nonlocal released
            if not released:
                released = True
                with self._lock:
                    session.active -= 1
                    if session.active == 0:
                        session.idle.set()

        try:
            await self._run(process, session, release)
        finally:
            release()

    async def _refuse(self, process: asyncssh.SSHServerProcess[bytes], message: str) -> None:
        try:
            process.stderr.write(message.encode())
            await process.stderr.drain()
            process.exit(REFUSED)
        except (asyncssh.Error, OSError, BrokenPipeError):
            process.close()

    async def _run(self, process: asyncssh.SSHServerProcess[bytes], session: Session,
                   release: Callable[[], None]) -> None:
        command = process.command
        if command is None:  # a shell request: sshd would start a shell reading stdin, which is empty
            argv = session.shell.argv()
            session.shell_requests += 1
        else:
            session.requests.append(command)
            argv = session.shell.argv("-c", command)
        execution: Execution | None = None
        error: str | None = None
        with anyio.CancelScope() as scope:
            session.scopes.add(scope)
            if session.cancelled:  # finish() came between the lookup and here (same thread: no race)
                scope.cancel()
            try:
                async with anyio.create_task_group() as tg:
                    async def client_gone() -> None:
                        # the client went away (its side timed out or was killed): stop the run
                        await process.channel.wait_closed()
                        tg.cancel_scope.cancel()

                    tg.start_soon(client_gone)
                    try:
                        execution = await session.sandbox.run(argv, stdin=_client_stdin(process))
                    except SandboxError as e:
                        error = str(e)
                    tg.cancel_scope.cancel()
            finally:
                session.scopes.discard(scope)
        if execution is not None:
            session.executions.append(execution)
        release()
        if execution is None:
            if error is not None:
                await self._refuse(process, f"quotebench ssh: {error}\n")
            else:
                process.close()
            return
        status = TIMEOUT_STATUS if execution.timed_out or execution.exit_code is None else execution.exit_code
        try:
            if execution.stdout.text:
                process.stdout.write(execution.stdout.text.encode("utf-8", "surrogateescape"))
            if execution.stderr.text:
                process.stderr.write(execution.stderr.text.encode("utf-8", "surrogateescape"))
            await process.stdout.drain()
            await process.stderr.drain()
            process.exit(status & 0xFF)
        except (asyncssh.Error, OSError, BrokenPipeError):
            process.close()


_NOT_INPUT = (asyncssh.BreakReceived, asyncssh.SignalReceived, asyncssh.TerminalSizeChanged)
"""Channel requests asyncssh raises from the next read of stdin. A client sends them at will (OpenSSH: ``~B``
after a newline, SIGWINCH to ``ssh -tt``); sshd without a terminal ignores them, and so does this server: one
escaping the read took the remote run out of the record."""


async def _client_stdin(process: asyncssh.SSHServerProcess[bytes]) -> AsyncIterator[bytes]:
    """The client's stdin as it arrives, as sshd hands it to the command (``ssh host cmd <<< text``)."""
    while True:
        try:
            chunk = await process.stdin.read(65536)
        except _NOT_INPUT:
            continue
        except Exception:  # noqa: BLE001 - the channel failed (or a request not known here): the input ends
            return
        if not chunk:
            return
        yield chunk
