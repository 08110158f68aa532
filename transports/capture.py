"""``received`` from the kernel: which exec of a traced run was the final shell, and what it got.

Every run is traced (:mod:`transports.sandbox.exectrace`): ``Execution.trace`` lists each program the
run executed with its command line, environment (for shells) and the file it executes, read
by the host at the exec stop, before any instruction of the new program ran. Nothing inside
the sandbox takes part, so a command can neither forge nor silence it.

Which exec is the final shell (the boundary)
    A program is recognised by the file it executes (device and inode), never by a name,
    a path or ``argv[0]``: a renamed copy of a shell is another file.

    * ``raw``-like transports run the final shell as the run's first program: it is the
      boundary.
    * A transport that pastes R into an outer program (``bash -c "R"``, ``make``, ``ssh``)
      runs that program first. Its text is one simple command, which bash execs in place,
      so the boundary is the first exec of the final shell's file in the outer program's
      pid. Where there is none, because the paste split R into several commands and the
      outer shell forked each, it is the final-shell exec forked first by the outer
      program, and the delivery is ``split`` (damaged).
    * R's text can only run after the boundary, except what the outer parse itself runs
      (``$(...)`` in a double-quoted paste): every process the outer program forked before
      the boundary's exec is such code, so the delivery is then ``split`` too, with a note.
      This also closes forgeries that need an accomplice running beside the final shell.
    * The final shell's environment must be the outer program's (less the variables a
      shell sets for its children: ``_``, ``SHLVL``, ``PWD``, ``OLDPWD``): a difference
      (``LD_PRELOAD``, ``BASH_ENV``, an exported function) would run code the record does
      not show, so it is ``split`` with a note naming the variables.
    * No final-shell exec at all: ``received`` is None.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .base import Delivery, check_command, run_program
from .sandbox.exectrace import Exec, Identity, Trace, identity
from .sandbox import SYSTEM_PATH, Execution, Sandbox
from .shells import DEFAULT, Shell

SHELL_SETS = (b"_=", b"SHLVL=", b"PWD=", b"OLDPWD=")
"""Variables a shell itself sets in its children's environment: not a change made by R."""


def program_identity(program: str) -> Identity | None:
    """The file a program name resolves to on the sandbox's system PATH."""
    found = shutil.which(program, path=SYSTEM_PATH)
    return identity(found) if found else None


@dataclass
class Boundary:
    """The final shell's exec, as judged from a trace (see the module docstring)."""

    exec: Exec | None
    split: bool = False
    note: str | None = None

    @property
    def received(self) -> str | None:
        return received_from(list(self.exec.argv)) if self.exec is not None else None


def first_program(execution: Execution | None) -> Exec | None:
    """The run's first program (the transport's own argv, exec'd by the launcher)."""
    if execution is None or execution.trace is None or not execution.trace.execs:
        return None
    return execution.trace.execs[0]


def find_boundary(trace: Trace | None, is_final: Callable[[Exec], bool],
                  passed: Mapping[bytes, bytes | None] | None = None) -> Boundary:
    """The final shell inside an outer program (the run's first exec): see the module docstring.

    ``passed`` names the variables the transport itself set for the outer program and how the final
    shell must see them (None: unset), as :func:`env_change` takes them."""
    if trace is None or not trace.execs:
        return Boundary(None, note="the kernel saw no program run")
    outer, later = trace.execs[0], trace.execs[1:]
    notes: list[str] = []
    if trace.dropped:
        notes.append(f"{trace.dropped} execs past the trace's cap were counted, not kept")
    chosen = next((e for e in later if e.pid == outer.pid and is_final(e)), None)
    split = False
    if chosen is None:
        forked = [e for e in later if e.parent == outer.pid and is_final(e)]
        if forked:
            chosen = min(forked, key=lambda e: (e.forked_at or 0, e.seq))
            split = True
            notes.append("the outer program forked the final shell (the paste split R into several commands)"
                         if len(forked) == 1 else
                         f"the outer program started {len(forked)} final shells; received is the first one's")
    if chosen is not None:
        before = [c for c, (p, seq) in trace.forks.items() if p == outer.pid and seq < chosen.seq and c != chosen.pid]
        if before:
            split = True
            notes.append(f"the outer program ran {len(before)} process(es) of R's text before the final shell")
        if (changed := env_change(outer, chosen, passed)) is not None:
            split = True
            notes.append(changed)
    return Boundary(chosen, split, "; ".join(notes) or None)


def env_change(outer: Exec, final: Exec, passed: Mapping[bytes, bytes | None] | None = None) -> str | None:
    """Why the final shell's environment is not the outer program's, or None.

    ``passed``: variables the transport set for the outer program only, and what the final shell must
    hold instead (None: unset). A template's stand-ins route the outer shell's own lookups through
    ``BASH_ENV`` and unset it, or set what ``docker exec -e`` names: the transport's doing, exactly
    known, so not a change made by R; any other value still is."""
    if not final.env_complete or final.env is None or outer.env is None:
        return "the final shell's environment could not be read whole"
    mine = {v for v in outer.env if not v.startswith(SHELL_SETS)}
    if passed:
        mine = {v for v in mine if v.split(b"=", 1)[0] not in passed}
        mine |= {k + b"=" + v for k, v in passed.items() if v is not None and not (k + b"=").startswith(SHELL_SETS)}
    theirs = {v for v in final.env if not v.startswith(SHELL_SETS)}
    names = {v.split(b"=", 1)[0].decode("utf-8", "replace") for v in mine ^ theirs}
    names |= _shell_set_changes(outer.env, final.env) - {k.decode("utf-8", "replace") for k in (passed or {})}
    if not names:
        return None
    names = sorted(names)
    return f"the final shell's environment differs from the outer program's: {', '.join(names[:8])}"


def _value(env: tuple[bytes, ...], name: bytes) -> bytes | None:
    return next((v[len(name) + 1:] for v in env if v.startswith(name + b"=")), None)


def _shell_set_changes(outer: tuple[bytes, ...], final: tuple[bytes, ...]) -> set[str]:
    """The variables of SHELL_SETS (``_`` aside) whose value in the final shell is not one the outer bash
    gives its children by itself. R's own outer expansion can assign them without a fork (an arithmetic
    assignment such as ``$((SHLVL=41))`` inside an expansion that reproduces its own text), so they are
    checked too: SHLVL is the outer's level or one more, PWD and OLDPWD are the outer's (a cd needs a
    command of its own, which the outer program forks first)."""
    changed: set[str] = set()
    level = _value(outer, b"SHLVL")
    base = int(level) if level is not None and level.isdigit() and len(level) < 6 else 0
    got = _value(final, b"SHLVL")
    if got is not None and got not in (str(base).encode(), str(base + 1).encode()):
        changed.add("SHLVL")
    for name in (b"PWD", b"OLDPWD"):
        got = _value(final, name)
        if got is not None and got != _value(outer, name):
            changed.add(name.decode())
    return changed


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
        delivery = await run_program(sandbox, ["bash", "-c", self.wrap(self.shell.text, command)], received=None)
        final = program_identity(self.shell.program)
        boundary = find_boundary(delivery.execution.trace if delivery.execution else None,
                                 lambda e: e.exe is not None and e.exe == final)
        delivery.received, delivery.received_note, delivery.split = boundary.received, boundary.note, boundary.split
        return delivery
