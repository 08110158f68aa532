"""Which SSH server the ``ssh`` transport talks to: the embedded one (None) or a configured real sshd.

Kept apart from :mod:`transports.ssh.endpoints` (which builds the connection) because the CLI sets the
target before any endpoint exists, and parsing it needs none of the endpoint's machinery.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


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


def configured() -> Remote | None:
    """The real sshd :func:`configure` set, or None for the embedded server."""
    return _configured


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


def use(remote: Remote | None) -> None:
    """Make ``remote`` (already parsed, as :func:`configured` gave it in another process) the target."""
    global _configured
    _configured = remote
