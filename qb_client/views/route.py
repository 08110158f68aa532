"""Why a route changed a command: its boundary, the rules that explain a known change, and the
intermediate text the route built (the outer program, the Makefile, the workflow), for ``exec``.

Each artifact is computed with the transport's own public function, so what is shown is what
ran: ``InnerShell.wrap`` (nested, nested-single, escaped), :func:`transports.ssh.outer_program`,
``DockerSh.command_line``, ``ShlexSh.argv``, ``MakeRecipe.makefile``,
:func:`transports.paths.gha.workflow`, :func:`transports.paths.tmux.send_keys_argv` (the keys sent),
``ShellQuoteEval.handed_on`` and ``argv``, and a JSON layer's ``decode``. shell-quote-eval's rebuilt
string needs node in the sandbox; ``exec`` has just run it, and the route's ``received`` is by
definition that string, so the record's is shown (labelled ``rebuilt``) rather than running node twice.

A rule is a trigger found in R plus the route's documented behaviour for it (the texts restate
the module docstrings of :mod:`transports.paths`); it is shown only when R holds the trigger.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from transports.registry import get


@dataclass(frozen=True)
class Rule:
    routes: tuple[str, ...]        # base names (no -safe, no @shell, no middleware)
    applies: Callable[[str], bool]
    text: str


_DQ = ("nested", "docker-sh", "ssh")
RULES: tuple[Rule, ...] = (
    Rule(_DQ, lambda r: '"' in r, 'an unescaped " in R ends the outer double quotes: what follows is parsed '
                                  "by the outer shell as separate words"),
    Rule(_DQ, lambda r: "$" in r, "$ stays active inside double quotes: the outer shell expands $VAR and $(...) "
                                  "before the final shell sees R"),
    Rule(_DQ, lambda r: "`" in r, "backticks stay active inside double quotes: the outer shell runs them"),
    Rule(_DQ, lambda r: "\\" in r, 'inside double quotes \\ escapes $ ` " \\ and newline: the outer shell '
                                   "removes those backslashes"),
    Rule(("nested-single",), lambda r: "'" in r, "any ' in R ends the outer single quotes"),
    Rule(("shlex-sh",), lambda r: '"' in r or "\\" in r, 'shlex.split honours only \\" and \\\\ inside double '
                                                          "quotes; an unescaped \" ends them"),
    Rule(("tmux",), lambda r: r.rstrip().endswith(";"), "tmux: an argument ending in ; ends the tmux command "
                                                         "(tmux #1849, #4350): Enter becomes a command of its own "
                                                         "and nothing is typed"),
    Rule(("tmux",), lambda r: "!" in r, "the interactive bash expands ! (history expansion) before it runs the line"),
    Rule(("tmux",), lambda r: "\t" in r, "a tab typed into readline asks for completion, it is not inserted"),
    Rule(("tmux",), lambda r: "\n" in r.rstrip("\n"), "each line is typed on its own: a multi-line R goes through "
                                                       "the continuation prompt (PS2), a line that reads stdin reads "
                                                       "the lines typed after it"),
    Rule(("make",), lambda r: "$" in r, "make expands $ itself ($HOME is $H then OME; $$ is one $)"),
    Rule(("make",), lambda r: "\n" in r, "a newline ends the recipe line: each line runs in its own sh -c, or is "
                                         "read as makefile syntax"),
    Rule(("make",), lambda r: r[:1] in (" ", "\t", "@", "-", "+"), "make strips leading blanks and @ - + from a "
                                                                   "recipe line"),
    Rule(("gha-run",), lambda r: ": " in r or " #" in r or r[:1] in "*&!{[|>'\"%@",
         "in a plain YAML scalar ': ' and ' #' and a leading *&!{[|>'\"%@ are YAML syntax"),
    Rule(("gha-run",), lambda r: "\n" in r, "a plain scalar folds an indented next line into the first with a "
                                            "space; one at column 0 ends the step"),
    Rule(("gha-block",), lambda r: not r.endswith("\n") or r.endswith("\n\n"),
         "a | block scalar clips: the script ends in exactly one newline"),
    Rule(("gha-block",), lambda r: r[:1] == " ", "a first line starting with a blank changes the block's "
                                                 "indentation"),
    Rule(("gha-run", "gha-block"), lambda r: "${{" in r, "${{ }} is substituted by the runner before the script "
                                                         "is written"),
    Rule(("shell-quote-eval",), lambda r: "|" in r, "with a pipe, shell-quote re-tokenises R: $VAR is expanded "
                                                    "against the harness's environment, quotes and newlines are "
                                                    "dropped, each token is re-quoted"),
    Rule(("json-naive",), lambda r: '"' in r or "\\" in r or bool(re.search("[\x00-\x1f]", r)),
         'pasted into {"command": "R"}: a " ends the JSON string, a \\ starts a JSON escape, a raw control '
         "character is refused by the strict parser"),
)


def _parts(name: str) -> list[str]:
    """A transport name's layers, outermost first, each without ``-safe`` or ``@shell``."""
    return [p.split("@")[0].removesuffix("-safe") for p in name.split("+")]


def rules_for(name: str, command: str) -> list[str]:
    """The rules of ``name``'s unsafe layers whose trigger is in ``command`` (a -safe layer has none)."""
    unsafe = {p.split("@")[0] for p in name.split("+") if not p.split("@")[0].endswith("-safe")}
    return [r.text for r in RULES if unsafe & set(r.routes) and r.applies(command)]


def boundary(name: str) -> str:
    """The transport's own one-line boundary text, or "" (raw has none)."""
    try:
        return get(name).boundary or ""
    except Exception:  # noqa: BLE001 - a path whose component is missing still runs exec; its error comes later
        return ""


def artifacts(name: str, command: str, received: str | None = None) -> list[tuple[str, str]]:
    """(label, text) for each intermediate text the transport's own code builds from ``command``,
    outermost layer first; a layer that cannot produce one (or fails to) ends the list. ``received``:
    the record's, for a text only a run can make (shell-quote-eval's rebuild)."""
    try:
        t: Any = get(name)
    except Exception:  # noqa: BLE001 - see boundary()
        return []
    shown: list[tuple[str, str]] = []
    text = command
    while t is not None:
        inner = getattr(t, "inner", None) if hasattr(t, "decode") else None
        if inner is not None:  # a JSON layer: what it decodes is what its inner transport gets
            try:
                text = t.decode(text)
            except Exception:  # noqa: BLE001 - the transport error says why; nothing more to show
                return shown
            if not isinstance(text, str):
                return shown
            shown.append(("decoded", text))
            t = inner
            continue
        item = _terminal_artifact(t, text, received)
        if item is not None:
            shown.append(item)
        return shown
    return shown


def _terminal_artifact(t: Any, command: str, received: str | None = None) -> tuple[str, str] | None:
    """The intermediate text of one terminal transport, from its own public function, or None."""
    base = t.name.split("@")[0]
    if base in ("docker-sh", "docker-sh-safe"):
        return "outer", t.command_line(command)
    if base in ("tmux", "tmux-safe"):
        from transports.paths.tmux import send_keys_argv

        try:
            return "keys", json.dumps(send_keys_argv(command, t.safe), ensure_ascii=False)
        except ValueError:  # the driver changed shape: nothing to show rather than a wrong argv
            return None
    if base in ("shell-quote-eval", "shell-quote-eval-safe"):
        program = t.handed_on(command)
        if program is not None:
            return "argv", json.dumps(t.argv(program), ensure_ascii=False)
        return ("rebuilt", received) if received is not None else None
    wrap, shell = getattr(t, "wrap", None), getattr(t, "shell", None)
    if callable(wrap) and shell is not None:  # nested, nested-single, escaped (capture.InnerShell)
        return "outer", wrap(shell.text, command)
    if base in ("ssh", "ssh-safe"):
        from transports.ssh import outer_program

        return "outer", outer_program(command, bool(getattr(t, "safe", False)))
    if hasattr(t, "argv") and base.startswith("shlex-sh"):
        try:
            return "argv", json.dumps(t.argv(command), ensure_ascii=False)
        except ValueError as e:
            return "argv", f"(shlex.split refused it: {e})"
    if hasattr(t, "makefile"):
        script = None
        if getattr(t, "safe", False):
            from transports.paths.make_recipe import one_line_exact

            script = None if one_line_exact(command) else "/run/qb-files/recipe.sh-N"
        return "makefile", t.makefile(command, script)
    if base.startswith("gha-"):
        from transports.paths.gha import workflow

        return "workflow", workflow(command, t.style, t.safe)
    if base.startswith("template:"):  # a user's template: the text its outer shell runs
        return "outer", t.outer_text(command)
    return None
