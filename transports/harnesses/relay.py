"""The relay: bytes between the harness's loopback and the host's recording proxy, inside the sandbox.

Why a relay
    bwrap unshares the network: inside the sandbox there is only loopback, and the harness needs an
    ``http://127.0.0.1:PORT`` base URL. The recording proxy runs on the host and listens on a Unix socket in
    a host directory bound into the sandbox (a path-named Unix socket is reached through the file system,
    not the network namespace). This script, started by the launcher with ``python3 -I relay.py SOCKET
    PORT_FILE`` (stdlib only, no project import), listens on 127.0.0.1 on an ephemeral port, writes the
    port to PORT_FILE (renamed into place) and copies each TCP connection's bytes to a fresh connection to
    SOCKET and back. It reads nothing it copies: the proxy parses, bounds and records every request.

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


def serve(conn: socket.socket, path: str, slots: threading.Semaphore) -> None:
    up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
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
    path, port_file = argv
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
        threading.Thread(target=serve, args=(conn, path, slots), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
