"""What the ``ssh`` transport connects through: the embedded server or a real sshd, the generated
OpenSSH config and wrappers, and the master connection (see :mod:`transports.ssh` for the path).

Lifetime
    Endpoints (server thread, master, temp dir) are made lazily on first use,
    reused by every delivery from any event loop or thread, remade after a
    fork or if the master or server died, and torn down at interpreter exit
    (master terminated, server stopped, temp dir removed).

The private directory (0700)
    ``c/`` is bound read-only into every sandbox: the generated config, the
    wrappers, the server's Unix socket and ``c/m/``, the control directory
    (control socket and known_hosts), the only path the master may write, and
    only until its socket exists (then 0555). Keys and the master's policy
    helpers (``h/``) stay outside ``c/``. How the master is guarded:
    :mod:`transports.ssh.master`.

Why one module (over 400 lines)
    An endpoint is one lifetime: its server thread, master, keys, generated config and wrappers are made,
    reused, remade after a fork and torn down together; split, each part would hold the others' state.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Literal

import anyio

from tasks import forking

from . import master as ssh_master
from ..sandbox import hostuid
from ..sandbox import SYSTEM_PATH, Sandbox
from .target import Remote, configure, configured, parse_target  # noqa: F401 - re-exported (transports.ssh)
from .server import TOKEN_ENV, EmbeddedServer
from transports.sandbox.ownexit import at_exit

HOST_ALIAS = "qb-remote"
"""The ``<target>`` word of the outer text; the generated config maps every host to the endpoint."""

ARGV_ENV = "QB_SSH_ARGV"
CLIENT_ENV = "QB_SSH_CLIENT"
ClientKind = Literal["openssh", "asyncssh"]

GRACE_S = 1.0
"""Extra wall clock for the local side, so the remote run's own timeout fires first."""

MASTER_START_TIMEOUT_S = 15.0

_SYSTEM_TOPS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt")


class SshSetupError(RuntimeError):
    """The ssh path itself could not be set up (no client, master failed to connect, bad target)."""


# -- endpoints: private dir, configs, wrappers, server, master -------------------------


def openssh_program() -> str | None:
    """The OpenSSH client, looked up where the sandbox can see it (system directories)."""
    return shutil.which("ssh", path=SYSTEM_PATH)


FALLBACK_MODULES = ("asyncssh", "cryptography", "cffi", "_cffi_backend", "typing_extensions")


def _python_dirs(modules: tuple[str, ...] = FALLBACK_MODULES) -> tuple[Path, ...]:
    """Directories this Python needs (with ``modules``) that bwrap does not already bind.

    Only the interpreter's prefixes and the directories holding ``modules`` (for
    the fallback client: asyncssh and its dependencies): not ``sys.path``
    wholesale, which may name a home directory, and not the project (the client
    runs as a copied standalone script).
    """
    found: set[Path] = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(),
                        Path(sys.exec_prefix).resolve(), Path(sys.executable).resolve().parent}
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
            continue
        origin = Path(spec.origin).resolve()
        found.add(origin.parent.parent if spec.submodule_search_locations else origin.parent)
    kept = [p for p in found if not any(str(p) == t or str(p).startswith(t + "/") for t in _SYSTEM_TOPS)]
    kept.sort(key=lambda p: len(p.parts))
    result: list[Path] = []
    for p in kept:
        if not any(p == q or q in p.parents for q in result):
            result.append(p)
    return tuple(result)


WRAPPER = """#!/bin/sh
# quotebench ssh transport: see transports/ssh/transport.py. The host's exec trace reads this process's arguments
# (the ssh client's argv, from which received is computed for a real sshd) before any of it runs.
{exec_line}
"""
# the outer shell finds `ssh` through its hash table: $PATH stays what it is on every transport
ENTER = "hash -p {bin}/ssh ssh\n"


SOCKET_PATH_MAX = 107
"""The longest Unix socket path the kernel takes (sun_path is 108 bytes with its NUL)."""
_CONTROL_TAIL = len("/qb-ssh-4194304-abcdefgh/c/m/ctl") + 17  # OpenSSH binds ControlPath + ".<16 random>" first


def _short_temp_dir() -> str:
    """The temp directory, unless the master's control socket path would be too long under it (a deep TMPDIR,
    such as pytest's): then ``/tmp``, which :func:`transports.sandbox.sweep_leftovers` also sweeps."""
    base = os.path.realpath(tempfile.gettempdir())
    if len(base) + _CONTROL_TAIL <= SOCKET_PATH_MAX:
        return base
    if os.path.isdir("/tmp") and os.access("/tmp", os.W_OK | os.X_OK):
        return "/tmp"
    raise OSError(f"the temp directory {base} is too deep for the ssh master's control socket "
                  f"(at most {SOCKET_PATH_MAX - _CONTROL_TAIL} characters; set TMPDIR to a shorter one)")


class Endpoint:
    """Everything one target needs in this process; see the module docstring, "Lifetime"."""

    def __init__(self, remote: Remote | None) -> None:
        self.remote = remote
        self.pid = os.getpid()
        # named with our pid: a later run removes it if this process was killed (sandbox.sweep_leftovers)
        self.root = Path(tempfile.mkdtemp(prefix=f"qb-ssh-{os.getpid()}-", dir=_short_temp_dir())).resolve()  # 0700
        self.uid = hostuid.sandbox_uid()  # the sandbox's uid, which the master runs as too (OpenSSH's mux
        if self.uid is not None:          # serves only clients of its own uid)
            self.root.chmod(0o711)  # traversable, not listable: bwrap binds c/ as that uid
        self.client_dir = self.root / "c"  # the only part bound into sandboxes
        self.client_dir.mkdir(mode=0o755)
        self.control_dir = self.client_dir / "m"  # the only path the master may write (until it listens)
        self.control_dir.mkdir(mode=0o700)
        if self.uid is not None:
            os.chown(self.control_dir, self.uid, self.uid)
        self.control_path = self.control_dir / "ctl"
        self.known_hosts = self.control_dir / "known_hosts"  # the master adds a real sshd's key (accept-new)
        self.config_path = self.client_dir / "config"
        self.askpass, self.fdpass = ssh_master.write_helpers(self.root / "h")
        self.server: EmbeddedServer | None = None
        self.master: subprocess.Popen[bytes] | None = None
        self.key_path: Path | None = None
        self.enter: dict[ClientKind, Path] = {}
        self._fallback_binds: tuple[Path, ...] = ()
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    # -- building ------------------------------------------------------------

    def _build(self) -> None:
        import asyncssh

        host_key_line: str | None = None
        if self.remote is None:
            host_key = asyncssh.generate_private_key("ssh-ed25519")
            client_key = asyncssh.generate_private_key("ssh-ed25519")
            host_key.write_private_key(str(self.root / "host_ed25519"))
            self.key_path = self.root / "id_ed25519"
            client_key.write_private_key(str(self.key_path))
            client_pub = client_key.export_public_key().decode()
            (self.root / "id_ed25519.pub").write_text(client_pub)
            for p in (self.root / "host_ed25519", self.key_path):
                p.chmod(0o600)
            if self.uid is not None:  # the master (that uid) reads the client key; the host key stays ours
                os.chown(self.key_path, self.uid, self.uid)
            self.server = EmbeddedServer(host_key, client_pub, unix_path=self.client_dir / "server.sock")
            port = self.server.start()
            if self.uid is not None and self.server.unix_path is not None:
                os.chown(self.server.unix_path, self.uid, self.uid)  # connecting needs write permission
            host, user = "127.0.0.1", "qb"
            host_key_line = host_key.export_public_key().decode().strip()
            self.known_hosts.write_text(f"[{host}]:{port} {host_key_line}\n")
            if self.uid is not None:
                os.chown(self.known_hosts, self.uid, self.uid)
        else:
            host, port, user = self.remote.host, self.remote.port, self.remote.user
            self.key_path = Path(self.remote.key) if self.remote.key else None
            if self.key_path is not None and self.uid is not None:
                # the master runs as the sandbox's uid: it reads its own copy of the key, never the user's file
                copy = self.root / "id_remote"
                copy.write_bytes(self.key_path.read_bytes())
                copy.chmod(0o600)
                os.chown(copy, self.uid, self.uid)
                self.key_path = copy
            self.known_hosts.write_text("")
        self.host, self.port, self.user = host, port, user
        self.config_path.write_text(self._openssh_config())
        (self.client_dir / "fallback.json").write_text(json.dumps({
            "host": host, "port": port, "user": user or os.environ.get("USER") or "root",
            "key": str(self.key_path) if self.key_path else None, "host_key": host_key_line,
            "unix": str(self.client_dir / "server.sock") if self.server else None,
            "send_env": [TOKEN_ENV] if self.server else [],
        }))
        ssh = openssh_program()
        # the client is a standalone script copied next to the config, so the sandbox sees no project files
        shutil.copyfile(Path(__file__).with_name("client.py"), self.client_dir / "ssh_client.py")
        python_line = (f"PYTHONDONTWRITEBYTECODE=1; export PYTHONDONTWRITEBYTECODE\n"
                       f"exec {shlex.quote(sys.executable)} -I {shlex.quote(str(self.client_dir / 'ssh_client.py'))} "
                       f"--qb-config {shlex.quote(str(self.client_dir / 'fallback.json'))} \"$@\"")
        lines: dict[ClientKind, str | None] = {
            "openssh": f'exec {shlex.quote(ssh)} -F {shlex.quote(str(self.config_path))} "$@"' if ssh else None,
            "asyncssh": python_line,
        }
        for kind, exec_line in lines.items():
            if exec_line is None:
                continue
            bindir = self.client_dir / f"bin-{kind}"
            bindir.mkdir()
            forking.write_executable(bindir / "ssh", WRAPPER.format(exec_line=exec_line))
            self.enter[kind] = self.client_dir / f"enter-{kind}"
            self.enter[kind].write_text(ENTER.format(bin=shlex.quote(str(bindir))))
        self._fallback_binds = _python_dirs() + ((self.key_path,) if self.key_path else ())

    def _openssh_config(self) -> str:
        embedded = self.server is not None
        lines = [
            "# generated by quotebench (transports/ssh/transport.py); used with -F, nothing else is read",
            "Host *",
            f"  HostName {self.host}",
            f"  Port {self.port}",
            *([f"  User {self.user}"] if self.user else []),
            *([f'  IdentityFile "{self.key_path}"', "  IdentitiesOnly yes"] if self.key_path else []),
            f'  UserKnownHostsFile "{self.known_hosts}"',
            "  GlobalKnownHostsFile /dev/null",
            f"  StrictHostKeyChecking {'yes' if embedded else 'accept-new'}",
            "  CheckHostIP no",
            "  HashKnownHosts no",
            "  UpdateHostKeys no",
            "  BatchMode yes",
            "  PasswordAuthentication no",
            "  KbdInteractiveAuthentication no",
            "  GSSAPIAuthentication no",
            "  HostbasedAuthentication no",
            "  PreferredAuthentications publickey",
            *(["  KexAlgorithms curve25519-sha256"] if embedded else []),
            "  ControlMaster no",
            f'  ControlPath "{self.control_path}"',
            "  ControlPersist no",
            *([f"  SendEnv {TOKEN_ENV}"] if embedded else []),
            "  RequestTTY no",
            "  ForwardAgent no",
            "  ForwardX11 no",
            "  ClearAllForwardings yes",
            "  ConnectTimeout 10",
            "  LogLevel ERROR",
        ]
        return "\n".join(lines) + "\n"

    def start_master(self) -> None:
        """Connect the guarded OpenSSH master once (see :mod:`transports.ssh.master`) and wait for its socket."""
        ssh = openssh_program()
        if ssh is None:
            raise SshSetupError("the OpenSSH client (ssh) is not installed")
        self.stop_master()
        self.control_dir.chmod(0o700)
        self.control_path.unlink(missing_ok=True)
        base = {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"}
        argv = [ssh, "-F", str(self.config_path), "-o", "ControlMaster=ask"]
        readable: tuple[Path, ...] = (self.client_dir, self.root / "h")
        if self.server is not None:
            base["HOME"] = str(self.root)
            options, python = ssh_master.proxy_options(self.fdpass, self.server.unix_path or Path(), _python_dirs(()))
            argv += options
            readable += python
        else:  # a real sshd may need the user's default keys or agent
            for k in ("HOME", "USER", "LOGNAME", "SSH_AUTH_SOCK"):
                if k in os.environ:
                    base[k] = os.environ[k]
            readable += tuple(Path(p) for p in (ssh_master.user_ssh_dir(), os.environ.get("SSH_AUTH_SOCK")) if p)
        if self.key_path is not None:
            readable += (self.key_path,)
        argv += ["-N", HOST_ALIAS]
        full = hostuid.drop_prefix() + ssh_master.confine(argv, writable=self.control_dir, readable=readable,
                                                          network=self.server is None)
        log = self.root / "master.log"
        with open(log, "wb") as err:
            proc = ssh_master.spawn(
                full, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                env=ssh_master.env_for(self.askpass, base), start_new_session=True, close_fds=True,
            )
        deadline = time.monotonic() + MASTER_START_TIMEOUT_S
        while not self.control_path.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                self.master = proc
                self.stop_master()
                detail = log.read_text(errors="replace").strip().splitlines()
                raise SshSetupError(f"the ssh master connection to {self.host}:{self.port} failed: "
                                    + (detail[-1] if detail else "timed out"))
            time.sleep(0.005)
        # the socket exists: from now on the (capability-less) master cannot create anything here
        self.control_dir.chmod(0o555)
        if self.uid is not None:  # the master's uid owns the directory: take it back, so it stays read-only
            os.chown(self.control_dir, 0, 0)
        # published only now: ready() runs without the lock, and a client that finds no control
        # socket falls back to a direct TCP connect, which the isolated local side cannot make
        self.master = proc

    def stop_master(self) -> None:
        m, self.master = self.master, None
        if m is not None and m.poll() is None:
            m.terminate()
            try:
                m.wait(3)
            except subprocess.TimeoutExpired:
                m.kill()
                m.wait()

    # -- state ---------------------------------------------------------------

    def ready(self, kind: ClientKind) -> bool:
        """Cheap check for the hot path: same process, server alive, master alive when OpenSSH is used."""
        if self.pid != os.getpid() or kind not in self.enter:
            return False
        if self.server is not None and not self.server.alive():
            return False
        return kind != "openssh" or (self.master is not None and self.master.poll() is None)

    def binds(self, kind: ClientKind, sandbox: Sandbox) -> tuple[Path, ...]:
        """What the local side must see: the client directory (+ Python and the key for the fallback)."""
        if kind == "openssh":
            return (self.client_dir,)
        root = sandbox.root
        # a bind that covers the sandbox root (or lies in it) would hide or shadow the sandbox itself
        return (self.client_dir,) + tuple(
            p for p in self._fallback_binds if not (p == root or p in root.parents or root in p.parents))

    def network(self, kind: ClientKind) -> bool:
        """Only the fallback client talking to a real sshd needs the network; everything else uses Unix sockets."""
        return kind == "asyncssh" and self.server is None

    def close(self) -> None:
        """Terminate the master, stop the server, remove the temp dir (only in the process that made them)."""
        if self.pid != os.getpid():
            return
        self.stop_master()
        if self.server is not None:
            self.server.stop()
        try:
            self.control_dir.chmod(0o700)  # 0555 once the master listens; a non-root owner could not empty it
        except OSError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)


_endpoints: dict[Remote | None, Endpoint] = {}
_lock = threading.Lock()
forking.new_locks_in_child(globals(), "_lock")
_atexit_registered = False


def _close_all() -> None:
    with _lock:
        eps = list(_endpoints.values())
        _endpoints.clear()
    for ep in eps:
        ep.close()


def _endpoint_sync(remote: Remote | None, kind: ClientKind) -> Endpoint:
    global _atexit_registered
    with _lock:
        if not _atexit_registered:
            at_exit(_close_all)
            _atexit_registered = True
        ep = _endpoints.get(remote)
        if ep is not None and ep.ready(kind):
            return ep
        if ep is not None and (ep.pid != os.getpid() or (ep.server is not None and not ep.server.alive())):
            ep.close()  # a no-op in a forked child: the parent's master and files are not ours
            ep = None
        if ep is None:
            ep = Endpoint(remote)
            _endpoints[remote] = ep
        if kind not in ep.enter:
            raise SshSetupError("the OpenSSH client (ssh) is not installed in " + SYSTEM_PATH)
        if kind == "openssh" and (ep.master is None or ep.master.poll() is not None):
            ep.start_master()
        return ep


def ready_endpoint(remote: Remote | None, kind: ClientKind) -> Endpoint | None:
    """The endpoint for ``remote`` if it is up and ready for ``kind``; None (nothing is built) otherwise."""
    ep = _endpoints.get(remote)
    return ep if ep is not None and ep.ready(kind) else None


async def endpoint(remote: Remote | None, kind: ClientKind) -> Endpoint:
    """The ready endpoint for ``remote`` (None: the embedded server); built in a worker thread if needed."""
    return ready_endpoint(remote, kind) or await anyio.to_thread.run_sync(_endpoint_sync, remote, kind)


def shutdown() -> None:
    """Tear every endpoint down now (tests; the process does it at exit anyway)."""
    _close_all()


def close_endpoint(remote: Remote | None) -> None:
    """Tear one endpoint down now (its master, server and files); the next delivery makes a new one."""
    with _lock:
        ep = _endpoints.pop(remote, None)
    if ep is not None:
        ep.close()
