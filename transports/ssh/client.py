"""The fallback SSH client of the ``ssh`` transport, and OpenSSH's command-line grammar.

Used only when the OpenSSH client is not installed (or when forced with
``QB_SSH_CLIENT=asyncssh`` / ``Ssh(client="asyncssh")``): the local shell still
runs ``ssh <target> "R"``, and ``ssh`` on its PATH is a wrapper that execs::

    python -m transports.ssh.client --qb-config FILE [ssh arguments...]

What matters for the benchmark is that the *exec request* equals what OpenSSH
would send for the same argument vector, so this module reproduces OpenSSH
9.2's command-line parse (:func:`parse_command_line`): options (BSD getopt,
no permutation) up to the destination, options *again* right after the
destination (OpenSSH rescans there: ``ssh host -v cmd`` is verbose), ``--``
ends them, and the remaining words are joined with single spaces. No words,
or only empty ones, make a shell request. Options are parsed and then
ignored, because the destination and everything else come from the
generated config (like OpenSSH with ``Host *``); the ones that change what
would run (``-N -f -s -W -O -G -Q -V``) are refused with exit 255 rather
than silently mis-emulated. Unknown options and missing arguments exit 255
with OpenSSH's messages. A command that is not valid UTF-8 is refused with
255, as the embedded server would refuse its exec request.

Exit status as OpenSSH: the remote exit status, 255 for any error of the
path itself or a remote death by signal (``exit-signal``).

This file imports nothing from the project on purpose: it runs inside the
sandbox, started by a wrapper, and must stay cheap and self-contained.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import sys
from typing import Any

OPTSTRING = "1246ab:c:e:fgi:kl:m:no:p:qstvxAB:CD:E:F:GI:J:KL:MNO:PQ:R:S:TVw:W:XYy"
"""``ssh`` 9.2's getopt string (from the binary), so the parse matches option for option."""

UNSUPPORTED = "NfsWOGQV"
"""Options that would change what runs (no command, background, subsystem, control commands)."""

USAGE = """usage: ssh [-46AaCfGgKkMNnqsTtVvXxYy] [-B bind_interface]
           [-b bind_address] [-c cipher_spec] [-D [bind_address:]port]
           [-E log_file] [-e escape_char] [-F configfile] [-I pkcs11]
           [-i identity_file] [-J [user@]host[:port]] [-L address]
           [-l login_name] [-m mac_spec] [-O ctl_cmd] [-o option] [-p port]
           [-Q query_option] [-R address] [-S ctl_path] [-W host:port]
           [-w local_tun[:remote_tun]] destination [command [argument ...]]
"""

TOKEN_ENV = "QB_SANDBOX"
FAILED = 255


class UsageError(Exception):
    """The arguments are not a valid ``ssh`` command line (OpenSSH prints usage and exits 255)."""


Option = tuple[str, str | None]


def _getopt(args: list[str], i: int) -> tuple[list[Option], int, bool]:
    """BSD getopt from ``args[i]``: (options, index of the first operand, whether ``--`` ended them)."""
    opts: list[Option] = []
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return opts, i + 1, True
        if not arg.startswith("-") or arg == "-":
            return opts, i, False
        j = 1
        while j < len(arg):
            c = arg[j]
            k = OPTSTRING.find(c)
            if c == ":" or k < 0:
                raise UsageError(f"unknown option -- {c}")
            if k + 1 < len(OPTSTRING) and OPTSTRING[k + 1] == ":":
                if j + 1 < len(arg):
                    value = arg[j + 1:]
                elif i + 1 < len(args):
                    i += 1
                    value = args[i]
                else:
                    raise UsageError(f"option requires an argument -- {c}")
                opts.append((c, value))
                break
            opts.append((c, None))
            j += 1
        i += 1
    return opts, i, False


def parse_command_line(args: list[str]) -> tuple[list[Option], str, list[str]]:
    """OpenSSH's parse of ``ssh ARGS``: (options, destination, command words).

    >>> parse_command_line(["h", "printf", "%s", "a b"])
    ([], 'h', ['printf', '%s', 'a b'])
    >>> parse_command_line(["h", "-q", "echo", "-v"])
    ([('q', None)], 'h', ['echo', '-v'])
    """
    opts, i, terminated = _getopt(args, 0)
    if i >= len(args):
        raise UsageError("no destination")
    host = args[i]
    i += 1
    if i < len(args) and not terminated:
        more, i, _ = _getopt(args, i)
        opts += more
    return opts, host, args[i:]


def exec_request(args: list[str]) -> str | None:
    """The exec request OpenSSH sends for ``ssh ARGS``: the words joined with single spaces; None for a shell."""
    _, _, words = parse_command_line(args)
    command = " ".join(words)
    return command or None


# -- the client ---------------------------------------------------------------------


def _asyncssh() -> Any:
    """asyncssh, imported with cryptography's DSA deprecation lines silenced (as transports/ssh/__init__.py
    does for the harness): this client's stderr is the remote command's, byte for byte."""
    import warnings

    warnings.filterwarnings("ignore", message="DSA is deprecated", module=r"asyncssh(\.|$)")
    import asyncssh

    return asyncssh


def _stdin() -> tuple[Any, bytes | None]:
    """Forward stdin like OpenSSH: a pipe or socket streams, a regular file is read, anything else is empty.

    asyncio cannot poll a regular file or a character device such as the
    sandbox's ``/dev/null``, so those are not handed to asyncssh as streams.
    """
    asyncssh = _asyncssh()

    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return asyncssh.DEVNULL, None
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        return sys.stdin.buffer, None
    if stat.S_ISREG(mode):
        return asyncssh.PIPE, sys.stdin.buffer.read()
    return asyncssh.DEVNULL, None


async def _run(cfg: dict[str, Any], command: str | None) -> int:
    asyncssh = _asyncssh()  # here, so that --help and the parse stay fast

    kwargs: dict[str, Any] = dict(
        username=cfg["user"], config=None, agent_path=None, preferred_auth="publickey",
        request_pty=False, x11_forwarding=False, agent_forwarding=False, connect_timeout=10,
    )
    if cfg.get("key"):
        kwargs["client_keys"] = [cfg["key"]]
    if cfg.get("host_key"):
        kwargs["known_hosts"] = ([asyncssh.import_public_key(cfg["host_key"])], [], [])
    else:
        kwargs["known_hosts"] = None  # a configured real sshd: not verified (documented)
    where = f"host {cfg['host']} port {cfg['port']}"
    try:
        if cfg.get("unix"):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(cfg["unix"])
            conn = await asyncssh.connect(cfg["host"], cfg["port"], sock=sock, **kwargs)
        else:
            conn = await asyncssh.connect(cfg["host"], cfg["port"], **kwargs)
    except (OSError, asyncssh.Error, asyncio.TimeoutError) as e:
        print(f"ssh: connect to {where}: {e}", file=sys.stderr)
        return FAILED
    env = {k: os.environ[k] for k in cfg.get("send_env", []) if k in os.environ}
    stdin, data = _stdin()
    try:
        async with conn:
            result = await conn.run(command, env=env, stdin=stdin, input=data, encoding=None, check=False)
    except asyncssh.ChannelOpenError as e:
        print(f"channel 0: open failed: {e}", file=sys.stderr)
        return FAILED
    except (OSError, asyncssh.Error) as e:
        print(f"ssh: {where}: {e}", file=sys.stderr)
        return FAILED
    if result.stdout:
        sys.stdout.buffer.write(result.stdout)  # type: ignore[arg-type]
        sys.stdout.buffer.flush()
    if result.stderr:
        sys.stderr.buffer.write(result.stderr)  # type: ignore[arg-type]
        sys.stderr.buffer.flush()
    if result.exit_status is None or result.exit_signal is not None:
        return FAILED
    return result.exit_status


def main(argv: list[str] | None = None) -> int:
    """``ssh_client --qb-config FILE ARGS...``; the config names the endpoint (see transports/ssh/transport.py)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] != "--qb-config":
        print("usage: python -m transports.ssh.client --qb-config FILE [ssh arguments...]", file=sys.stderr)
        return FAILED
    try:
        with open(args[1], encoding="utf-8") as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        print(f"ssh: cannot read {args[1]}: {e}", file=sys.stderr)
        return FAILED
    try:
        opts, _, _ = parse_command_line(args[2:])
        command = exec_request(args[2:])
    except UsageError as e:
        if str(e) != "no destination":
            print(e, file=sys.stderr)
        sys.stderr.write(USAGE)
        return FAILED
    for c, _ in opts:
        if c in UNSUPPORTED:
            print(f"ssh: option -{c} is not supported by the fallback client (transports.ssh.client)", file=sys.stderr)
            return FAILED
    if command is not None:
        try:
            command.encode("utf-8")
        except UnicodeEncodeError:
            print("exec request failed on channel 0 (the command is not valid UTF-8)", file=sys.stderr)
            return FAILED
    return asyncio.run(_run(cfg, command))


if __name__ == "__main__":
    sys.exit(main())
