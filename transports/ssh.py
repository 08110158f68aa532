"""`ssh`: a local ``bash -c`` runs ``ssh <target> "R"``; an SSH server runs the request it got as ``bash -c``.

The boundary is the one of ``nested`` (R pasted between double quotes, parsed
by the local shell), followed by the SSH client's own step: it joins the
words after the destination with single spaces into one exec request, and
the server's shell parses that again.

The path, end to end
    * Local side: argv ``["bash", "-c", 'ssh qb-remote "' + R + '"']`` run by
      ``Sandbox.run`` in the task's sandbox, exactly the outer text of the
      spec. ``BASH_ENV`` (sourced by the non-interactive outer bash before its
      program, then unset; no extra process, see :mod:`transports.capture`)
      puts a directory first on PATH whose ``ssh`` is a small ``/bin/sh``
      wrapper that execs the OpenSSH client with ``-F <generated config>``, so
      neither the user's nor the system's ssh config is read.
    * The client never connects itself: ``ControlMaster``/``ControlPath`` send
      every session through one master connection started once per process
      *outside* every sandbox (a master started in a bwrap sandbox would die
      with it). The control socket's directory is bound read-only into the
      sandbox, so the local side keeps all its isolation, network included
      (a Unix socket path is not network-namespaced). A session costs a mux
      client (~4 ms), not an SSH handshake (125-180 ms).
    * Remote side (default): the embedded asyncssh server of
      :mod:`transports.ssh_server` on 127.0.0.1 (ephemeral port, host and
      client ed25519 keys made per process in a private 0700 temp dir, key
      auth only), which runs the request as ``Sandbox.run(["bash", "-c",
      request])`` of the *same* sandbox: same working directory, environment,
      limits and full isolation; plain ``bash -c``, never a login shell, so no
      rc file. ``received`` is the exec request string the server got.
    * Which sandbox: the delivery registers the sandbox under a random token,
      exported to the local side as ``QB_SANDBOX``; the config says ``SendEnv
      QB_SANDBOX``, so each mux session carries its own token in an SSH ``env``
      request through the shared master, and the server looks it up in
      ``process.env``. Unknown token: exit 255 and a one-line refusal.

Timeouts
    The local side gets the sandbox timeout plus a grace period, so the remote
    run (which has the sandbox timeout itself) is the one that expires; its
    ``timed_out`` is carried into the result (``exit_code`` None, as for
    every transport). Whatever still runs remotely when the local side ends
    is cancelled and awaited before ``deliver`` returns.

Fallback client
    Without OpenSSH in the system PATH (or with ``QB_SSH_CLIENT=asyncssh``, or
    ``Ssh(client="asyncssh")``) the wrapper runs :mod:`transports.ssh_client`,
    an asyncssh client with OpenSSH's command-line grammar. Against the
    embedded server it connects through a Unix socket the server also listens
    on (so again no network for the local side); the Python installation is
    bound read-only into the sandbox for it. It pays a Python start per
    command (~0.2-0.3 s).

A real sshd (``Ssh(target="user@host:port", key=PATH)``, or :func:`configure`)
    The same local side and master, but the remote side is whatever that sshd
    does: the user's login shell ``-c`` with its rc files and environment, in
    whatever working directory it gives (usually the home directory, not the
    sandbox), with no sandbox, limits or isolation of ours; a task's
    validator, which looks at the sandbox, will then usually fail. The token
    is not sent (sshd would drop it). ``received`` cannot be observed on the
    server, so it is what the client sent: the wrapper records its argument
    vector and :func:`transports.ssh_client.exec_request` computes the request
    OpenSSH sends for it. The host key is accepted on first use (into the
    private known_hosts); the fallback client does not verify it. With the
    fallback client the local side needs the network (``network=True``).

Lifetime
    Endpoints (server thread, master, temp dir) are made lazily on first use,
    reused by every delivery from any event loop or thread, remade after a
    fork or if the master or server died, and torn down at interpreter exit
    (master terminated, server stopped, temp dir removed).
"""

from __future__ import annotations

import atexit
import copy
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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import anyio

from .base import Delivery, check_command
from .sandbox import SYSTEM_PATH, Execution, Sandbox, Stream
from .ssh_client import UsageError, exec_request
from .ssh_server import TOKEN_ENV, EmbeddedServer, Session

HOST_ALIAS = "qb-remote"
"""The ``<target>`` word of the outer text; the generated config maps every host to the endpoint."""

ARGV_ENV = "QB_SSH_ARGV"
CLIENT_ENV = "QB_SSH_CLIENT"
ClientKind = Literal["openssh", "asyncssh"]

GRACE_S = 1.0
"""Extra wall clock for the local side, so the remote run's own timeout fires first."""

MASTER_START_TIMEOUT_S = 15.0

_PROJECT_ROOT = Path(__file__).resolve().parent.parent
_SYSTEM_TOPS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt")


class SshSetupError(RuntimeError):
    """The ssh path itself could not be set up (no client, master failed to connect, bad target)."""


# -- configuration -------------------------------------------------------------------


@dataclass(frozen=True)
class Remote:
    """A configured real sshd: ``user@host:port`` and an optional private key."""

    user: str | None
    host: str
    port: int
    key: str | None


def parse_target(target: str, key: str | None = None) -> Remote:
    """``[user@]host[:port]`` (``[v6addr]:port`` for IPv6) -> :class:`Remote`; ValueError with one line otherwise."""
    user, _, hostport = target.rpartition("@")
    port = 22
    if hostport.startswith("["):
        host, sep, rest = hostport[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"--ssh-target '{target}': expected user@host:port")
        if rest:
            port_text = rest[1:]
        else:
            port_text = ""
    else:
        host, _, port_text = hostport.partition(":")
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"--ssh-target '{target}': bad port '{port_text}'")
        port = int(port_text)
    if not host or any(c.isspace() for c in target):
        raise ValueError(f"--ssh-target '{target}': expected user@host:port")
    if key is not None:
        if not Path(key).is_file():
            raise ValueError(f"--ssh-key '{key}': no such file")
        key = str(Path(key).resolve())
    return Remote(user=user or None, host=host, port=port, key=key)


_configured: Remote | None = None


def configure(target: str | None, key: str | None) -> None:
    """Use a real sshd for every ``Ssh()`` built afterwards (the CLI's ``--ssh-target/--ssh-key``).

    ``target`` None restores the embedded server. Raises ValueError (one line)
    for a malformed target or a missing key file, or a key without a target.
    """
    global _configured
    if target is None:
        if key is not None:
            raise ValueError("--ssh-key needs --ssh-target")
        _configured = None
        return
    _configured = parse_target(target, key)


# -- endpoints: private dir, configs, wrappers, server, master -------------------------


def _openssh() -> str | None:
    """The OpenSSH client, looked up where the sandbox can see it (system directories)."""
    return shutil.which("ssh", path=SYSTEM_PATH)


def _python_dirs() -> tuple[Path, ...]:
    """Directories the fallback client's Python needs that bwrap does not already bind.

    Only the interpreter's prefixes, the directories holding asyncssh and its
    dependencies, and the project: not ``sys.path`` wholesale, which may name a
    home directory.
    """
    found: set[Path] = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(),
                        Path(sys.exec_prefix).resolve(), Path(sys.executable).resolve().parent, _PROJECT_ROOT}
    for name in ("asyncssh", "cryptography", "cffi", "_cffi_backend", "typing_extensions"):
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
# quotebench ssh transport: see transports/ssh.py
if [ -n "${{{argv_env}:-}}" ]; then
  f=${argv_env}
  unset {argv_env}
  [ -e "$f" ] || printf '%s\\0' "$@" > "$f"
fi
{exec_line}
"""

ENTER = """PATH={bin}:{path}
unset BASH_ENV
"""


class Endpoint:
    """Everything one target needs in this process; see the module docstring, "Lifetime"."""

    def __init__(self, remote: Remote | None) -> None:
        self.remote = remote
        self.pid = os.getpid()
        self.root = Path(tempfile.mkdtemp(prefix="qb-ssh-")).resolve()  # mode 0700
        self.client_dir = self.root / "c"  # the only part bound into sandboxes
        self.client_dir.mkdir()
        self.control_path = self.client_dir / "ctl"
        self.config_path = self.client_dir / "config"
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
            self.server = EmbeddedServer(host_key, client_pub, unix_path=self.client_dir / "server.sock")
            port = self.server.start()
            host, user = "127.0.0.1", "qb"
            host_key_line = host_key.export_public_key().decode().strip()
            (self.client_dir / "known_hosts").write_text(f"[{host}]:{port} {host_key_line}\n")
        else:
            host, port, user = self.remote.host, self.remote.port, self.remote.user
            self.key_path = Path(self.remote.key) if self.remote.key else None
            (self.client_dir / "known_hosts").write_text("")
        self.host, self.port, self.user = host, port, user
        self.config_path.write_text(self._openssh_config())
        (self.client_dir / "fallback.json").write_text(json.dumps({
            "host": host, "port": port, "user": user or os.environ.get("USER") or "root",
            "key": str(self.key_path) if self.key_path else None, "host_key": host_key_line,
            "unix": str(self.client_dir / "server.sock") if self.server else None,
            "send_env": [TOKEN_ENV] if self.server else [],
        }))
        ssh = _openssh()
        python_line = (f"PYTHONPATH={shlex.quote(str(_PROJECT_ROOT))}; export PYTHONPATH\n"
                       f"PYTHONDONTWRITEBYTECODE=1; export PYTHONDONTWRITEBYTECODE\n"
                       f"exec {shlex.quote(sys.executable)} -m transports.ssh_client "
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
            (bindir / "ssh").write_text(WRAPPER.format(argv_env=ARGV_ENV, exec_line=exec_line))
            (bindir / "ssh").chmod(0o755)
            self.enter[kind] = self.client_dir / f"enter-{kind}"
            self.enter[kind].write_text(ENTER.format(bin=shlex.quote(str(bindir)), path=SYSTEM_PATH))
        self._fallback_binds = _python_dirs() + ((self.key_path,) if self.key_path else ())

    def _openssh_config(self) -> str:
        embedded = self.server is not None
        lines = [
            "# generated by quotebench (transports/ssh.py); used with -F, nothing else is read",
            "Host *",
            f"  HostName {self.host}",
            f"  Port {self.port}",
            *([f"  User {self.user}"] if self.user else []),
            *([f'  IdentityFile "{self.key_path}"', "  IdentitiesOnly yes"] if self.key_path else []),
            f'  UserKnownHostsFile "{self.client_dir / "known_hosts"}"',
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
        """Connect the OpenSSH master once, outside every sandbox, and wait for its control socket."""
        ssh = _openssh()
        if ssh is None:
            raise SshSetupError("the OpenSSH client (ssh) is not installed")
        self.stop_master()
        self.control_path.unlink(missing_ok=True)
        env = {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"}
        if self.remote is None:
            env["HOME"] = str(self.root)
        else:  # a real sshd may need the user's default keys or agent
            for k in ("HOME", "USER", "LOGNAME", "SSH_AUTH_SOCK"):
                if k in os.environ:
                    env[k] = os.environ[k]
        log = self.root / "master.log"
        with open(log, "wb") as err:
            proc = subprocess.Popen(
                [ssh, "-F", str(self.config_path), "-o", "ControlMaster=yes", "-N", HOST_ALIAS],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env,
                start_new_session=True, close_fds=True,
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
        shutil.rmtree(self.root, ignore_errors=True)


_endpoints: dict[Remote | None, Endpoint] = {}
_lock = threading.Lock()
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
            atexit.register(_close_all)
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


async def endpoint(remote: Remote | None, kind: ClientKind) -> Endpoint:
    """The ready endpoint for ``remote`` (None: the embedded server); built in a worker thread if needed."""
    ep = _endpoints.get(remote)
    if ep is not None and ep.ready(kind):
        return ep
    return await anyio.to_thread.run_sync(_endpoint_sync, remote, kind)


def shutdown() -> None:
    """Tear every endpoint down now (tests; the process does it at exit anyway)."""
    _close_all()


def close_endpoint(remote: Remote | None) -> None:
    """Tear one endpoint down now (its master, server and files); the next delivery makes a new one."""
    with _lock:
        ep = _endpoints.pop(remote, None)
    if ep is not None:
        ep.close()


# -- the transport ---------------------------------------------------------------------


def outer_program(command: str) -> str:
    """The local shell's program: ``ssh <target> "R"``, R pasted unescaped (the spec's text)."""
    return "ssh " + HOST_ALIAS + ' "' + command + '"'


def _local_side(sandbox: Sandbox) -> Sandbox:
    """The same sandbox with a longer wall clock for the local side (see "Timeouts")."""
    view = copy.copy(sandbox)
    view.limits = replace(sandbox.limits, timeout_s=sandbox.limits.timeout_s + GRACE_S)
    return view


def _merge(local: Execution, session: Session | None) -> Execution:
    """The local execution (what the client printed and returned), with the remote timeout/truncation flags."""
    remote = session.executions if session else []
    timed_out = local.timed_out or any(r.timed_out for r in remote)
    return Execution(
        exit_code=None if timed_out else local.exit_code,
        stdout=Stream(local.stdout.text, local.stdout.truncated or any(r.stdout.truncated for r in remote)),
        stderr=Stream(local.stderr.text, local.stderr.truncated or any(r.stderr.truncated for r in remote)),
        timed_out=timed_out, exec_ms=local.exec_ms, isolation=local.isolation,
    )


class Ssh:
    """The ``ssh`` transport; see the module docstring.

    ``target``/``key``: a real sshd instead of the embedded server (default:
    whatever :func:`configure` set). ``client``: ``"openssh"``, ``"asyncssh"``
    (the fallback) or ``None`` for automatic (``$QB_SSH_CLIENT``, else OpenSSH
    when installed).
    """

    name = "ssh"
    boundary = 'pasted unescaped into ssh <target> "R" (double-quote boundary, then the client joins the words)'

    def __init__(self, target: str | None = None, key: str | None = None,
                 client: ClientKind | None = None) -> None:
        self.remote: Remote | None = parse_target(target, key) if target is not None else _configured
        if client is not None and client not in ("openssh", "asyncssh"):
            raise ValueError(f"unknown ssh client '{client}' (openssh or asyncssh)")
        self.client = client

    def client_kind(self) -> ClientKind:
        if self.client is not None:
            return self.client
        forced = os.environ.get(CLIENT_ENV, "").strip().lower()
        if forced in ("openssh", "asyncssh"):
            return forced  # type: ignore[return-value]
        return "openssh" if _openssh() else "asyncssh"

    async def deliver(self, command: str, sandbox: Sandbox) -> Delivery:
        if (why := check_command(command)) is not None:
            return Delivery(received=None, execution=None, transport_error=why)
        kind = self.client_kind()
        try:
            ep = await endpoint(self.remote, kind)
        except SshSetupError as e:
            return Delivery(received=None, execution=None, transport_error=f"ssh: {e}")
        except Exception as e:  # noqa: BLE001 - a broken path is a transport error, never a crash
            return Delivery(received=None, execution=None,
                            transport_error=f"ssh: cannot set up the endpoint: {type(e).__name__}: {e}")
        env = {"BASH_ENV": str(ep.enter[kind])}
        server = ep.server
        token: str | None = None
        capture: Path | None = None
        session: Session | None = None
        if server is not None:
            token = server.open(sandbox)
            env[TOKEN_ENV] = token
        else:
            capture = sandbox.scratch("ssh-argv")
            env[ARGV_ENV] = sandbox.inside(capture)
        try:
            local = await _local_side(sandbox).run(
                ["bash", "-c", outer_program(command)], env=env,
                binds=ep.binds(kind, sandbox), network=ep.network(kind),
            )
        finally:
            if server is not None and token is not None:
                with anyio.CancelScope(shield=True):
                    session = await server.finish(token)
        if session is not None:
            received = session.requests[0] if session.requests else None
        else:
            received = _received_from_argv(capture)
        return Delivery(received=received, execution=_merge(local, session))


def _received_from_argv(capture: Path | None) -> str | None:
    """What the client sent, from the argument vector the wrapper recorded (real sshd mode)."""
    if capture is None or not capture.exists():
        return None
    raw = capture.read_bytes()
    capture.unlink(missing_ok=True)
    args = [a.decode("utf-8", errors="surrogateescape") for a in raw.split(b"\0")[:-1]]
    try:
        return exec_request(args)
    except UsageError:
        return None
