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
      outside every task sandbox (a master started in one would die with it),
      in a bwrap sandbox of its own with no capabilities, no host network (it
      reaches the embedded server's Unix socket) and no writable host path,
      and with ``ControlMaster=ask`` and a policy that allows new sessions
      only (:mod:`transports.ssh.master`). The control socket's directory is
      bound read-only into the sandbox, so the local side keeps all its
      isolation, network included (a Unix socket path is not
      network-namespaced). A session costs a mux client (~4 ms) plus the
      policy's answer (~1 ms), not an SSH handshake (125-180 ms).
    * Remote side (default): the embedded asyncssh server of
      :mod:`transports.ssh.server` on 127.0.0.1 (ephemeral port, host and
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
    ``Ssh(client="asyncssh")``) the wrapper runs :mod:`transports.ssh.client`,
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
    vector and :func:`transports.ssh.client.exec_request` computes the request
    OpenSSH sends for it. The host key is accepted on first use (into the
    private known_hosts); the fallback client does not verify it. With the
    fallback client the local side needs the network (``network=True``).

Known limits
    The local side can reach the shared master's control socket (it must), so a
    reply can send multiplexing requests of its own. The master refuses every
    one that would act outside the sandbox or end it: forwards (``-O forward``,
    ``-L/-R/-D``), stdio forwards (``-W``), ``-O exit`` and ``-O stop`` get
    "Permission denied" (exit 255), and the master goes on serving every
    other delivery. What still answers: ``-O check`` (the master's pid, in
    another pid namespace), ``-O cancel`` (there is nothing to cancel) and
    ``-O proxy``, which makes the master a relay of raw SSH channel messages to
    the server: a session opened that way runs in the reply's own sandbox (its
    token) and counts as a further request, and the embedded server refuses
    every forwarding channel and request (an OpenSSH client patched for
    CVE-2026-35388 asks about ``-O proxy`` too, and is refused like a
    forward). Without bubblewrap the master runs
    unconfined and only the policy holds (the local side has no isolation
    then either). With a real sshd, what a proxied client may open there is
    that sshd's business, like everything the command does on it. A ``&``
    that the local parse splits off can start two sessions; the first
    request the server sees is ``received``.

Endpoints (server, master, configs, keys) and their lifetime: :mod:`transports.ssh.endpoints`.
"""

from __future__ import annotations

import copy
import os
import shlex
import threading
import weakref
from collections.abc import Callable
from dataclasses import replace

import anyio

from tasks import forking

from ..base import Delivery, check_command
from ..capture import find_boundary, program_identity
from ..components import ASYNCSSH, BASH, OPENSSH
from ..sandbox import ArgumentTooLong, Execution, Sandbox, Stream
from ..sandbox.ahead import PLAIN, Launch
from ..shells import DEFAULT, Shell
from .client import UsageError, exec_request
from .endpoints import (CLIENT_ENV, GRACE_S, HOST_ALIAS, ClientKind, Endpoint, Remote, SshSetupError,
                        openssh_program, close_endpoint, configure, configured, endpoint, parse_target, ready_endpoint,
                        shutdown)
from .server import TOKEN_ENV, Session, new_token

__all__ = ["CLIENT_ENV", "HOST_ALIAS", "Remote", "Ssh", "SshSetupError", "close_endpoint", "configure", "endpoint",
           "outer_program", "shutdown"]

# -- the transport ---------------------------------------------------------------------


def outer_program(command: str, safe: bool = False) -> str:
    """The local shell's program: ``ssh <target> "R"``, R pasted unescaped (the spec's text); with
    ``safe``, ``ssh <target> -- <shlex.quote(R)>``: one word that OpenSSH sends as the request, unchanged
    (the ``--`` because ssh reads its options again after the host: an R starting with ``-`` would be one)."""
    if safe:
        return "ssh " + HOST_ALIAS + " -- " + shlex.quote(command)
    return "ssh " + HOST_ALIAS + ' "' + command + '"'


_tokens: "weakref.WeakKeyDictionary[Sandbox, str]" = weakref.WeakKeyDictionary()
_tokens_lock = threading.Lock()
forking.new_locks_in_child(globals(), "_tokens_lock")


def _token_ahead(sandbox: Sandbox) -> str:
    """A token made for ``sandbox`` alone, for the launcher of its local side started ahead."""
    with _tokens_lock:
        token = _tokens[sandbox] = new_token()
    return token


def _take_token(sandbox: Sandbox) -> str | None:
    """The token made ahead for ``sandbox``, taken by its delivery (so it serves one), or None."""
    with _tokens_lock:
        return _tokens.pop(sandbox, None)


def _client_env(ep: Endpoint, kind: ClientKind, token: str | None) -> dict[str, str]:
    """The local side's own environment: the file that puts the client wrapper first on PATH, and the token."""
    env = {"BASH_ENV": str(ep.enter[kind])}
    if token is not None:
        env[TOKEN_ENV] = token
    return env


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
        limit_hit="time" if timed_out else next((r.limit_hit for r in remote if r.limit_hit), local.limit_hit),
        limits_applied=local.limits_applied,
    )


class Ssh:
    """The ``ssh`` transport; see the module docstring.

    ``target``/``key``: a real sshd instead of the embedded server (default:
    whatever :func:`configure` set). ``client``: ``"openssh"``, ``"asyncssh"``
    (the fallback) or ``None`` for automatic (``$QB_SSH_CLIENT``, else OpenSSH
    when installed).
    """

    source = ("OpenSSH ssh(1): the words after the destination are joined with spaces and run by the "
              "remote user's login shell (zsh on macOS since 10.15, per Apple's support note)")
    component = "OpenSSH client (local bash's parse) + embedded asyncssh server, then the final shell"
    needs = (BASH, ASYNCSSH, OPENSSH)  # the local shell; the server; the client (optional: asyncssh's otherwise)
    sandboxed_runs = 2
    """Runs of the sandbox alive at once during one delivery (the client's and the server's), each under its
    own memory cap: what a server's host budget counts (:mod:`qb_server.budget`)."""

    def __init__(self, target: str | None = None, key: str | None = None,
                 client: ClientKind | None = None, shell: Shell = DEFAULT, safe: bool = False,
                 outer: Callable[[str], str] | None = None) -> None:
        self.remote: Remote | None = parse_target(target, key) if target is not None else configured()
        if client is not None and client not in ("openssh", "asyncssh"):
            raise ValueError(f"unknown ssh client '{client}' (openssh or asyncssh)")
        if shell is not DEFAULT and self.remote is not None:
            raise ValueError(f"ssh@{shell.name}: with --ssh-target the remote shell is that host's login shell; "
                             "a final shell can only be named for the embedded server")
        self.client = client
        self.shell = shell
        self.safe = safe
        self.outer = outer
        """The local shell's program for R; None: :func:`outer_program`. A ``template:`` path
        (:mod:`transports.template`) gives its own text, so the client, master and server are this
        transport's and not a copy of them."""
        self.name = ("ssh-safe" if safe else "ssh") + ("" if shell is DEFAULT else f"@{shell.name}")
        self.fixes = self.name.replace("ssh-safe", "ssh") if safe else None
        self.boundary = ("quoted with shlex.quote into ssh <target> -- 'R': OpenSSH sends R as the request "
                         "(the fix: no damage expected)" if safe else
                         'pasted unescaped into ssh <target> "R" (double-quote boundary, then the client joins the words)')

    def on(self, shell: Shell) -> "Ssh":
        """The same transport whose remote side runs ``shell`` (``ssh@zsh``: a macOS-like login shell)."""
        return Ssh(client=self.client, shell=shell, safe=self.safe, outer=self.outer) if self.remote is None else \
            Ssh(None, None, self.client, shell, self.safe, self.outer)

    def launches(self, sandbox: Sandbox) -> tuple[Launch, ...]:
        """The launchers a delivery in ``sandbox`` starts, to be started ahead: the local side's (its client's
        directory and environment, with a token made for this sandbox) and the embedded server's plain run;
        until the endpoint is up (the first delivery makes it), a plain run only."""
        kind = self.client_kind()
        ep = ready_endpoint(self.remote, kind)
        if ep is None:
            return PLAIN
        token = _token_ahead(sandbox) if ep.server is not None else None
        local = Launch(_client_env(ep, kind, token), ep.binds(kind, sandbox), ep.network(kind))
        return (local, *PLAIN) if ep.server is not None else (local,)

    def outer_text(self, command: str) -> str:
        """What the local bash runs for ``command``."""
        return self.outer(command) if self.outer is not None else outer_program(command, self.safe)

    def client_kind(self) -> ClientKind:
        if self.client is not None:
            return self.client
        forced = os.environ.get(CLIENT_ENV, "").strip().lower()
        if forced in ("openssh", "asyncssh"):
            return forced  # type: ignore[return-value]
        return "openssh" if openssh_program() else "asyncssh"

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
        server = ep.server
        token: str | None = None
        session: Session | None = None
        if server is not None:
            token = server.open(sandbox, self.shell, _take_token(sandbox))
        wrapper = str(ep.enter[kind].parent / f"bin-{kind}" / "ssh")
        env = _client_env(ep, kind, token)
        try:
            local = await _local_side(sandbox).run(
                ["bash", "-c", self.outer_text(command)], env=env,
                binds=ep.binds(kind, sandbox), network=ep.network(kind))
        except ArgumentTooLong as e:
            return Delivery(received=None, execution=None, transport_error=str(e))
        finally:
            if server is not None and token is not None:
                with anyio.CancelScope(shield=True):
                    session = await server.finish(token)
        # the boundary is the exec of the client wrapper (a /bin/sh script: the kernel's argv is
        # [interpreter, wrapper, ssh's arguments...]), as the kernel saw it
        sh = program_identity("sh")
        boundary = find_boundary(local.trace, lambda e: e.exe == sh and e.argv[1:2] == (wrapper.encode(),))
        argv = list(boundary.exec.argv[2:]) if boundary.exec is not None else None  # ssh's own arguments
        note, split = boundary.note, boundary.split
        sent = _request_from(argv)
        if session is not None:
            # the request of the client at the boundary, not merely the first one the server saw: R's own
            # outer expansion can run an ssh of its own first
            received = sent if sent in session.requests else (session.requests[0] if session.requests else None)
            return Delivery(received=received, execution=_merge(local, session), received_note=note, split=split)
        return Delivery(received=sent, execution=_merge(local, session), received_note=note, split=split)


def _request_from(argv: list[bytes] | None) -> str | None:
    """What OpenSSH sends for the client's argument vector (real sshd mode)."""
    if argv is None:
        return None
    args = [a.decode("utf-8", errors="surrogateescape") for a in argv]
    try:
        return exec_request(args)
    except UsageError:
        return None
