"""The OpenSSH master connection of the ``ssh`` transport, and what keeps a hostile reply from using it.

Why it needs guarding
    Every sandbox must be able to connect to the master's control socket (that
    is how its sessions reach the server), and a reply that breaks out of the
    double quotes runs ``ssh -O ...`` there: multiplexing requests the master,
    which lives outside every sandbox, would otherwise obey. ``-O forward -L
    /path:...`` made it bind a socket anywhere on the host, ``-L/-D
    127.0.0.1:PORT`` left host listeners that outlived the call, ``-O exit`` /
    ``-O stop`` ended or orphaned the master that concurrent deliveries share.

Two layers (checked against OpenSSH 9.2's mux.c and readpass.c)
    1. Policy: the master runs with ``ControlMaster=ask``. mux.c then calls
       ``ask_permission()`` before a new session ("Allow shared connection to
       HOST? "), a forward (``-O forward``, ``-L/-R/-D``: "Open ... on ...?"),
       a stdio forward (``-W``: "Allow forward to ..."), terminate (``-O
       exit``) and stop listening (``-O stop``). With ``SSH_ASKPASS_REQUIRE=
       force`` and no DISPLAY, readpass.c runs ``$SSH_ASKPASS PROMPT`` (with
       ``SSH_ASKPASS_PROMPT=confirm``) and allows only on exit status 0 with an
       empty or "yes" answer. Our askpass (:data:`POLICY`, a /bin/sh script,
       ~1 ms per session) says yes to new sessions only. Requests that never
       ask: ``-O check`` (MUX_C_ALIVE_CHECK: answers the master's pid, nothing
       else), ``-O cancel`` (MUX_C_CLOSE_FWD: can only close forwards the
       master has, and it has none) and ``-O proxy`` (MUX_C_PROXY: turns the
       control connection into a raw relay of SSH channel messages to the
       server; the master only relays, opening nothing itself, so what proxy
       mode can reach is what the server accepts: the embedded server refuses
       every forwarding channel and request, see :mod:`transports.ssh.server`).
    2. Confinement (when bubblewrap is available): the master itself runs in
       bwrap with every capability dropped, every namespace unshared (its own
       network namespace too: it reaches the embedded server through the Unix
       socket the server listens on, by a ProxyCommand that passes it the
       connected socket and exits), the system directories read-only, private
       tmpfs /tmp, and one writable host path, the control directory, which is
       made 0555 once the socket exists (a capability-less root cannot write
       it). ``--die-with-parent`` ends it with the harness, even on SIGKILL. So
       even a request the policy let through could create nothing on the host
       and listen on nothing reachable. With a real sshd the master keeps the
       host network (it must reach the target) and sees the key it needs.

Why one shared master and not one per sandbox
    A master per delivery inside the sandbox pays a full SSH handshake each
    time (measured with ``KexAlgorithms curve25519-sha256``: ~60-120 ms, against
    ~1 ms for the ask and ~4 ms for a mux session), and needs the client key in
    the sandbox. The shared, guarded master keeps a delivery cheap.
"""

from __future__ import annotations

import concurrent.futures
import os
import pwd
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from tasks import forking

from ..sandbox.isolation import bwrap_program, masks
from ..sandbox.systemdirs import system_binds

POLICY = """#!/bin/sh
# quotebench: the ssh master's multiplexing policy (ControlMaster=ask; see transports/ssh/master.py).
# Only a new session is allowed; forwards, stdio forwards, exit and stop are refused (non-zero status).
[ "${SSH_ASKPASS_PROMPT:-}" = confirm ] || exit 1
case $1 in
  "Allow shared connection to "*) echo yes ;;
  *) exit 1 ;;
esac
"""

FDPASS = """# quotebench: ProxyCommand of the ssh master (ProxyUseFdpass): hand ssh a socket connected to the
# embedded server's Unix socket, then exit; the master then needs no network namespace of the host.
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
socket.send_fds(socket.socket(fileno=1), [b"\\0"], [s.fileno()])
"""


def write_helpers(where: Path) -> tuple[Path, Path]:
    """The askpass policy and the fd-passing proxy helper, written into the private directory ``where``."""
    where.mkdir(mode=0o755)
    askpass, fdpass = where / "askpass", where / "fdpass.py"
    forking.write_executable(askpass, POLICY)
    fdpass.write_text(FDPASS)
    return askpass, fdpass


def proxy_options(fdpass: Path, server_socket: Path, python_dirs: tuple[Path, ...]) -> tuple[list[str], tuple[Path, ...]]:
    """``-o`` options that make the master reach the embedded server over its Unix socket, and what it must see."""
    system = shutil.which("python3", path="/usr/bin:/bin")  # reachable by any uid; the helper needs only socket
    command = " ".join(shlex.quote(a) for a in (system or sys.executable, "-I", "-S", str(fdpass), str(server_socket)))
    return (["-o", "ProxyCommand=" + command.replace("%", "%%"), "-o", "ProxyUseFdpass=yes"],
            () if system else python_dirs)


def env_for(askpass: Path, base: dict[str, str]) -> dict[str, str]:
    """The master's environment: ``base`` plus the forced askpass policy, and never a DISPLAY."""
    env = {k: v for k, v in base.items() if k != "DISPLAY"}
    env["SSH_ASKPASS"] = str(askpass)
    env["SSH_ASKPASS_REQUIRE"] = "force"
    return env


def user_ssh_dir() -> Path | None:
    """The invoking user's ``~/.ssh`` (OpenSSH finds default keys through the password database, not $HOME)."""
    try:
        d = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".ssh"
    except KeyError:
        return None
    return d if d.is_dir() else None


def confine(argv: list[str], *, writable: Path, readable: tuple[Path, ...], network: bool) -> list[str]:
    """``argv`` inside bwrap as described in the module docstring, or unchanged without bubblewrap."""
    bw = bwrap_program()
    if bw is None:
        return argv
    iso = [bw, "--unshare-all", "--die-with-parent", "--cap-drop", "ALL"]
    if network:
        iso.append("--share-net")
    iso += system_binds() + masks()
    iso += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for p in readable:
        if p.exists():
            iso += ["--ro-bind", str(p), str(p)]
    iso += ["--bind", str(writable), str(writable), "--chdir", "/", "--"]
    return iso + argv


# -- starting the master from a thread that lives as long as the process ----------------------

_spawner: concurrent.futures.ThreadPoolExecutor | None = None
_spawner_pid = 0
_spawner_lock = threading.Lock()
forking.new_locks_in_child(globals(), "_spawner_lock")


def spawn(argv: list[str], **popen: object) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(argv, **popen)`` from one long-lived thread of this process.

    bwrap's ``--die-with-parent`` is ``PR_SET_PDEATHSIG``, which fires when the
    *thread* that forked the child ends, not the process. Endpoints are built in
    short-lived worker threads (anyio's), so a master forked there would be
    killed a few seconds later. A single-worker executor's thread lives until
    interpreter shutdown (it is then joined, and the master dies with it, as it
    should).
    """
    global _spawner, _spawner_pid
    with _spawner_lock:
        # compared by pid, not reset at fork: a fork made from C (no at-fork hooks) has no spawner thread either
        if _spawner is None or _spawner_pid != os.getpid():
            _spawner = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="qb-ssh-master")
            _spawner_pid = os.getpid()
        pool = _spawner
    return pool.submit(forking.popen, argv, **popen).result()
