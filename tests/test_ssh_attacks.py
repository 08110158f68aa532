"""The ``ssh`` transport against hostile replies that talk to the shared OpenSSH master.

The master connection runs once per process outside every sandbox, and each sandbox can connect to its
control socket (it must: that is how every session reaches the server). A reply that breaks out of the
double quotes can therefore run ``ssh -O ...`` and send the master multiplexing requests of its own. Each
test here does that for real: the real OpenSSH client in the sandbox, the real master, the real embedded
server, a hostile command through :func:`transports.execute.execute`. Nothing it asks for may create a file,
socket or listener on the host, reach the host's network, or end or stop the master (which would break
the deliveries of other sandboxes).

The hostile command is ``true"; CMD 2>&1; echo "rc=$?``: the local shell runs ``ssh qb-remote "true"``,
then CMD, and reports CMD's exit status on stdout.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tasks.load import get_task
from transports.ssh import transport as ssh_mod
from transports.execute import execute
from transports.results.record import Record
from transports.sandbox import isolation_available
from transports.ssh import endpoint

pytestmark = pytest.mark.needs("openssh")  # skips locally, fails under CI=true (tests/conftest.py)

BWRAP = isolation_available() == "bwrap"
TASK = get_task("file-write/control")
MUX = "ssh -o ClearAllForwardings=no"  # the generated config clears forwardings; a hostile reply un-clears them


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def hostile(cmd: str) -> str:
    return f'true"; {cmd} 2>&1; echo "rc=$?'


async def attack(cmd: str) -> Record:
    record = await execute(TASK, "ssh", hostile(cmd))
    assert record.received == "true", record
    return record


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def listens(port: int) -> bool:
    """Whether anything on the host accepts a TCP connection on 127.0.0.1:port."""
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def tree(root: Path) -> set[str]:
    """Every path under ``root`` (the endpoint's private directory), to see that nothing new appears."""
    found: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            found.add(os.path.relpath(os.path.join(dirpath, name), root))
    return found


@pytest.fixture
def host_listener() -> Iterator[socket.socket]:
    """A host loopback listener that must never see a connection from a sandbox."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.5)
    yield srv
    srv.close()


def accepted(srv: socket.socket) -> bool:
    try:
        conn, _ = srv.accept()
    except OSError:
        return False
    conn.close()
    return True


async def master_pid() -> int:
    ep = await endpoint(None, "openssh")
    assert ep.master is not None and ep.master.poll() is None
    return ep.master.pid


# -- forwards the master would open on the host ---------------------------------------------------


@pytest.mark.anyio
async def test_a_forwarded_unix_socket_is_created_nowhere(tmp_path: Path) -> None:
    ep = await endpoint(None, "openssh")
    before = tree(ep.root)
    targets = [tmp_path / "x.sock", ep.control_path.parent / "x.sock", ep.client_dir / "y.sock"]
    for target in targets:
        r = await attack(f"{MUX} -O forward -L {target}:127.0.0.1:1 qb-remote")
        assert r.stdout.text.endswith("rc=255\n"), r.stdout.text
        assert "Permission denied" in r.stdout.text
    for target in targets:
        assert not os.path.lexists(target), target
    assert tree(ep.root) == before
    assert await master_pid() == ep.master.pid  # type: ignore[union-attr]


@pytest.mark.anyio
@pytest.mark.parametrize("spec", ["-L 127.0.0.1:{port}:127.0.0.1:1", "-D 127.0.0.1:{port}"])
async def test_a_forwarded_port_leaves_no_listener_on_the_host(spec: str) -> None:
    port = free_port()
    r = await attack(f"{MUX} -O forward {spec.format(port=port)} qb-remote")
    assert r.stdout.text.endswith("rc=255\n"), r.stdout.text
    assert "Permission denied" in r.stdout.text
    assert not listens(port)


@pytest.mark.anyio
async def test_a_remote_forward_opens_nothing(tmp_path: Path) -> None:
    """``-R`` asks the server for a listener: refused by the master (ask) and by the server itself."""
    port = free_port()
    sock = tmp_path / "r.sock"
    for spec in (f"127.0.0.1:{port}:127.0.0.1:1", "127.0.0.1:0:127.0.0.1:1", f"{sock}:127.0.0.1:1"):
        r = await attack(f"{MUX} -O forward -R {spec} qb-remote")
        assert r.stdout.text.endswith("rc=255\n"), r.stdout.text
    assert not listens(port)
    assert not os.path.lexists(sock)


@pytest.mark.anyio
async def test_a_stdio_forward_reaches_nothing(host_listener: socket.socket) -> None:
    port = host_listener.getsockname()[1]
    r = await attack(f"echo hi | ssh -W 127.0.0.1:{port} qb-remote")
    assert r.stdout.text.endswith("rc=255\n"), r.stdout.text
    assert not accepted(host_listener)


# -- the master's own lifetime --------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("op", ["exit", "stop"])
async def test_exit_and_stop_do_not_end_the_master(op: str) -> None:
    pid = await master_pid()
    results: dict[str, Record] = {}

    async def bystander() -> None:  # another sandbox's delivery, in flight while the request is sent
        results["bystander"] = await execute(TASK, "ssh", "sleep 1.5; echo 'hello world' > out.txt")

    async with anyio.create_task_group() as tg:
        tg.start_soon(bystander)
        await anyio.sleep(0.5)
        results["attack"] = await attack(f"ssh -O {op} qb-remote")
    assert results["attack"].stdout.text.endswith("rc=255\n"), results["attack"].stdout.text
    assert "Permission denied" in results["attack"].stdout.text
    assert results["bystander"].exit_code == 0 and results["bystander"].verdict.passed, results["bystander"]
    after = await execute(TASK, "ssh", "echo 'hello world' > out.txt")
    assert after.exit_code == 0 and after.verdict.passed
    assert await master_pid() == pid  # the same master: it was neither ended nor replaced


# -- channel requests a client sends at will ------------------------------------------------------


@pytest.mark.anyio
async def test_a_break_request_neither_ends_the_remote_run_nor_drops_it_from_the_record() -> None:
    """OpenSSH sends a ``break`` channel request for ``~B`` after a newline (``ssh -tt``: its escape character
    is on), and asyncssh raises it from the next read of the channel's stdin. Let through, the remote run would
    raise out of ``Sandbox.run``, its execution never reach the record and its output be lost; sshd without a
    terminal ignores the request, and so does the embedded server."""
    record = await attack('(sleep 0.5; printf "x\\n~B\\n"; sleep 0.5; echo more) | ssh -tt qb-remote "cat"')
    assert record.stdout.text.endswith("x\n\nmore\nrc=0\n"), record.stdout.text
    assert "~B" in record.stdout.text  # the client did take it as its escape and sent the break


# -- proxy mode: the one request ControlMaster=ask does not ask about ---------------------------


@pytest.mark.anyio
async def test_proxy_mode_reaches_nothing_outside(host_listener: socket.socket, tmp_path: Path) -> None:
    """``-O proxy`` turns the control connection into a raw channel relay to the server, with no question
    asked: the client inside the sandbox then speaks SSH channels itself. A session still runs in its own
    sandbox (the token), and every forwarding channel or request must be refused by the embedded server.

    OpenSSH with the fix for CVE-2026-35388 (Debian 1:9.2p1-2+deb12u10, 10.3p1) asks about proxy mode too, and
    with no askpass the answer is no: the request is refused before any channel is opened. Either outcome is
    safe; anything else (the command running outside its sandbox) is not."""
    port = host_listener.getsockname()[1]
    session = await attack("ssh -O proxy qb-remote 'echo via-proxy; pwd'")
    text = session.stdout.text
    refused = "Permission denied" in text and text.endswith("rc=255\n") and "via-proxy" not in text
    assert refused or text.startswith("via-proxy\n/sandbox/work\n" if BWRAP else "via-proxy\n"), text
    inner = free_port()
    probe = (f"(ssh -O proxy -N -L 127.0.0.1:{inner}:127.0.0.1:{port} qb-remote & sleep 1; "
             f"exec 3<>/dev/tcp/127.0.0.1/{inner} && echo data >&3; sleep 0.5; kill %1)")
    await attack(probe)
    assert not accepted(host_listener)
    rport = free_port()
    sock = tmp_path / "p.sock"
    for spec in (f"127.0.0.1:{rport}:127.0.0.1:1", f"{sock}:127.0.0.1:1"):
        # the master relays the global request but not its reply (OpenSSH 9.2), so the client waits: cut it short
        r = await attack(f"timeout 2 ssh -O proxy -o ExitOnForwardFailure=yes -N -R {spec} qb-remote")
        assert r.stdout.text.endswith(("rc=124\n", "rc=255\n")), r.stdout.text
    assert not listens(rport)
    assert not os.path.lexists(sock)


# -- the master itself is confined (defense in depth) ----------------------------------------------


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        for c in children:
            out.append(int(c))
            todo.append(int(c))
    return out


@pytest.mark.anyio
@pytest.mark.needs("bwrap")  # confining the master needs bubblewrap
async def test_the_master_runs_without_capabilities_network_or_writable_host_paths() -> None:
    ep = await endpoint(None, "openssh")
    assert ep.master is not None
    ssh = [p for p in [ep.master.pid, *_descendants(ep.master.pid)]
           if Path(f"/proc/{p}/comm").read_text().strip() == "ssh"]
    assert len(ssh) == 1, ssh
    status = Path(f"/proc/{ssh[0]}/status").read_text()
    assert "CapEff:\t0000000000000000" in status
    for ns in ("net", "mnt", "pid"):
        assert os.readlink(f"/proc/{ssh[0]}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}"), ns
    assert ep.control_path.parent.stat().st_mode & 0o777 == 0o555  # no longer writable once the socket exists


def test_the_server_refuses_every_forward_explicitly_and_asyncssh_agrees() -> None:
    """The second layer under the proxy test above: our server object, and asyncssh's own default (2.24)."""
    import asyncssh

    from transports.ssh.server import KEY_RESTRICTIONS, SessionsOnly

    for server in (SessionsOnly(), asyncssh.SSHServer()):
        assert server.connection_requested("127.0.0.1", 22, "127.0.0.1", 1) is False
        assert server.server_requested("127.0.0.1", 0) is False
        assert server.unix_connection_requested("/run/x.sock") is False
        assert server.unix_server_requested("/tmp/x.sock") is False
        assert server.tun_requested(None) is False
        assert server.tap_requested(None) is False
    assert KEY_RESTRICTIONS.split(",") == ["no-port-forwarding", "no-agent-forwarding", "no-X11-forwarding", "no-pty"]


KILLED_HARNESS = """
import os, signal, anyio
from transports import ssh
from transports.sandbox import Sandbox

async def main() -> None:
    with Sandbox.create() as box:
        d = await ssh.Ssh().deliver("echo hi", box)
    ep = await ssh.endpoint(None, "openssh")
    print(ep.root, d.execution.stdout.text.strip(), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

anyio.run(main)
"""


def _processes_naming(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_killed_harness_leaves_no_master_and_the_next_run_removes_its_directory() -> None:
    project = str(Path(__file__).resolve().parent.parent)
    killed = subprocess.run([sys.executable, "-c", KILLED_HARNESS], capture_output=True, text=True, cwd=project,
                            timeout=60)
    assert killed.returncode == -9, killed.stderr
    root, said = killed.stdout.split()
    assert said == "hi" and Path(root).is_dir()
    deadline = time.monotonic() + 5
    while _processes_naming(root) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_naming(root) == []  # the master died with the harness
    subprocess.run([sys.executable, "-c", "from transports.sandbox import Sandbox; Sandbox.create().close()"],
                   check=True, cwd=project, timeout=60)
    assert not Path(root).exists()  # keys included
