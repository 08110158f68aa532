"""A capture program for the deployment-path tests: put in the final shell's place, it records its
argument vector (one directory per invocation, one file per argument) and runs nothing.

A path's ``received`` is then checked against what its real component (node with shell-quote, GNU
make, the runner's script file) actually handed the program in the shell's place, not against a
reimplementation of the component's rules. It lives in the sandbox's ``meta/`` directory, which the
test reads after the run (the commands here are the test's own, not hostile)."""

from __future__ import annotations

from pathlib import Path

from transports.sandbox import Sandbox
from transports.shells import Shell

SCRIPT = """#!/bin/bash
n=0; while [ -e "{meta}/cap.$n" ]; do n=$((n + 1)); done
mkdir "{meta}/cap.$n"; i=0
for a in "$@"; do
    printf '%s' "$a" > "{meta}/cap.$n/$i"
    case $a in /*) if [ -f "$a" ]; then cat -- "$a" > "{meta}/cap.$n/script"; fi;; esac
    i=$((i + 1))
done
"""


def capture_program(box: Sandbox, name: str = "capture") -> str:
    """Write the capture program into the sandbox as ``name`` (make treats one named ``sh`` as a POSIX
    shell); its path as the command sees it."""
    path = box.meta / name
    path.write_text(SCRIPT.format(meta=box.inside(box.meta)))
    path.chmod(0o755)
    return box.inside(path)


def capture_shell(box: Sandbox) -> Shell:
    return Shell("capture", (capture_program(box),), "none")


def invocations(box: Sandbox) -> list[list[str]]:
    """Every invocation's arguments, in order."""
    out: list[list[str]] = []
    n = 0
    while (d := box.meta / f"cap.{n}").is_dir():
        args, i = [], 0
        while (f := d / str(i)).exists():
            args.append(f.read_bytes().decode("utf-8", errors="surrogateescape"))
            i += 1
        out.append(args)
        n += 1
    return out


def script_of(box: Sandbox, n: int = 0) -> str | None:
    """The text of the script file invocation ``n`` was started on (an absolute path argument), if any."""
    f = Path(box.meta / f"cap.{n}" / "script")
    return f.read_bytes().decode("utf-8", errors="surrogateescape") if f.exists() else None
