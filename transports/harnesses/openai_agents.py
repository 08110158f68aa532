"""`openai-agents`: the OpenAI Agents SDK's local sandbox agent, the real release, driven offline by the courier.

The route (measured in the installed 0.24.0 source and with the kernel's exec trace; docs/harnesses.md)
    A ``SandboxAgent`` with the ``Shell`` capability offers the model the function tool ``exec_command``
    (``{"cmd": R, ...}``). With a ``UnixLocalSandboxClient`` the SDK turns the call into the argument vector
    ``["sh", "-c", R]`` (``login`` defaults to true and no ``shell`` is given: ``sh -c``; ``{"shell": "bash"}``
    would give ``bash -lc R``, which the courier never asks for), then makes every argument after the first that
    is an absolute path inside the workspace relative to it (``pathlib``: ``R`` starting with the workspace path
    loses it, ``a//b`` becomes ``a/b``, a trailing ``/`` goes), then prefixes the program with ``cd <workspace>
    && `` (the workspace quoted by ``shlex.quote``) and runs it with ``asyncio.create_subprocess_exec`` from
    ``/``: ``sh`` found on ``PATH`` (dash on Debian), ``HOME`` set to the workspace, the rest of the environment
    the harness's own.

The component
    PyPI ``openai-agents`` at :data:`VERSION` with ``openai`` pinned at :data:`OPENAI` (the client that speaks
    the Responses wire format to the courier; the measured pair), in a per-user venv of the system's python3
    (:mod:`transports.paths.venv_cache`). The SDK has no command line, so the route runs our driver
    (:mod:`transports.harnesses.agents_driver`, SDK and stdlib only, written into the sandbox read-only) with the
    venv's python: the agent as a user of the SDK's local sandbox builds it, on the courier's base URL. The
    courier answers the first Responses request with ``exec_command {"cmd": R}`` and the next with a text end of
    turn.

``received``
    The final shell is the first exec of the system's ``sh`` (dash's file, by identity) whose parent is the
    harness's python process and whose argument vector is ``sh -c PROGRAM`` (:func:`cd_shell`); a shell that R
    starts is R's shell's child and never counts, nor does the SDK's own workspace-fingerprint helper (``sh -c
    PROGRAM sh FILE``, when the session stops).
    Its program is ``cd <workspace> && R'``: ``wrapper`` is the whole program and ``received`` the text after
    the exact prefix ``cd <shlex.quote(workspace)> && ``, the workspace as the driver was given it. Where the
    prefix does not match exactly, ``received`` is null with a note. The record's shell is dash (compare with
    ``raw@dash``).

No ``-safe`` twin
    R travels as a JSON string in the tool call and arrives whole unless it starts with the workspace path,
    which the SDK rewrites itself: no encoding of R by the model changes either (the rewrite looks at the
    program's text, whatever its quoting).
"""

from __future__ import annotations

import copy
import shlex
from pathlib import Path

from ..base import Delivery
from ..capture import program_identity, received_from
from ..components import Component
from ..needs import MissingComponent
from ..sandbox import Sandbox
from ..sandbox.exectrace import Exec
from ..shells import SH
from .claude_code import PYTHON3
from .harness import Final, HarnessRoute, forked_shells

DIST = "openai-agents"
VERSION = "0.24.0"
OPENAI = "3.57.0"
"""openai-python as resolved with openai-agents 0.24.0 when measured: the Responses client the courier answers."""
OPENAI_AGENTS = Component("openai-agents", "venv", DIST, version=VERSION, install_timeout_s=900.0,
                          pins=(f"openai=={OPENAI}",),
                          note=f"the real Agents SDK with openai {OPENAI}, pinned, in a venv of the system's python3 "
                               "(about 120 MB)")
DRIVER = Path(__file__).with_name("agents_driver.py")


class OpenAIAgents(HarnessRoute):
    harness = "openai-agents"
    version = VERSION
    package = OPENAI_AGENTS
    url_var = "OPENAI_BASE_URL"
    url_path = "/v1"
    source = (f"the OpenAI Agents SDK {VERSION} (PyPI openai-agents, openai {OPENAI}), measured in docs/harnesses.md: "
              "SandboxAgent + Shell + UnixLocalSandboxClient run sh -c \"cd <workspace> && R\" (dash)")
    component = (f"the real Agents SDK {VERSION} run by our driver with a scripted Responses server in the sandbox, "
                 "then sh -c \"cd <workspace> && R\"")
    route_needs = (OPENAI_AGENTS, PYTHON3)

    driver: str = ""
    """The driver as the sandbox names it; set on the per-delivery copy (:meth:`deliver`)."""
    workspace: str = ""
    """The workspace the driver is given: the sandbox's working directory as the harness sees it."""

    def __init__(self) -> None:
        super().__init__(boundary=("the model's exec_command call, run by the SDK's local sandbox as sh -c "
                                   "\"cd <workspace> && R\" (dash; R's workspace paths made relative; HOME is the "
                                   "workspace)"), shell=SH)

    async def deliver(self, command: str, sandbox: Sandbox) -> Delivery:
        """Each delivery runs on its own copy of the route, bound to its sandbox's driver file and workspace (a
        route object is shared by concurrent deliveries)."""
        bound = copy.copy(self)
        bound.workspace = sandbox.inside(sandbox.workdir)
        bound.driver = sandbox.write_file("agents_driver.py", DRIVER.read_bytes())
        return await HarnessRoute.deliver(bound, command, sandbox)

    def program(self, prefix: Path) -> Path:
        python = prefix / "bin" / "python"
        if not python.exists():
            raise MissingComponent(f"{DIST}=={VERSION} in {prefix} has no bin/python")
        return python

    def argv(self, program: str) -> list[str]:
        return [program, "-I", "-B", self.driver, self.workspace]

    def env(self) -> dict[str, str]:
        return {}

    def final_shell(self, execs: list[Exec]) -> Final:
        return cd_shell(execs, self.workspace)


def cd_prefix(workspace: str) -> str:
    """What the SDK puts before R: ``cd <workspace> && ``, the workspace quoted by ``shlex.quote``."""
    return f"cd {shlex.quote(workspace)} && "


def cd_shell(execs: list[Exec], workspace: str) -> Final:
    """The final shell: the first exec of the system's ``sh`` (dash's file) whose parent is the harness's python
    process and whose argument vector is exactly ``sh -c PROGRAM``, as the SDK builds it for a tool call. The
    SDK's own helpers run as ``sh -c PROGRAM NAME ARG`` (the workspace fingerprint, when the session stops) and
    never count, nor does a shell that R starts (R's shell's child). ``received`` is what follows the exact ``cd
    <workspace> && `` prefix, None (with a note) when the program does not start with it."""
    if not execs:
        return Final(None, note="the kernel saw no program run")
    harness, dash = execs[0].pid, program_identity("sh")
    found = [(e, text) for e in forked_shells(execs) if e.parent == harness and e.exe is not None and e.exe == dash
             and (len(e.argv) == 3 or not e.argv_complete) and (text := received_from(list(e.argv))) is not None]
    if not found:
        return Final(None, note="the harness started no sh -c")
    chosen, program = found[0]
    if not chosen.argv_complete:
        return Final(chosen, None, None, "the final shell's argv could not be read whole")
    prefix = cd_prefix(workspace)
    if not program.startswith(prefix):
        return Final(chosen, program, None,
                     f"the final shell's program does not start with the SDK's {prefix.strip()!r} prefix")
    return Final(chosen, program, program[len(prefix):], None)
