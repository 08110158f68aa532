"""The relay: bytes between the harness's loopback and the host's recording proxy, inside the sandbox.

Why a relay
    bwrap unshares the network: inside the sandbox there is only loopback, and the harness needs an
    ``http://127.0.0.1:PORT`` base URL. The recording proxy runs on the host and listens on a Unix socket in
    a host directory bound into the sandbox (a path-named Unix socket is reached through the file system,
    not the network namespace). This script, started by the launcher with ``python3 -I relay.py SOCKET
    PORT_FILE`` (stdlib only, no project import), listens on 127.0.0.1 on an ephemeral port, writes the
    port to PORT_FILE (renamed into place) and copies each TCP connection's bytes to a fresh connection to
    SOCKET and back. It reads nothing it copies: the proxy parses, bounds and records every request.

Only the harness
    The launcher passes its own pid, which the harness takes over by ``exec``. A connection is served only
    when that process holds its other end (its socket inode, from ``/proc/net/tcp``, among the harness's
    open descriptors): a command the harness runs is another process, so it cannot talk to the model in the
    harness's name and add turns, tool calls or steps to its own record. Should a command kill this relay
    and start its own, the proxy sees it: it records the kernel's pid of every connecting process
    (``SO_PEERCRED``), and the host counts only the exchanges that came from the relay the launcher started
    (:mod:`qb_client.campaign.harness_run`).

Bounds
    At most :data:`MAX_CONNECTIONS` connections at once (more wait in the listen backlog); everything else
    (sizes, time) is bounded by the proxy and by the sandbox's limits. The command runs as the same user
    and can kill the relay: then the harness cannot reach its model and the run ends on its time limit,
    which the record shows; nothing recorded depends on the relay.
"""

from __future__ import annotations

import os
import socket
import sys
import threading

MAX_CONNECTIONS = 16
CHUNK = 64 * 1024


def pipe(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until ``src`` ends, then end ``dst``'s writing half."""
    try:
        while True:
            data = src.recv(CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def peer_inode(conn: socket.socket) -> str | None:
    """The socket inode of the process at the other end of a loopback connection, from /proc/net/tcp."""
    host, port = conn.getpeername()[:2]
    want = "%08X:%04X" % (int.from_bytes(socket.inet_aton(host), "little"), port)
    try:
        with open("/proc/net/tcp") as fh:
            for line in fh.readlines()[1:]:
                f = line.split()
                if len(f) > 9 and f[1] == want:
                    return f[9]
    except OSError:
        pass
    return None


def from_harness(conn: socket.socket, harness: int) -> bool:
    """Whether the harness process itself (its pid given by the launcher) holds the connection's other end.
    A command the harness runs is another process: its connections are refused, so it cannot add turns."""
    inode = peer_inode(conn)
    if inode is None:
        return False
    target = f"socket:[{inode}]"
    try:
        for fd in os.listdir(f"/proc/{harness}/fd"):
            try:
                if os.readlink(f"/proc/{harness}/fd/{fd}") == target:
                    return True
            except OSError:
                continue
    except OSError:
        pass
    return False


def serve(conn: socket.socket, path: str, slots: threading.Semaphore, harness: int) -> None:
    up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if harness and not from_harness(conn, harness):
            return
        up.settimeout(10)
        up.connect(path)
        up.settimeout(None)
        back = threading.Thread(target=pipe, args=(up, conn), daemon=True)
        back.start()
        pipe(conn, up)
        back.join()
    except OSError:
        pass
    finally:
        up.close()
        conn.close()
        slots.release()


def main(argv: list[str]) -> int:
    path, port_file = argv[:2]
    harness = int(argv[2]) if len(argv) > 2 else 0
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    with open(port_file + ".new", "w") as fh:
        fh.write(str(server.getsockname()[1]))
    os.rename(port_file + ".new", port_file)
    slots = threading.Semaphore(MAX_CONNECTIONS)
    while True:
        slots.acquire()
        conn, _ = server.accept()
        threading.Thread(target=serve, args=(conn, path, slots, harness), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
