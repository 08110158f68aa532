"""Why a route changed a command: its boundary, the rules that explain a known change, and the
intermediate text the route built (the outer program, the Makefile, the workflow), for ``exec``.

Each artifact is computed with the transport's own public function, so what is shown is what
ran: ``InnerShell.wrap`` (nested, nested-single, escaped), :func:`transports.ssh.outer_program`,
``DockerSh.command_line``, ``ShlexSh.argv``, ``MakeRecipe.makefile``,
:func:`transports.paths.gha.workflow`, :func:`transports.paths.tmux.send_keys_argv` (the keys sent),
``ShellQuoteEval.handed_on`` and ``argv``, and a JSON layer's ``decode``. shell-quote-eval's rebuilt
string needs node in the sandbox; ``exec`` has just run it, and the route's ``received`` is by
definition that string, so the record's is shown (labelled ``rebuilt``) rather than running node twice.

A rule is a trigger found in R plus the route's documented behaviour for it (:mod:`transports.lint.rules`,
the table ``quotebench lint`` reads too); it is shown only when R holds the trigger.
"""

from __future__ import annotations

import json
from typing import Any

from transports.lint.rules import rules_for as lint_rules_for
from transports.registry import get


def rules_for(name: str, command: str) -> list[str]:
    """The rule texts of ``name``'s unsafe layers whose trigger is in ``command`` (the lint's table,
    :mod:`transports.lint.rules`, so ``exec`` and ``lint`` say the same words)."""
    return [r.text for r in lint_rules_for(name, command)]


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
