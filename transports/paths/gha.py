"""`gha-run` and `gha-block`: R as a GitHub Actions step, ``run: R`` (a plain YAML scalar) or ``run: |``
(a literal block scalar), parsed by a real YAML parser and run as the runner runs it.

The route (GitHub docs: workflow syntax ``jobs.<job_id>.steps[*].run`` and ``shell``; "Evaluate
expressions")
    An agent or a generator writes the command into a workflow file. The runner reads the YAML,
    substitutes every ``${{ }}`` expression into the ``run`` text (:mod:`.gha_expr`), writes the
    result to a script file and, with no ``shell:`` given, runs ``bash -e FILE``: errexit is on, so
    the step stops at the first failing simple command.

    * ``gha-run``: ``run: R`` on one line is a plain scalar. ``: `` or `` #`` inside R, or a leading
      ``*&!{[|>'"%@``, parse as YAML syntax (a mapping, a comment, an alias, a flow collection, a
      quoted scalar, a tag...): an error, or a different string; a second line of R at column 0
      ends the step (usually an error), an indented one is folded into the first with a space.
    * ``gha-block``: ``run: |`` then R indented under it. The block keeps R's lines, but "clip"
      chomping makes the text end in exactly one newline, a first line that starts with a space
      changes the detected indentation (an error when later lines are less indented), and a
      character YAML does not allow (most C0 controls, DEL) is an error.

    A YAML error, a ``run`` that is not a string, or a malformed expression is a transport error:
    the runner fails the step and nothing runs. Scalars are read as text (the base loader: no
    YAML 1.1 types), as the runner's schema reads ``run``. Text R adds to the step beyond ``run``
    is noted; a ``shell`` it sets is honoured when it is one of the documented ones, else refused.

``received`` is the script file's text. The parse is host-side pure parsing (PyYAML's pure-Python
base loader), capped at :data:`MAX_YAML` characters and by Python's recursion limit, and run off the
event loop, a large workflow in a process of its own with a time bound (:mod:`.yaml_worker`, which
also says why not libyaml); the script runs inside the sandbox.

The fix, ``gha-run-safe`` = ``gha-block-safe``
    R as a literal block scalar with an explicit indentation indicator (``|2``, so a leading blank
    is content) and the chomping indicator that keeps R's own ending (``-`` when R does not end in
    a newline, ``+`` when it does), each ``${{`` written ``${{ '${{' }}``; a double-quoted scalar with
    escapes when R holds a character a block cannot carry (CR, NEL, LS, PS, controls). And
    ``shell: bash {0}``, the documented custom shell that runs ``bash FILE`` without ``-e``: with
    errexit no encoding reproduces ``raw`` (``false; echo ok > out.txt`` would stop), so the fix
    has to name the shell. The script then holds exactly R and runs as ``tempscript`` does.
"""

from __future__ import annotations

import re

from ..base import Delivery, check_command
from ..components import PYYAML
from ..sandbox import Sandbox
from ..shells import DEFAULT, Shell
from .gha_expr import ExpressionError, neutralise, substitute
from .route import Route
from .yaml_worker import MAX_YAML, first_step, parse_first_step

__all__ = ["MAX_YAML", "SHELLS", "Gha", "double_quoted", "first_step", "safe_step", "workflow"]

HEAD = "on: push\njobs:\n  qb:\n    runs-on: ubuntu-latest\n    steps:\n"
SHELLS = {None: ["bash", "-e", "{0}"], "bash": ["bash", "--noprofile", "--norc", "-eo", "pipefail", "{0}"],
          "sh": ["sh", "-e", "{0}"], "bash {0}": ["bash", "{0}"]}
"""The ``shell`` values run here: none given (the default), ``bash``, ``sh``, and the custom ``bash {0}``."""
_NOT_IN_BLOCK = re.compile("[^\x09\x0a\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")


def double_quoted(text: str) -> str:
    """``text`` as a YAML double-quoted scalar: every character outside printable ASCII escaped."""
    out = []
    for c in text:
        o = ord(c)
        if c in '"\\':
            out.append("\\" + c)
        elif 0x20 <= o < 0x7F:
            out.append(c)
        else:
            out.append(f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}")
    return '"' + "".join(out) + '"'


def safe_step(command: str) -> str:
    """The fix's step: ``shell: bash {0}`` and R as a block scalar (or a double-quoted one), ``${{`` neutralised."""
    text = neutralise(command)
    head = "      - shell: bash {0}\n        run: "
    if _NOT_IN_BLOCK.search(text):
        return head + double_quoted(text) + "\n"
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    body = "".join(("          " + line if line else "") + "\n" for line in lines) if text else ""
    return head + "|2" + ("+" if text.endswith("\n") else "-") + "\n" + body


def workflow(command: str, style: str, safe: bool) -> str:
    if safe:
        return HEAD + safe_step(command)
    if style == "run":
        return HEAD + "      - run: " + command + "\n"
    return HEAD + "      - run: |\n" + "".join("          " + line + "\n" for line in command.split("\n"))


class Gha(Route):
    source = ("GitHub docs: workflow syntax (jobs.<id>.steps[*].run, shell: no shell = bash -e {0}; "
              "custom shell 'bash {0}'), expressions (${{ }} substituted before the script is written)")
    component = "PyYAML (base loader) + the runner's ${{ }} substitution and script file, then bash -e FILE"
    route_needs = (PYYAML,)

    def __init__(self, style: str, safe: bool = False, shell: Shell = DEFAULT) -> None:
        self.style = style
        super().__init__(
            "gha-run" if style == "run" else "gha-block", safe, shell,
            fix="written as a run: |2- block scalar with ${{ neutralised and shell: bash {0} (no errexit); "
                "then bash FILE (the fix)",
            boundary=("pasted as a plain scalar run: R (YAML syntax: ': ', ' #', leading *&!{[|>'\"%@, newlines); "
                      "${{ }} substituted; bash -e FILE" if style == "run" else
                      "pasted as a run: | block scalar (clip chomping: one trailing newline; a leading blank changes "
                      "the indentation); ${{ }} substituted; bash -e FILE"))

    async def deliver(self, command: str, sandbox: Sandbox) -> Delivery:
        if (why := check_command(command)) is not None:
            return Delivery(received=None, execution=None, transport_error=why)
        step = await parse_first_step(workflow(command, self.style, self.safe))  # never on this loop
        script_text, shell, said = self.script_of(step)  # said: the transport error, else a note
        if script_text is None:
            return Delivery(received=None, execution=None, transport_error=said)
        script = sandbox.write_file("gha.sh", script_text.encode("utf-8", "surrogateescape"))  # read-only to R
        argv = [script if a == "{0}" else a for a in SHELLS[shell]]
        if self.shell is not DEFAULT:  # a test's capture program in the shell's place
            argv = [*self.shell.words, *argv[1:]]
        execution = await sandbox.run(argv)
        return Delivery(received=script_text, execution=execution, received_note=said)

    def script_of(self, parsed: tuple[dict | None, str]) -> tuple[str | None, str | None, str | None]:
        """(the script file's text, the step's shell, a note) from the parsed first step, or (None, None, the
        transport error): the runner's part between the YAML parse and the script, shared with ``lint``."""
        step, note = parsed
        if step is None:
            return None, None, f"{self.name}: {note}"
        run, shell = step.get("run"), step.get("shell")
        if not isinstance(run, str):
            return None, None, f"{self.name}: the step's run is not a string"
        if shell not in SHELLS:
            return None, None, f"{self.name}: the step names a shell not run here: {str(shell)[:60]!r}"
        extra = sorted(str(k) for k in step if k not in ("run", "shell"))
        notes = [n for n in (note, f"the step gained keys {', '.join(extra)[:120]} (ignored)" if extra else "") if n]
        try:
            return substitute(run), shell, "; ".join(notes) or None
        except ExpressionError as e:
            return None, None, f"{self.name}: {e}"

