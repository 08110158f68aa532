"""Shared machinery for transports that paste R into an outer shell program.

The outer program is run exactly as the transport defines it (argv
``["bash", "-c", OUTER]``); to learn what the *inner* shell received, the outer
shell's PATH is made to start with a capture shim named ``bash``. That happens
through ``BASH_ENV``, which a non-interactive bash sources before its program,
so the outer shell itself is started normally and costs no extra process.

The shim writes its argument vector (NUL-separated) to the file named by
``$QB_RECEIVED``, removes its variables and itself from the environment, and
execs the real bash, so the inner shell and everything it starts see the
ordinary sandbox environment. Which call is the boundary: the outer text is one
simple command, which bash execs in place, so the inner shell has the outer
shell's pid (``QB_OUTER_PID``, exported by the ``BASH_ENV`` file) and always
records. A ``bash`` forked by the outer shell records only if nothing has yet:
that covers an outer text that the paste split into several commands, while a
``$(bash ...)`` that R smuggled into the outer expansion, which runs first, is
overwritten by the real boundary. A ``bash`` started later by the inner shell
finds the variables gone and records nothing.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from .base import Delivery, check_command, run_program
from .sandbox import SYSTEM_PATH, Sandbox

SHIM = f"""#!/bin/bash
if [ -n "${{QB_RECEIVED:-}}" ]; then
  if [ "$$" = "${{QB_OUTER_PID:-}}" ]; then
    printf '%s\\0' "$@" > "$QB_RECEIVED"
  elif [ "$PPID" = "${{QB_OUTER_PID:-}}" ] && [ ! -e "$QB_RECEIVED" ]; then
    printf '%s\\0' "$@" > "$QB_RECEIVED"
  fi
fi
unset QB_RECEIVED QB_OUTER_PID
export PATH={SYSTEM_PATH}
exec -a bash /bin/bash "$@"
"""

ENTER = """PATH=${{BASH_ENV%/*}}:{path}
export QB_OUTER_PID=$$
unset BASH_ENV
"""

_shim_dir: Path | None = None


def shim_dir() -> Path:
    """A per-process directory holding the shim as ``bash`` (bound read-only into bwrap)."""
    global _shim_dir
    if _shim_dir is None:
        d = Path(tempfile.mkdtemp(prefix="qb-shim-")).resolve()
        (d / "bash").write_text(SHIM)
        (d / "bash").chmod(0o755)
        (d / "enter").write_text(ENTER.format(path=SYSTEM_PATH))
        atexit.register(shutil.rmtree, d, True)
        _shim_dir = d
    return _shim_dir


def received_from(argv: list[bytes]) -> str | None:
    """The program text of a ``bash [-opts] -c PROGRAM [args...]`` argument vector."""
    for i, a in enumerate(argv):
        if a == b"-c" or (a.startswith(b"-") and not a.startswith(b"--") and a.endswith(b"c")):
            if i + 1 < len(argv):
                return argv[i + 1].decode("utf-8", errors="surrogateescape")
            return None
    return None


class InnerShell:
    """Runs ``["bash", "-c", wrap(R)]`` and captures what the inner ``bash -c`` received."""

    def __init__(self, name: str, boundary: str, wrap: Callable[[str], str]) -> None:
        self.name = name
        self.boundary = boundary
        self.wrap = wrap

    async def deliver(self, command: str, sandbox: Sandbox) -> Delivery:
        if (why := check_command(command)) is not None:
            return Delivery(received=None, execution=None, transport_error=why)
        capture = sandbox.scratch("received")
        shim = shim_dir()
        inside = sandbox.mount_point(shim, "qb-shim")  # fixed under bwrap: $PATH reads the same every run
        delivery = await run_program(
            sandbox, ["bash", "-c", self.wrap(command)], received=None,
            env={"BASH_ENV": f"{inside}/enter", "QB_RECEIVED": sandbox.inside(capture)}, binds=((shim, inside),),
        )
        if capture.exists():
            delivery.received = received_from(capture.read_bytes().split(b"\0")[:-1])
            capture.unlink()
        return delivery
