"""One predictor per route: what the final shell would receive, computed from the route's own public
functions where it has them (``wrap``, ``outer_program``, ``ShlexSh.argv``, ``workflow`` and the runner's
``script_of``, ``json`` decoding), so the lint and the route cannot drift apart.

A predictor takes (R, the route's transport object, the outer shell's environment or None) and returns an
:class:`.model.Outcome`. Routes whose transformation needs a run return ``unknown`` naming why; the
execution oracle (tests/test_lint_oracle.py) holds every exact prediction to the traced ``received``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ..base import check_command
from .bashparse import ParseError, Scanner, Unknown
from .model import Outcome, exact, refused, unknown
from .outer import program_of, predict, predict_ssh, too_long

Env = Mapping[str, str] | None
Predictor = Callable[[str, Any, Env], Outcome]


def _raw(command: str, t: Any, env: Env) -> Outcome:
    if (why := too_long(command)) is not None:
        return refused(why)
    return exact(command)


def _tempscript(command: str, t: Any, env: Env) -> Outcome:
    return exact(command)


def _inner_shell(command: str, t: Any, env: Env) -> Outcome:
    return predict(t.wrap(t.shell.text, command), env)


def _docker_sh(command: str, t: Any, env: Env) -> Outcome:
    return predict(t.command_line(command).removeprefix("docker exec CTR "), env)


def _ssh(command: str, t: Any, env: Env) -> Outcome:
    if getattr(t, "remote", None) is not None:
        return unknown("a real sshd's login shell is outside the sandbox: its parse is that host's")
    return predict_ssh(t.outer_text(command), env)


SHLEX_MAX = 64 * 1024
"""Characters above which the lint does not run ``shlex.split`` (pure Python, quadratic in a token's length:
a megabyte takes it most of a minute); the route itself pays that on every delivery."""


def _shlex_sh(command: str, t: Any, env: Env) -> Outcome:
    if len(command) > SHLEX_MAX:
        return unknown(f"longer than {SHLEX_MAX} characters: shlex.split's time on it is not spent here")
    try:
        argv = t.argv(command)
    except ValueError as e:
        return refused(f"{t.name}: shlex.split: {e}")
    return exact(program_of(argv))


def _gha(command: str, t: Any, env: Env) -> Outcome:
    from ..paths.gha import workflow
    from ..paths.yaml_worker import first_step

    text, _shell, said = t.script_of(first_step(workflow(command, t.style, t.safe)))
    return refused(said or "") if text is None else exact(text)


def _make(command: str, t: Any, env: Env) -> Outcome:
    if t.safe:
        return exact(command)
    if "\r" in command:
        return unknown("a carriage return in a Makefile line (make's reading of it is not modelled)")
    first, *rest = command.split("\n")
    if any(line.endswith("\\") for line in [first] + rest):
        return unknown("a backslash at the end of a recipe line joins it to the next")
    for line in rest:
        if line.strip() and not line.startswith("\t"):
            return unknown("a line after a newline is makefile syntax: make may refuse the whole file",
                           damaged=True)
    for line in [first] + [line[1:] for line in rest]:
        try:
            expanded = _make_expand(line, env)
        except ValueError as e:
            return unknown(str(e), damaged=True)
        program = expanded.lstrip(" \t@+-")
        while program != program.lstrip(" \t@+-"):
            program = program.lstrip(" \t@+-")
        if program.strip(" \t"):
            return exact(program_of(["/bin/sh", "-c", program]))
    return exact(None)


_AUTOMATIC = {"@": "all", "<": "", "^": "", "+": "", "?": "", "*": "", "|": "", "%": ""}


def _make_expand(line: str, env: Env) -> str:
    """make's expansion of a recipe line of the rule ``all:``; ValueError where a value is not known."""
    out: list[str] = []
    i = 0
    while i < len(line):
        c = line[i]
        if c != "$":
            out.append(c)
            i += 1
            continue
        nxt = line[i + 1:i + 2]
        if nxt == "$":
            out.append("$")
        elif nxt in _AUTOMATIC:
            out.append(_AUTOMATIC[nxt])
        elif nxt in ("(", "{"):
            raise ValueError("$(...) or ${...} in a recipe is a make variable or function: its value is make's")
        elif re.fullmatch(r"[A-Za-z0-9_]", nxt):
            if env is None:
                raise ValueError(f"${nxt} is make's variable {nxt}: the environment is not known")
            out.append(env.get(nxt, ""))
        else:
            raise ValueError(f"'${nxt}' in a recipe (make's reading of it is not modelled)")
        i += 2
    return "".join(out)


_KEY = re.compile(r"(?i)\A(?:[CMS]-|\^)*(?:Enter|Escape|Space|Tab|BTab|BSpace|Up|Down|Left|Right|Home|End|IC|DC|"
                  r"Insert|Delete|PageUp|PgUp|PageDown|PgDn|PPage|NPage|F[0-9]{1,2}|KP\w+|Any|\S)\Z")


def _tmux(command: str, t: Any, env: Env) -> Outcome:
    if t.safe:
        return exact(command)
    if _KEY.match(command) or command.strip() == "":
        return unknown("tmux send-keys reads this argument as a key name")
    for pattern, why in ((r";\s*\Z", "a trailing ; ends the tmux command: nothing is typed"),
                         (r"\A-", "tmux reads a leading - as its options"),
                         ("!", "the interactive bash expands ! (history expansion)"),
                         ("[\x00-\x1f\x7f]", "a control character, tab or newline is a key to readline"),
                         (r"\\\Z", "a trailing backslash continues the line at the PS2 prompt")):
        if re.search(pattern, command):
            return unknown(why)
    if len(command.encode("utf-8", "surrogateescape")) > 8000:
        return unknown("longer than one tmux message can surely carry")
    try:
        Scanner(command, syntax_only=True).commands()
    except ParseError as e:
        if "never closes" in e.why or "needs a command after it" in e.why:
            return exact(command, split=True)  # bash waits at its continuation prompt: R never runs
        return unknown(f"the pane's bash reports a syntax error: {e.why}")
    except Unknown as e:
        return unknown(f"whether the pane's bash reads R as complete: {e.why}")
    return exact(command)


def _shell_quote_eval(command: str, t: Any, env: Env) -> Outcome:
    program = t.handed_on(command)
    if program is None:
        return unknown("with a |, shell-quote's parse and rebuild (node) decide the text")
    return _raw(program, t, env)


def _as_is(command: str, t: Any, env: Env) -> Outcome:
    return exact(command)


def _codex(command: str, t: Any, env: Env) -> Outcome:
    if re.search(r"(?:^|[\s;&|(])rm\s", command):
        return unknown("Codex CLI may refuse an rm by its own rules")
    return exact(command)


def _claude_code(command: str, t: Any, env: Env) -> Outcome:
    if re.search(r"\\u[0-9A-Fa-f]{4}", command):
        return unknown("Claude Code decodes a \\uXXXX escape in the command before it quotes it for its eval",
                       damaged=True)
    if not command.strip():
        return unknown("a blank command: the harness decides whether to run it")
    return exact(command)  # quoted for its eval and dequoted by bash: whole (docs/harnesses.md)


def _openai_agents(command: str, t: Any, env: Env) -> Outcome:
    if not command.strip():
        return unknown("a blank command: the Agents SDK starts no shell for it")
    if command.startswith("/"):
        return unknown("the Agents SDK makes a program that starts with the workspace path relative")
    return exact(command)


def _not_static(why: str) -> Predictor:
    def predictor(command: str, t: Any, env: Env) -> Outcome:
        return unknown(why)
    return predictor


PREDICTORS: dict[str, Predictor] = {
    "raw": _raw,
    "tempscript": _tempscript,
    "nested": _inner_shell,
    "nested-single": _inner_shell,
    "escaped": _inner_shell,
    "ssh": _ssh,
    "ssh-safe": _ssh,
    "docker-sh": _docker_sh,
    "docker-sh-safe": _docker_sh,
    "shlex-sh": _shlex_sh,
    "shlex-sh-safe": _shlex_sh,
    "make": _make,
    "make-safe": _make,
    "gha-run": _gha,
    "gha-run-safe": _gha,
    "gha-block": _gha,
    "gha-block-safe": _gha,
    "tmux": _tmux,
    "tmux-safe": _tmux,
    "shell-quote-eval": _shell_quote_eval,
    "shell-quote-eval-safe": _shell_quote_eval,
    "mini-swe-agent": _as_is,
    "codex": _codex,
    "claude-code": _claude_code,
    "gemini-cli": _not_static("Gemini CLI strips, trims and refuses commands by rules of its release"),
    "openai-agents": _openai_agents,
}
"""Terminal route base name (without ``@shell``) -> predictor."""


def predict_terminal(base: str, command: str, t: Any, env: Env) -> Outcome:
    if (why := check_command(command)) is not None:
        return refused(why)
    if base.startswith("template:"):
        return unknown("a user's template: its outer text is not modelled")
    predictor = PREDICTORS.get(base)
    if predictor is None:
        return unknown(f"no static model of the route {base!r}")
    return predictor(command, t, env)
