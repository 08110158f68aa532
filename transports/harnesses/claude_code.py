"""`claude-code`: Claude Code's Bash tool, the real release, driven offline by the courier.

The route (measured offline with strace; docs/harnesses.md)
    Claude Code 2.1.x hands the model's ``Bash`` command to ``/bin/bash -c WRAPPER`` where WRAPPER is
    ``source <snapshot> 2>/dev/null || true && shopt -u extglob 2>/dev/null || true && eval '<R quoted>'
    < /dev/null && pwd -P >| /tmp/claude-XXXX-cwd`` (no ``< /dev/null`` for a heredoc). The shell snapshot
    is made once per session by a ``bash -c -l`` of its own. So R reaches bash through an ``eval`` of one
    single-quoted word: its text arrives whole, but ``set -e`` has no effect (the ``eval`` is left of
    ``&&``), ``~/.bashrc`` aliases apply, and grep/find/rg are the snapshot's functions.

The component
    npm ``@anthropic-ai/claude-code`` at :data:`VERSION`, installed with scripts off (``--ignore-scripts``):
    the package is a launcher whose postinstall only copies the native program of the platform package
    (``@anthropic-ai/claude-code-linux-x64``, an optional dependency, 235 MB) over ``bin/claude.exe``. The
    route runs that native program directly, so neither the postinstall nor node is needed at run time.
    Started as ``claude -p PROMPT --dangerously-skip-permissions`` with ``IS_SANDBOX=1`` (needed when the
    sandbox's user is root), the courier's URL in ``ANTHROPIC_BASE_URL``, a dummy key, and telemetry,
    auto-update, error reporting and non-essential traffic off. ``HOME`` is the sandbox's.

``received``
    The argument of the wrapper's ``eval``: the word after ``&& eval `` in the final shell's ``-c`` text,
    with its quotes removed by bash itself (:mod:`transports.harnesses.dequote`). The final shell is the
    first exec, in the kernel's trace, of the system's bash started by the harness itself whose ``-c``
    program holds ``&& eval `` (a bash that R starts is not the harness's child, so it never counts); the
    record's ``wrapper`` is that whole program. None when the harness started no such shell (the courier
    died first, the harness refused, the time ran out).

No ``-safe`` twin
    The route has no encoding choice to fix: R is the tool call's JSON string, and Claude Code 2.1.x
    delivers it whole (37/37 hostile commands in HARNESSES.md). What differs from ``raw`` (``set -e``,
    aliases, the snapshot's functions) is the harness's own shell setup, which no encoding of R changes.
"""

from __future__ import annotations

import platform
from pathlib import Path

from ..capture import program_identity, received_from
from ..components import Component, program as program_component
from ..needs import MissingComponent
from ..sandbox.exectrace import Exec
from .dequote import DequoteError, dequote, word_after
from .harness import Final, HarnessRoute, forked_shells

PACKAGE = "@anthropic-ai/claude-code"
VERSION = "2.1.197"
"""The release measured in HARNESSES.md."""
INSTALL_TIMEOUT_S = 900.0
CLAUDE_CODE = Component("claude-code", "npm", PACKAGE, version=VERSION, node=False, install_timeout_s=INSTALL_TIMEOUT_S,
                        note="the real harness (a native program, 235 MB), pinned; installed with --ignore-scripts")
PYTHON3 = program_component("python3", note="runs the courier (a scripted Messages server) inside the sandbox")
PROMPT = "Run the command the task needs with the Bash tool."
MARKER = "&& eval "
NO_HOOKS = '{"disableAllHooks": true}'
"""Claude Code runs hooks from ``~/.claude/settings.json`` and the project's ``.claude/settings.json`` as its own
children, before and after the Bash tool. The sandbox starts with none, but in a chain an earlier command can
write them, and a hook could then stand in for the tool's shell or kill the harness. Settings given on the
command line take precedence over user and project settings, so this turns every hook off."""
ARCH = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}


class ClaudeCode(HarnessRoute):
    harness = "claude-code"
    version = VERSION
    package = CLAUDE_CODE
    url_var = "ANTHROPIC_BASE_URL"
    source = ("Claude Code's Bash tool (npm @anthropic-ai/claude-code " + VERSION + "), measured in "
              "docs/harnesses.md: /bin/bash -c \"source <snapshot> ... && eval '<R>' < /dev/null && pwd -P >| ...\"")
    component = (f"the real Claude Code {VERSION} (native program) with a scripted Messages server in the sandbox, "
                 "then bash -c WRAPPER")
    route_needs = (CLAUDE_CODE, PYTHON3)

    def __init__(self) -> None:
        super().__init__(boundary=("the model's Bash tool call, handed by Claude Code to bash -c \"source <snapshot> ... "
                                   "&& eval '<R quoted>' < /dev/null && pwd -P >| ...\" (set -e ignored, aliases, "
                                   "snapshot functions)"))

    def program(self, prefix: Path) -> Path:
        arch = ARCH.get(platform.machine().lower(), platform.machine().lower())
        found = prefix / "node_modules" / "@anthropic-ai" / f"claude-code-linux-{arch}" / "claude"
        if not found.is_file():
            raise MissingComponent(f"{PACKAGE}@{VERSION} in {prefix} has no native program for linux-{arch} "
                                   f"(expected {found})")
        return found

    def argv(self, program: str) -> list[str]:
        return [program, "-p", PROMPT, "--dangerously-skip-permissions", "--settings", NO_HOOKS]

    def env(self) -> dict[str, str]:
        return {"ANTHROPIC_API_KEY": "quotebench-courier-dummy-key", "IS_SANDBOX": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
                "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1"}

    def final_shell(self, execs: list[Exec]) -> Final:
        return eval_shell(execs)


def eval_marker(text: str) -> str | None:
    """What the eval word follows in a wrapper: ``&& eval `` after the snapshot's ``source`` (2.1.x), or a
    leading ``eval `` (the same wrapper when there is no snapshot to source); None for any other program."""
    if MARKER in text:
        return MARKER
    return "eval " if text.startswith("eval ") else None


def eval_shell(execs: list[Exec]) -> Final:
    """The first bash that the harness itself started (its parent is the harness's pid: the launcher's, which
    execs the harness in place) whose ``-c`` program holds the wrapper's ``&& eval``, and the eval's
    argument. A bash that R starts is R's shell's child, never the harness's, so R cannot add a wrapper."""
    if not execs:
        return Final(None, note="the kernel saw no program run")
    harness, bash = execs[0].pid, program_identity("bash")
    found = [(e, text) for e in forked_shells(execs) if e.parent == harness and e.exe is not None and e.exe == bash
             and (text := received_from(list(e.argv))) is not None and eval_marker(text) is not None]
    if not found:
        return Final(None, note="the harness started no bash with its eval wrapper")
    chosen, wrapper = found[0]
    notes = [f"the harness started {len(found)} wrappers; received is the first one's"] if len(found) > 1 else []
    if not chosen.argv_complete:
        return Final(chosen, wrapper, None, "; ".join(notes + ["the final shell's argv could not be read whole"]))
    try:
        received = dequote(word_after(wrapper, eval_marker(wrapper) or MARKER))
    except DequoteError as e:
        return Final(chosen, wrapper, None, "; ".join(notes + [str(e)]))
    return Final(chosen, wrapper, received, "; ".join(notes) or None)
