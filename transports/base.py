"""The one interface every transport implements.

Modelled on httpx's transports: a single async method whose contract is the
whole story, many small implementations (one module each), and middleware that
wraps another transport. Composition order is explicit and visible in one
place, the registry (:mod:`transports.registry`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .sandbox import ArgumentTooLong, Bind, Execution, Sandbox


@dataclass
class HarnessRun:
    """What a real agent harness route (:mod:`transports.harnesses`) adds to a delivery: which harness and
    release ran, the final shell's whole program text as the harness built it (``wrapper``, from the kernel's
    exec trace), and the courier's request/answer log (capped; informational only, never used for
    ``received``: the command can rewrite it)."""

    name: str
    version: str | None
    wrapper: str | None = None
    log: str | None = None


@dataclass
class Delivery:
    """What became of one command on one transport.

    ``received`` is the exact program text the *final* shell got (its ``-c``
    argument, the script text, or the SSH exec request), or ``None`` when no
    final shell ever got one (the outer parse failed, or a transport error).
    ``execution`` is ``None`` only when nothing ran, and then
    ``transport_error`` says why. ``received_note`` is one line on anything unusual
    about how ``received`` was determined (several inner shells, ignored messages).
    ``split`` is True when no final shell ran in the outer program's place: the outer
    parse ran several commands, so the command did not arrive as one program, whatever
    ``received`` says (a shell run from R's own outer expansion can receive R itself);
    such a record is ``damaged``.
    ``harness_error`` is one line naming a component of this machine the path needs and cannot get
    (:mod:`transports.components`): nothing ran, and it is not the path's doing, so the record carries
    it as its ``error`` (out of every rate), never as a transport error or damage.
    ``harness``: set by a real agent harness route (:class:`HarnessRun`).
    """

    received: str | None
    execution: Execution | None
    transport_error: str | None = None
    received_note: str | None = None
    split: bool = False
    harness_error: str | None = None
    harness: HarnessRun | None = None


@runtime_checkable
class Transport(Protocol):
    """Carries a command R to a shell inside a sandbox.

    ``deliver(command, sandbox)`` must:
    * run at most one final shell program derived from ``command`` in
      ``sandbox`` (through ``sandbox.run``, so limits and isolation apply);
    * report the program text that final shell received, as it received it;
    * never raise for anything the command does; a failure of the path itself
      (a decoder refusing the text) is returned as ``transport_error`` with
      ``execution=None``.
    ``name`` is the registry name; ``boundary`` is one line on the parser
    boundary the transport adds (empty for none). A transport whose delivery
    makes several runs, or runs with its own binds or environment, may also
    name them as ``launches(sandbox) -> tuple[Launch, ...]``, so that a
    sandbox built ahead starts their launchers ahead too
    (:mod:`transports.sandbox.ahead`); without it, one plain run is assumed.
    """

    name: str
    boundary: str

    async def deliver(self, command: str, sandbox: Sandbox) -> Delivery: ...


def check_command(command: str) -> str | None:
    """Why a command cannot be handed to any shell at all (NUL bytes, lone surrogates), or None."""
    if "\x00" in command:
        return "the command contains a NUL byte, which no shell argument can carry"
    try:
        command.encode("utf-8")
    except UnicodeEncodeError:
        return "the command is not valid UTF-8 (it contains an unpaired surrogate)"
    return None


async def run_program(sandbox: Sandbox, argv: list[str], *, received: str | None, env: dict[str, str] | None = None,
                      binds: tuple[Bind, ...] = ()) -> Delivery:
    """Run ``argv`` in the sandbox; a program the kernel refuses as too long is a transport error, not a crash."""
    try:
        execution = await sandbox.run(argv, env=env, binds=binds)
    except ArgumentTooLong as e:
        return Delivery(received=None, execution=None, transport_error=str(e))
    return Delivery(received=received, execution=execution)
