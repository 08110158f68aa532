"""`gemini-cli`: Gemini CLI's ``run_shell_command`` tool, the real release, driven offline by the courier.

The route (measured offline from the kernel's exec trace; docs/harnesses.md)
    Gemini CLI 0.61.0 takes the model's ``run_shell_command`` command R, strips an outer ``bash -c '...'``
    (``sh``, ``zsh``, any path; the quotes are sliced off, not unescaped), refuses it when it holds ``$(``,
    a backtick, ``<(`` or ``>(`` outside single quotes ("Command injection detected"), trims it (a trailing
    ``\\`` then gets a space), and runs ``/usr/bin/bash -c PROGRAM`` with :data:`PREFIX` + R' + :data:`SUFFIX`:

        shopt -u promptvars nullglob extglob nocaseglob dotglob; _bgpids_file=/tmp/gemini-shell-XXXXXX/bgpids.tmp
        (
          trap 'jobs -p > "$_bgpids_file"' EXIT
        <R'>
        )
        __code=$?
        exit $__code

The component
    npm ``@google/gemini-cli`` at :data:`VERSION` (JavaScript, about 100 MB with its dependencies), installed
    with scripts off into the per-user cache and run by the system's node (``/usr/bin/node``, visible in the
    sandbox like every system program) as ``node bundle/gemini.js -p PROMPT -m gemini-2.5-flash --yolo``, stdin
    ``/dev/null``. ``GEMINI_API_KEY`` is a dummy, ``GOOGLE_GEMINI_BASE_URL`` the courier,
    ``GEMINI_CLI_NO_RELAUNCH=true`` (no second node with a larger heap). A ``/bin/sh`` step in front writes
    :data:`SETTINGS` to ``$HOME/.gemini/settings.json`` inside the sandbox (auto-update, usage statistics and
    telemetry off; the API-key auth selected, since a base URL alone makes 0.61.0 pick a "gateway" auth its
    own check rejects; folder trust off, else ``--yolo`` is overridden in an untrusted folder) and execs node
    in its place, so the harness keeps the launcher's pid.

``received``
    The text the final shell executes for R: the program between the wrapper's fixed frame, :data:`PREFIX`
    (with the harness's temp-file word) and :data:`SUFFIX`, matched exactly; that is R' above, the body of the
    ``( ... )`` subshell. ``received == R`` says R's text arrived unchanged; a trimmed R, a trailing
    backslash's added space, a stripped ``bash -c`` are damage. The frame is a textual paste, so R's own
    grammar still meets it (an unbalanced ``)`` in R closes the subshell): ``received`` is the text, not a
    claim about how bash parses it. The final shell is the first exec of the system's bash file that the
    harness itself started (its parent is the harness's pid: the launcher's, which execs node in place), whose
    ``-c`` program starts with the frame's ``shopt -u promptvars``; a bash that R starts is R's shell's child
    and never counts. The whole program is the record's ``wrapper``. A frame that does not match exactly
    gives ``received: null`` with a note.

A refused command
    When the kernel saw no final-shell exec, nothing of R ran, so the courier's log (the tool result Gemini
    CLI sent back to the model) can be trusted for why: a refusal ("Command injection detected: ...") or a
    tool error ("Command cannot be empty." for a blank R) becomes the record's ``transport_error`` with
    Gemini's own words, and the verdict fails (``transport``). When a
    final shell did run, R could have written the same words into its output, so they are never read.

No ``-safe`` twin
    The trimming and the refusal are the harness's own; no encoding of R in the tool call avoids them (R
    travels as a JSON string and arrives whole up to them).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..base import Delivery
from ..capture import program_identity, received_from
from ..components import NODE, Component
from ..needs import MissingComponent
from ..paths.npm_cache import node_program
from ..sandbox import Sandbox
from ..sandbox.exectrace import Exec
from .claude_code import PYTHON3
from .courier import logged_result
from .harness import Final, HarnessRoute, forked_shells

PACKAGE = "@google/gemini-cli"
VERSION = "0.61.0"
"""The release measured in HARNESSES.md."""
GEMINI_CLI = Component("gemini-cli", "npm", PACKAGE, version=VERSION, install_timeout_s=900.0,
                       note="the real harness (JavaScript, run by the system's node, about 100 MB), pinned; "
                            "installed with --ignore-scripts")
PROMPT = "Run the command the task needs with the run_shell_command tool."
MODEL = "gemini-2.5-flash"
SETTINGS = json.dumps({"general": {"disableAutoUpdate": True, "disableUpdateNag": True},
                       "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
                       "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}}})
"""``~/.gemini/settings.json`` in the sandbox (see the module docstring for why each key)."""
SETUP = 'mkdir -p "$HOME/.gemini" && printf %s "$1" > "$HOME/.gemini/settings.json" && shift && exec "$@"'
"""The step in front of node: the settings into the sandbox's HOME, then node in this pid's place."""

PREFIX = re.compile(r"shopt -u promptvars nullglob extglob nocaseglob dotglob; "
                    r"_bgpids_file=(?:[A-Za-z0-9_./@%+=:,-]+|'[^'\n]*')\n"
                    r"\(\n  trap 'jobs -p > \"\$_bgpids_file\"' EXIT\n")
"""The wrapper's fixed text before R' (the temp file's word: a plain path, or one single-quoted)."""
SUFFIX = "\n)\n__code=$?\nexit $__code"
"""The wrapper's fixed text after R'."""
START = "shopt -u promptvars "
"""How every program Gemini CLI runs through bash starts (its guard), so a final-shell candidate."""
REFUSAL = "Command injection detected"
"""What Gemini CLI tells the model when it refuses R (``$(``, backticks, ``<(``, ``>(``)."""


class GeminiCli(HarnessRoute):
    harness = "gemini-cli"
    version = VERSION
    package = GEMINI_CLI
    url_var = "GOOGLE_GEMINI_BASE_URL"
    source = (f"Gemini CLI's run_shell_command tool (npm {PACKAGE} {VERSION}), measured in docs/harnesses.md: "
              "/usr/bin/bash -c \"shopt -u promptvars ...; _bgpids_file=...; ( trap ... EXIT; <R trimmed> ); ...\" "
              "(newlines, not ;), and $(..), backticks, <(..), >(..) refused")
    component = (f"the real Gemini CLI {VERSION} (node) with a scripted Gemini API server in the sandbox, "
                 "then bash -c WRAPPER")
    route_needs = (GEMINI_CLI, NODE, PYTHON3)

    def __init__(self) -> None:
        super().__init__(boundary=("the model's run_shell_command call, outer bash -c '..' stripped, R trimmed (a "
                                   "trailing \\ gets a space), pasted into a ( ... ) subshell of bash -c WRAPPER; "
                                   "$(..), backticks, <(..), >(..) refused"))

    def program(self, prefix: Path) -> Path:
        node_program()  # MissingComponent (a harness error) before anything runs, like a missing package
        found = prefix / "node_modules" / "@google" / "gemini-cli" / "bundle" / "gemini.js"
        if not found.is_file():
            raise MissingComponent(f"{PACKAGE}@{VERSION} in {prefix} has no bundle/gemini.js (expected {found})")
        return found

    def argv(self, program: str) -> list[str]:
        return ["/bin/sh", "-c", SETUP, "qb-gemini-setup", SETTINGS, node_program(), program,
                "-p", PROMPT, "-m", MODEL, "--yolo"]

    def env(self) -> dict[str, str]:
        return {"GEMINI_API_KEY": "quotebench-courier-dummy-key", "GEMINI_CLI_NO_RELAUNCH": "true"}

    def final_shell(self, execs: list[Exec]) -> Final:
        return wrapper_shell(execs)

    async def _deliver(self, command: str, sandbox: Sandbox, prefix: Path, program: Path, rel: str) -> Delivery:
        done = await super()._deliver(command, sandbox, prefix, program, rel)
        if done.execution is None or done.harness is None or done.harness_error is not None:
            return done
        trace = done.execution.trace
        if trace is None or trace.dropped:  # without every exec, "no shell ran" cannot be known
            return done
        why = refused(list(trace.execs), done.harness.log, done.execution.stdout.text)
        if why is None:
            return done
        return Delivery(received=None, execution=None, transport_error=f"{self.name}: Gemini CLI refused the command: {why}",
                        harness=done.harness)


def refused(execs: list[Exec], log: str | None, stdout: str) -> str | None:
    """Gemini CLI's refusal of R (:func:`refusal`), only when the kernel saw the harness start no shell at
    all: then nothing of R ran and cannot have written the words; after a shell of the harness, None."""
    if harness_shells(execs):
        return None
    return refusal(log, stdout)


def harness_shells(execs: list[Exec]) -> list[Exec]:
    """Every exec of the system's bash file whose parent is the harness's pid (the run's first exec, which
    the launcher's pid keeps through its execs), whatever its program."""
    if not execs:
        return []
    harness, bash = execs[0].pid, program_identity("bash")
    return [e for e in forked_shells(execs) if e.parent == harness and e.exe is not None and e.exe == bash]


def wrapper_shell(execs: list[Exec]) -> Final:
    """The final shell (the first bash the harness started whose ``-c`` program starts with Gemini CLI's
    guard) and ``received`` read from its wrapper (:func:`inner`)."""
    if not execs:
        return Final(None, note="the kernel saw no program run")
    found = [(e, text) for e in harness_shells(execs)
             if (text := received_from(list(e.argv))) is not None and text.startswith(START)]
    if not found:
        return Final(None, note="the harness started no bash with its wrapper")
    chosen, wrapper = found[0]
    notes = [f"the harness started {len(found)} wrappers; received is the first one's"] if len(found) > 1 else []
    if not chosen.argv_complete:
        return Final(chosen, wrapper, None, "; ".join(notes + ["the final shell's argv could not be read whole"]))
    received = inner(wrapper)
    if received is None:
        notes.append("the wrapper does not match Gemini CLI 0.61.0's frame, so received is not read from it")
    return Final(chosen, wrapper, received, "; ".join(notes) or None)


def inner(wrapper: str) -> str | None:
    """R' out of a wrapper: the text between :data:`PREFIX` (matched at the start) and :data:`SUFFIX`
    (matched at the end); None when either does not match exactly."""
    head = PREFIX.match(wrapper)
    if head is None or not wrapper.endswith(SUFFIX) or len(wrapper) - len(SUFFIX) < head.end():
        return None
    return wrapper[head.end():len(wrapper) - len(SUFFIX)]


def refusal(log: str | None, stdout: str) -> str | None:
    """Why Gemini CLI did not run R, as it told the model: the first ``tool_result`` of the courier's log that
    holds :data:`REFUSAL` in a text, or reports an ``error`` (``Command cannot be empty.`` for a blank R); else
    :data:`REFUSAL` as printed on stdout. Its first line, at most 300 characters; None if nothing says so. Only
    to be read when no shell of the harness ran (the caller's duty: then R cannot have written it)."""
    for line in (log or "").splitlines():
        if not line.startswith("tool_result "):
            continue
        try:
            doc = logged_result(line)
        except ValueError:
            continue
        texts = [v for v in (doc.values() if isinstance(doc, dict) else [doc]) if isinstance(v, str)]
        said = next((t[t.index(REFUSAL):] for t in texts if REFUSAL in t), None)
        if said is None and isinstance(doc, dict) and isinstance(doc.get("error"), str) and doc["error"].strip():
            said = doc["error"].strip()
        if said is not None:
            return said.splitlines()[0][:300]
    for line in stdout.splitlines():
        if REFUSAL in line:
            return line[line.index(REFUSAL):][:300]
    return None
