"""Shared machinery for transports that paste R into an outer shell program.

The outer program is run exactly as the transport defines it (argv
``["bash", "-c", OUTER]``). To learn what the *inner* shell received, the outer
shell's ``BASH_ENV`` file (which a non-interactive bash sources before its
program, so no extra process is started) does three things:

* ``hash -p SHIM bash``: the outer shell finds ``bash`` in its command hash table
  as the capture shim. ``$PATH`` is left exactly as on every other transport, so
  what R's own expansions see (``$PATH``, ``$(which bash)``) does not change; only
  the outer shell's own lookup of the word ``bash`` (and its subshells') is routed.
* moves the received channel (:mod:`transports.channel`) to fd 9 and announces the
  outer shell on it;
* unsets ``BASH_ENV`` and the channel's variable.

The shim (``bash -p``: no ``BASH_ENV``, no imported functions, so nothing the
command sets can run inside it) sends one message and waits for the host, which
reads the shim's argument vector from ``/proc`` as the kernel holds it; then the
shim closes fd 9 and execs the real bash as ``bash``. The inner shell and
everything it runs never hold the channel.

Which shell is the boundary (``received``)
    The outer text is one simple command, which bash execs in place, so the inner
    shell has the outer shell's pid: when such a shell ran, ``received`` is its
    program. When none did, because the paste split R into several commands (at an
    ``&``, a ``;``, a newline) and the outer shell forked each, ``received`` is the
    program of the first shell the outer shell forked (the lowest pid: the order of
    the outer text), and ``received_note`` counts the others. A shell forked into
    the background may not get to announce itself when the outer shell ends first:
    every process of a run is killed when its main process exits, as on every
    transport, so such a shell may or may not have run. A ``bash`` that R's text runs inside the outer expansion
    (``$(bash ...)``) is forked too, and runs before the boundary: it never
    displaces a shell exec'd in place. No shell at all: ``received`` is None.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from typing import TypeVar
from pathlib import Path

import anyio

from .base import Delivery, check_command, run_program
from .channel import Capture, ReceivedChannel
from .sandbox import SYSTEM_PATH, Sandbox
from .shells import DEFAULT, SH, SHELLS, Shell

T = TypeVar("T")
CHANNEL_FD = 9
CHANNEL_ENV = "QB_CHANNEL"

FINAL_ENV = "QB_FINAL_SHELL"

SHIM = """#!/bin/bash -p
# quotebench capture shim (transports/capture.py): announce, wait for the host, then be {name}
{announce}exec -a {name} {path} "$@"
"""

def enter_script(hash_line: str) -> str:
    """A ``BASH_ENV`` file for an outer shell: route one command word through ``hash_line``, move the
    channel to fd 9, announce the outer shell on it, and leave no variable of ours behind."""
    return (f"{hash_line}\n"
            f'if [ "${{{CHANNEL_ENV}:-{CHANNEL_FD}}}" != {CHANNEL_FD} ]; then '
            f'eval "exec {CHANNEL_FD}>&${CHANNEL_ENV} ${CHANNEL_ENV}>&-"; fi\n'
            f"printf outer >&{CHANNEL_FD} 2>/dev/null\n"
            f"unset {CHANNEL_ENV} {FINAL_ENV} BASH_ENV\n")


ANNOUNCE = f"{{ printf shim >&{CHANNEL_FD} && kill -STOP $$; }} 2>/dev/null\nexec {CHANNEL_FD}>&-\n"
"""What a program the outer shell starts says on the channel before it becomes itself (sh and bash alike)."""

ENTER = enter_script(f'hash -p "${{BASH_ENV%/*}}/${{{FINAL_ENV}:-bash}}" "${{{FINAL_ENV}:-bash}}"')

_shim_dir: Path | None = None


def shim_dir() -> Path:
    """A per-process directory holding the shim as ``bash`` and the ``BASH_ENV`` file (bound read-only)."""
    global _shim_dir
    if _shim_dir is None:
        d = Path(tempfile.mkdtemp(prefix=f"qb-shim-{os.getpid()}-")).resolve()
        for shell in (*SHELLS.values(), SH):
            real = shutil.which(shell.program, path=SYSTEM_PATH) or f"/bin/{shell.program}"
            (d / shell.program).write_text(SHIM.format(name=shell.program, path=real, announce=ANNOUNCE))
            (d / shell.program).chmod(0o755)
        (d / "enter").write_text(ENTER)
        d.chmod(0o755)
        atexit.register(shutil.rmtree, d, True)
        _shim_dir = d
    return _shim_dir


_LONG_WITH_ARGUMENT = (b"--rcfile", b"--init-file")


def received_from(argv: list[bytes]) -> str | None:
    """The program text of a ``bash [-opts] -c [-opts] PROGRAM [args...]`` argument vector (``argv[0]`` may be
    left out).

    As the shell reads it: the program is the first argument after the options, wherever ``-c`` sits among
    them (``-c -x PROG``, ``-cx PROG``, ``-c -o errexit PROG``, ``-c -- PROG``); ``-o``/``-O`` take the next
    argument. Where the shell would refuse its options (a word that looks like options but holds other
    characters, such as ``-x echo hi``, or no program left after them), the text is the word just after
    ``-c``, refused alike on every transport; that is also what ``raw`` reports, by construction, for the
    same R. Option letters are taken as any ASCII letter or digit, for every final shell.
    """
    args = argv[1:] if argv and argv[0][:1] not in (b"-", b"+") else argv
    i, wants_program = 0, False
    while i < len(args):
        a = args[i]
        if a in (b"-", b"--"):
            i += 1
            break
        if a.startswith(b"--"):  # a long option (bash takes them before the short ones)
            i += 2 if a in _LONG_WITH_ARGUMENT else 1
            continue
        if len(a) > 1 and a[:1] in (b"-", b"+"):
            letters = a[1:]
            if not letters.isalnum():
                i = len(args) + 1  # refused: fall back below
                break
            wants_program = wants_program or b"c" in letters
            i += 1 + letters.count(b"o") + letters.count(b"O")
            continue
        break
    if wants_program and i < len(args):
        return args[i].decode("utf-8", errors="surrogateescape")
    return _word_after_c(args)


def _word_after_c(args: list[bytes]) -> str | None:
    for i, a in enumerate(args):
        if a == b"-c" or (a.startswith(b"-") and not a.startswith(b"--") and a.endswith(b"c")):
            if i + 1 < len(args):
                return args[i + 1].decode("utf-8", errors="surrogateescape")
            return None
    return None


def judge_argv(capture: Capture) -> tuple[list[bytes] | None, str | None]:
    """(the boundary program's argument vector, note) by the rule in the module docstring."""
    notes = list(capture.ignored)
    argv: list[bytes] | None = None
    if capture.boundary:
        argv = capture.boundary[0]
        if len(capture.boundary) > 1:
            notes.append(f"{len(capture.boundary)} shells claimed the outer shell's pid; received is the first")
    elif capture.forked:
        # fork order, not arrival order: pids grow as the outer shell forks (the channel's messages race)
        argv = min(capture.forked, key=lambda pf: pf[0])[1]
        if len(capture.forked) > 1:
            notes.append(f"the outer parse started {len(capture.forked)} shells; received is the first one's program")
        else:
            notes.append("the outer shell forked the inner shell (the paste split R into several commands)")
    return argv, ("; ".join(notes) or None)


def judge(capture: Capture) -> tuple[str | None, str | None]:
    """(received, note) by the rule in the module docstring."""
    argv, note = judge_argv(capture)
    return (received_from(argv) if argv is not None else None), note


async def run_captured(sandbox: Sandbox, argv: list[str], final: Shell = DEFAULT) -> Delivery:
    """Run ``argv`` (an outer ``bash -c``) with the shim for the ``final`` shell and the channel;
    ``received`` comes from the channel."""
    shim = shim_dir()
    inside = sandbox.mount_point(shim, "qb-shim")  # fixed under bwrap: the same text on every run
    with ReceivedChannel(f"{inside}/{final.program}") as channel:
        delivery = await with_channel(channel, lambda: run_program(
            sandbox, argv, received=None,
            env={"BASH_ENV": f"{inside}/enter", CHANNEL_ENV: str(channel.fd), FINAL_ENV: final.program},
            binds=((shim, inside),), pass_fds=(channel.fd,),
        ))
        delivery.received, delivery.received_note = judge(channel.capture)
        delivery.split = not channel.capture.boundary and bool(channel.capture.forked)
    return delivery


async def with_channel(channel: ReceivedChannel, run: Callable[[], Awaitable[T]]) -> T:
    """Await ``run()`` while the channel is answered, then take what is still waiting."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(channel.serve)
        try:
            return await run()
        finally:
            tg.cancel_scope.cancel()
            channel.drain()


class InnerShell:
    """Runs ``["bash", "-c", wrap(shell, R)]`` and captures what the inner (final) shell received.

    The outer shell is bash, the host's shell; the final shell is ``shell`` (bash by default), named
    in the outer text by its words (``dash -c "R"``, ``busybox sh -c "R"``)."""

    def __init__(self, name: str, boundary: str, wrap: Callable[[str, str], str], shell: Shell = DEFAULT) -> None:
        self.name = name
        self.boundary = boundary
        self.wrap = wrap
        self.shell = shell

    def on(self, shell: Shell) -> "InnerShell":
        """The same transport with another final shell."""
        return InnerShell(self.name, self.boundary, self.wrap, shell)

    async def deliver(self, command: str, sandbox: Sandbox) -> Delivery:
        if (why := check_command(command)) is not None:
            return Delivery(received=None, execution=None, transport_error=why)
        return await run_captured(sandbox, ["bash", "-c", self.wrap(self.shell.text, command)], self.shell)
