"""`make`: R pasted as a Makefile recipe line (``all:`` then a tab and R), run by real GNU make.

The route (GNU make manual, 5.1 Recipe Syntax, 5.3 Recipe Execution, 6.1 Basics of Variable References)
    A harness or a CI job writes the command into a Makefile and runs ``make``. make expands
    every ``$`` itself (``$HOME`` is make's ``$H`` followed by ``OME``; ``$$`` is one ``$``), strips
    leading blanks and the prefix characters ``@ - +`` from each line, and runs every recipe line
    in its own ``/bin/sh -c`` (dash on Debian), so ``cd`` and variables do not carry over. A newline
    in R ends the recipe line: the next line, without a tab, is makefile syntax (often "missing
    separator", and then nothing runs). A failing recipe makes make exit 2, whatever the shell's
    status (:meth:`MakeRecipe.route_exit_code`).

How ``received`` is observed
    make is run as ``make -f SETUP -f FILE`` inside the sandbox, where SETUP holds only
    ``override SHELL := <dash's real path>``: the same file as ``/bin/sh``, named by another path,
    which turns off make's shell-less fast path (with the default ``/bin/sh`` make execs a line with
    no shell metacharacter directly, splitting its words itself; that path exists to behave as
    ``sh -c`` would, so the line is observed as the text make would otherwise split). A second
    ``-f`` keeps FILE's line numbers and ``MAKEFLAGS`` as on the real route. Every shell make starts
    is a child of make, which the outer bash exec'd in place, and the kernel's exec trace
    (:mod:`transports.capture`) sees each one: a shell is recognised by the file it executes, so
    an R that sets ``SHELL`` to a renamed copy of a shell runs no final shell (``received`` None).

    ``received`` is the program of the first shell make started; ``received_note`` counts the
    others (one per recipe line, and any ``$(shell ...)``). So R = ``cd sub\\n\\ttouch x``
    is received as ``cd sub``: the damage (the two lines run in separate shells) shows.

The fix, ``make-safe``
    A one-line R that make leaves alone once ``$`` is written ``$$`` (it does not start with a blank
    or ``@ - +``, does not end with a backslash) becomes the recipe line ``@`` + R with ``$$``; the
    shell receives R. Anything else (a newline above all) cannot be carried exactly by a recipe
    line: make strips leading blanks and ``@ - +`` from every line, also under ``.ONESHELL`` with a
    POSIX shell, and drops tabs after a newline (docs/paths.md has the measurements). Then R is
    written to a script file and the recipe is ``@exec /bin/sh FILE``: the final shell (dash) reads
    R from the file, as ``tempscript`` does, and ``received`` is R; the note names the recipe.
"""

from __future__ import annotations

import os
import shutil

from ..base import Delivery, check_command, run_program
from ..capture import program_identity, received_from
from ..components import BASH, MAKE
from ..sandbox import SYSTEM_PATH, Sandbox
from ..shells import SH
from .route import Route

OUTER = 'exec make -f "$0" -f "$1"'


def one_line_exact(command: str) -> bool:
    """Whether make hands a recipe line ``@`` + R (``$`` doubled) to the shell as exactly R."""
    return (command != "" and "\n" not in command and "\r" not in command
            and command[0] not in " \t@-+" and not command.endswith("\\"))


class MakeRecipe(Route):
    source = ("GNU make manual: 5.1 Recipe Syntax, 5.3 Recipe Execution (one /bin/sh per line), "
              "6.1 Variable References ($$ for $)")
    component = "GNU make (make -f FILE), each recipe line run by /bin/sh (dash)"
    route_needs = (MAKE, BASH)  # bash starts make (the outer program)

    def __init__(self, safe: bool = False) -> None:
        super().__init__("make", safe, SH,
                         fix=("one line: $ written $$ in an @ recipe line; otherwise R in a script file run by the "
                         "recipe @exec /bin/sh FILE (the fix)"),
                         boundary=("pasted as a recipe line: make expands $, strips leading blanks and @-+, a newline ends "
                         "the line (each recipe line its own sh -c), a failure exits 2"))

    @staticmethod
    def route_exit_code(shell_exit: int | None) -> int | None:
        """What make reports for a final shell that exited with ``shell_exit``: 0, or 2 for any failure."""
        return shell_exit if shell_exit in (0, None) else 2

    def makefile(self, command: str, script: str | None) -> str:
        """The Makefile text; ``script`` is where the fix's script file is, as the command sees it."""
        if not self.safe:
            return "all:\n\t" + command + "\n"
        if script is None:
            return "all:\n\t@" + command.replace("$", "$$") + "\n"
        return "all:\n\t@exec /bin/sh " + script + "\n"

    async def deliver(self, command: str, sandbox: Sandbox) -> Delivery:
        if (why := check_command(command)) is not None:
            return Delivery(received=None, execution=None, transport_error=why)
        script = None
        if self.safe and not one_line_exact(command):  # host-written files are read-only to the command
            script = sandbox.write_file("recipe.sh", command.encode("utf-8"))
        real_sh = os.path.realpath(shutil.which(SH.program, path=SYSTEM_PATH) or "/bin/sh")
        setup = sandbox.write_file("setup.mk", f"override SHELL := {real_sh}\n".encode())
        makefile = sandbox.write_file("Makefile", self.makefile(command, script).encode("utf-8"))
        delivery = await run_program(sandbox, ["bash", "-c", OUTER, setup, makefile], received=None)
        trace = delivery.execution.trace if delivery.execution is not None else None
        final = program_identity(SH.program)
        make = trace.execs[0].pid if trace is not None and trace.execs else None
        # make runs its shells one by one, each a child of make (which the outer bash exec'd in place)
        shells = [received_from(list(e.argv)) for e in (trace.execs if trace is not None else [])
                  if e.parent == make and e.exe == final]
        notes: list[str] = []
        if script is not None:
            delivery.received = command if shells else None
            notes.insert(0, f"make ran {shells[0]!r}; the final shell read R from that file" if shells else
                         "make ran no shell")
        else:
            delivery.received = shells[0] if shells else None
            if len(shells) > 1:
                notes.insert(0, f"make ran {len(shells)} shells (one per recipe line or $(shell)); "
                                "received is the first one's program")
            elif not shells:
                notes.insert(0, "make ran no shell")
        delivery.received_note = "; ".join(notes) or None
        return delivery
