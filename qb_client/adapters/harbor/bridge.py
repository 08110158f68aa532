"""Where Harbor runs for us: in this process when ``harbor`` is importable, else in its per-user venv.

Harbor 0.26.0 needs Python >= 3.12; QuoteBench runs on 3.11. So ``harbor`` is a component
(:data:`transports.components.HARBOR`): a venv of a Python >= 3.12 found on the machine, installed on first
use or by ``quotebench components install harbor``, listed by ``quotebench doctor``. Our standalone script
:mod:`.worker` runs there as ``VENV/bin/python -I worker.py OP``: the request as JSON on stdin, one JSON
document on stdout, bounded (:data:`MAX_OUTPUT` bytes read, :data:`TIMEOUT_S` of wall clock). On Python >=
3.12 with the ``harbor`` extra installed, the same functions are called in-process instead.

Any failure (no Python >= 3.12, the install failed, the worker died or said too much) is
:class:`~qb_client.console.BadInput`: one line, exit 2.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from transports.components import HARBOR, MissingComponent

from ...console import BadInput, one_line
from . import worker

MAX_OUTPUT = 256 << 20
"""The most bytes of the worker's stdout read; more is an error (it only echoes what it was given, trimmed)."""
TIMEOUT_S = 300.0
WORKER = Path(worker.__file__)

_FORCE_VENV = "QB_HARBOR_VENV"
"""Set to 1 to use the venv even where ``harbor`` is importable (the tests hold both ways to one answer)."""


def in_process() -> bool:
    """Whether Harbor is importable here (Python >= 3.12 with the ``harbor`` extra)."""
    if os.environ.get(_FORCE_VENV) == "1" or sys.version_info < (3, 12):
        return False
    return importlib.util.find_spec("harbor") is not None


def venv_python() -> Path:
    """The Harbor venv's interpreter, installing the venv on first use; BadInput (one line) if it cannot be had."""
    from transports.paths.venv_cache import venv_dir

    try:
        prefix = venv_dir(HARBOR.package, HARBOR.version or "", HARBOR.pins, timeout_s=HARBOR.install_timeout_s,
                          min_python=HARBOR.min_python)
    except MissingComponent as e:
        raise BadInput(f"harbor: {one_line(str(e))}") from None
    return prefix / "bin" / "python"


def _read_capped(stream: Any, cap: int, into: list[bytes]) -> None:
    """Keep at most ``cap`` bytes of ``stream``; past that, drain it (so the writer never blocks) and end
    ``into`` with an empty marker."""
    total = 0
    while chunk := stream.read(1 << 16):
        total += len(chunk)
        if total <= cap:
            into.append(chunk)
        elif not into or into[-1] != b"":
            into.append(b"")


def run(op: str, request: dict[str, Any]) -> dict[str, Any]:
    """The worker's answer to ``op`` with ``request``."""
    if in_process():
        return worker.handle(op, request)
    python = venv_python()
    data = json.dumps(request, ensure_ascii=True).encode()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    try:
        proc = subprocess.Popen([str(python), "-I", str(WORKER), op], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env)
    except OSError as e:
        raise BadInput(f"harbor: cannot start {python}: {e.strerror or e}") from None
    out: list[bytes] = []
    err: list[bytes] = []
    readers = [threading.Thread(target=_read_capped, args=(proc.stdout, MAX_OUTPUT, out), daemon=True),
               threading.Thread(target=_read_capped, args=(proc.stderr, 1 << 16, err), daemon=True)]
    for t in readers:
        t.start()
    try:
        assert proc.stdin is not None
        proc.stdin.write(data)
        proc.stdin.close()
    except BrokenPipeError:
        pass
    try:
        code = proc.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise BadInput(f"harbor: the worker ({op}) took longer than {TIMEOUT_S:.0f} s; stopped") from None
    for t in readers:
        t.join(timeout=10)
    if out and out[-1] == b"":
        raise BadInput(f"harbor: the worker ({op}) wrote more than {MAX_OUTPUT} bytes; not read")
    said = b"".join(err).decode(errors="replace").strip().splitlines()
    if code != 0:
        raise BadInput(f"harbor: the worker ({op}) failed (exit {code}): {one_line(said[-1] if said else '')}")
    try:
        doc = json.loads(b"".join(out))
    except ValueError:
        raise BadInput(f"harbor: the worker ({op}) did not answer with JSON") from None
    if not isinstance(doc, dict):
        raise BadInput(f"harbor: the worker ({op}) did not answer with a JSON object")
    return doc
