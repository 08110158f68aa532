"""`mini-swe-agent`: the SWE-agent team's minimal agent, the real release, driven offline by the courier.

The route (measured offline with strace; docs/harnesses.md)
    mini-swe-agent's local environment runs each ``bash`` tool call with ``subprocess.Popen(command,
    shell=True)``: Python execs ``/bin/sh -c R``, which is dash on Debian, although the tool is called
    "bash". R arrives whole as the argument vector's program, but dash parses it: ``$'..'``, brace
    expansion, ``<(..)`` and other bashisms differ from ``raw`` (bash).

The component
    PyPI ``mini-swe-agent`` at :data:`VERSION` with ``litellm`` pinned at :data:`LITELLM` (the measured pair),
    in a per-user venv of the system's python3 (:mod:`transports.paths.venv_cache`), bound read-only into the
    sandbox and run as ``bin/python -m minisweagent.run.mini -m openai/fake-model -t PROMPT -y
    --exit-immediately -c mini.yaml`` with ``OPENAI_BASE_URL`` the courier's (litellm reads it),
    ``OPENAI_API_KEY`` a dummy, ``MSWEA_CONFIGURED=true`` (no setup wizard),
    ``MSWEA_COST_TRACKING=ignore_errors`` and ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (no cost map download).
    The courier answers Chat Completions: R as the ``bash`` tool call, then ``echo
    COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``, which ends the run.

``received``
    The program of the first ``/bin/sh -c`` (dash's file) that the harness itself started, read from the
    kernel's exec trace: the exact argument the harness handed its shell (no wrapper, so ``wrapper`` is that
    same text). A shell that R starts is R's shell's child and never counts. The final shell is dash, so the
    record's ``shell`` is ``dash`` and the report compares the route with ``raw@dash``.

No ``-safe`` twin
    R arrives whole (37 of 37 hostile commands in the survey); what differs is the harness's choice of
    ``/bin/sh``, which no encoding of R changes.
"""

from __future__ import annotations

from pathlib import Path

from ..capture import program_identity, received_from
from ..components import Component
from ..needs import MissingComponent
from ..sandbox.exectrace import Exec
from ..shells import SH
from .claude_code import PYTHON3
from .harness import Final, HarnessRoute, forked_shells

DIST = "mini-swe-agent"
VERSION = "2.4.6"
LITELLM = "1.110.2"
MINI_SWE_AGENT = Component("mini-swe-agent", "venv", DIST, version=VERSION, install_timeout_s=900.0,
                           pins=(f"litellm=={LITELLM}",),
                           note=f"the real harness with litellm {LITELLM}, pinned, in a venv of the system's python3 "
                                "(about 750 MB)")
PROMPT = "Run the command the task needs with the bash tool."


class MiniSweAgent(HarnessRoute):
    harness = "mini-swe-agent"
    version = VERSION
    package = MINI_SWE_AGENT
    url_var = "OPENAI_BASE_URL"
    url_path = "/v1"
    source = (f"mini-swe-agent {VERSION} (PyPI, litellm {LITELLM}), measured in docs/harnesses.md: "
              "subprocess.Popen(R, shell=True), so /bin/sh -c R (dash)")
    component = (f"the real mini-swe-agent {VERSION} with a scripted Chat Completions server in the sandbox, "
                 "then /bin/sh -c R")
    route_needs = (MINI_SWE_AGENT, PYTHON3)

    def __init__(self) -> None:
        super().__init__(boundary="the model's bash tool call, run by Popen(R, shell=True): /bin/sh -c R (dash, not bash)",
                         shell=SH)

    def program(self, prefix: Path) -> Path:
        python = prefix / "bin" / "python"
        if not python.exists():
            raise MissingComponent(f"{DIST}=={VERSION} in {prefix} has no bin/python")
        return python

    def argv(self, program: str) -> list[str]:
        return [program, "-m", "minisweagent.run.mini", "-m", "openai/fake-model", "-t", PROMPT, "-y",
                "--exit-immediately", "-c", "mini.yaml"]

    def env(self) -> dict[str, str]:
        return {"OPENAI_API_KEY": "quotebench-courier-dummy-key", "MSWEA_CONFIGURED": "true",
                "MSWEA_COST_TRACKING": "ignore_errors", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "PYTHONDONTWRITEBYTECODE": "1"}

    def final_shell(self, execs: list[Exec]) -> Final:
        return sh_shell(execs)


def sh_shell(execs: list[Exec]) -> Final:
    """The first ``/bin/sh -c`` (dash's file) the harness itself started, and its program."""
    if not execs:
        return Final(None, note="the kernel saw no program run")
    harness, dash = execs[0].pid, program_identity("sh")
    found = [(e, text) for e in forked_shells(execs) if e.parent == harness and e.exe is not None and e.exe == dash
             and (text := received_from(list(e.argv))) is not None]
    if not found:
        return Final(None, note="the harness started no /bin/sh -c")
    chosen, text = found[0]
    if not chosen.argv_complete:
        return Final(chosen, None, None, "the final shell's argv could not be read whole")
    return Final(chosen, text, text, None)
