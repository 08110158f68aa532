"""Each route's documented behaviour for what R holds: a trigger (the spans of R that fire it), the class of
character, and the rule in words. ``quotebench exec`` prints these texts under ``rule`` and ``lint`` under
each hazard, so both read one table. The texts restate the module docstrings of the transports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    routes: tuple[str, ...]   # base names (no -safe, no @shell, no middleware)
    pattern: re.Pattern[str]  # each match is one span of R the route reinterprets
    kind: str                 # the character class
    text: str
    chars: str = ""           # when the trigger is one character of these (the pattern is their class)

    def applies(self, command: str) -> bool:
        return self.pattern.search(command) is not None

    def spans(self, command: str, limit: int = 200) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for m in self.pattern.finditer(command):
            out.append((m.start(), m.end()))
            if len(out) >= limit:
                break
        return out


def _r(routes: tuple[str, ...], pattern: str, kind: str, text: str) -> Rule:
    return Rule(routes, re.compile(pattern), kind, text)


def _c(routes: tuple[str, ...], chars: str, kind: str, text: str) -> Rule:
    """A rule whose trigger is a single character of ``chars`` (its pattern is made from them, so the lint can
    find several such rules' spans in one pass)."""
    return Rule(routes, re.compile("[" + re.escape(chars) + "]"), kind, text, chars)


DQ = ("nested", "docker-sh", "ssh")
RULES: tuple[Rule, ...] = (
    _c(DQ, '"', "double quote", 'an unescaped " in R ends the outer double quotes: what follows is parsed by the '
       "outer shell as separate words"),
    _c(DQ, "$", "dollar", "$ stays active inside double quotes: the outer shell expands $VAR and $(...) before "
       "the final shell sees R"),
    _c(DQ, "`", "backtick", "backticks stay active inside double quotes: the outer shell runs them"),
    _c(DQ, "\\", "backslash", 'inside double quotes \\ escapes $ ` " \\ and newline: the outer shell removes '
       "those backslashes"),
    _c(("nested-single",), "'", "single quote", "any ' in R ends the outer single quotes"),
    _r(("shlex-sh",), r'"|\\', "double quote or backslash", 'shlex.split honours only \\" and \\\\ inside double '
       'quotes; an unescaped " ends them'),
    _r(("tmux",), r";\s*\Z", "trailing semicolon", "tmux: an argument ending in ; ends the tmux command (tmux "
       "#1849, #4350): Enter becomes a command of its own and nothing is typed"),
    _r(("tmux",), "!", "bang", "the interactive bash expands ! (history expansion) before it runs the line"),
    _r(("tmux",), "\t", "tab", "a tab typed into readline asks for completion, it is not inserted"),
    _r(("tmux",), r"\n(?!\n*\Z)", "newline", "each line is typed on its own: a multi-line R goes through the "
       "continuation prompt (PS2), a line that reads stdin reads the lines typed after it"),
    _r(("tmux",), r"\A-", "leading dash", "tmux reads an argument starting with - as its own options"),
    _r(("tmux",), "[\x00-\x08\x0b-\x1f\x7f]", "control character", "readline reads a control character as an "
       "editing key, it is not inserted"),
    _r(("make",), r"\$", "dollar", "make expands $ itself ($HOME is $H then OME; $$ is one $)"),
    _r(("make",), "\n", "newline", "a newline ends the recipe line: each line runs in its own sh -c, or is read "
       "as makefile syntax"),
    _r(("make",), r"\A[ \t@+-]+", "leading blank or @ - +", "make strips leading blanks and @ - + from a recipe "
       "line"),
    _r(("make",), r"\\\Z", "trailing backslash", "a backslash at the end of a recipe line continues it onto the "
       "next makefile line"),
    _r(("gha-run",), r": | #|\A[*&!{\[|>'\"%@]", "yaml syntax", "in a plain YAML scalar ': ' and ' #' and a "
       "leading *&!{[|>'\"%@ are YAML syntax"),
    _r(("gha-run",), "\n", "newline", "a plain scalar folds an indented next line into the first with a space; one "
       "at column 0 ends the step"),
    _r(("gha-block",), r"(?<!\n)\Z|\n\n+\Z", "trailing newline", "a | block scalar clips: the script ends in "
       "exactly one newline"),
    _r(("gha-block",), r"\A ", "leading blank", "a first line starting with a blank changes the block's "
       "indentation"),
    _r(("gha-run", "gha-block"), r"\$\{\{", "expression", "${{ }} is substituted by the runner before the script "
       "is written"),
    _r(("shell-quote-eval",), r"\|", "pipe", "with a pipe, shell-quote re-tokenises R: $VAR is expanded against "
       "the harness's environment, quotes and newlines are dropped, each token is re-quoted"),
    _c(("json-naive",), '"\\' + "".join(map(chr, range(32))), "json escape", 'pasted into {"command": "R"}: a " ends the JSON '
       "string, a \\ starts a JSON escape, a raw control character is refused by the strict parser"),
)


def base_parts(name: str) -> list[str]:
    """A transport name's unsafe layers, outermost first, each without ``@shell`` (a ``-safe`` layer has no
    rule)."""
    return [p.split("@")[0] for p in name.split("+") if not p.split("@")[0].endswith("-safe")]


def rules_for(name: str, command: str) -> list[Rule]:
    """The rules of ``name``'s unsafe layers whose trigger is in ``command``."""
    unsafe = set(base_parts(name))
    return [r for r in RULES if unsafe & set(r.routes) and r.applies(command)]
