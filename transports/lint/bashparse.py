"""A static model of how bash parses one program text, as far as it can be known without running it.

A lint must say what the *outer* shell of a route (``bash -c "R"``, ``ssh host "R"``, ``sh -c "R"`` on the
host) hands its first command, and whether the text held more than that one command. This module reads the
text as bash 5 does, command by command, and gives each simple command's words after expansion, quote
removal and field splitting, or stops with :class:`Unknown` at the first construct whose result depends on
something the text does not hold:

* code the parse would run (``$(...)``, backticks, ``<(...)``): the words hold its output;
* the file system (pathname expansion of unquoted ``*``, ``?``, ``[``; a redirection that may fail);
* values the text does not fix: a variable of bash's own (``$RANDOM``, ``$$``, ``$PPID``), any variable when
  no environment is given, the arithmetic of ``$((...))``, parameter operators (``${x:-d}``);
* grammar this model does not follow (compound commands, here-documents, brace expansion, ``$"..."``).

It never guesses: a word is either the exact text bash would produce or the scan stops. Nothing here runs a
process; the proof that the model is bash's parse is the execution oracle (tests/test_lint_oracle.py), which
compares every prediction with the traced ``received`` of the real route.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from .ansic import ansi_c
from .unknown import ParseError, Unknown

BLANKS = " \t"
OPERATOR_CHARS = ";&|<>()\n"
CONTINUED = ("&&", "||", "|", "|&")
"""Operators after which bash reads on for another command: at the end of the text, a syntax error."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_FIRST_WORD = re.compile(r"[^\s;&|<>()]+")
_FD = re.compile(r"\d+(?=[<>])")
_FD_OPERATOR = re.compile(r"\d+(>>|>\||<>|>&|<&|<<|>|<)")
_BRACE = re.compile(r"\{[^\s{}]*(,|\.\.)[^\s{}]*\}")
_IFS_SPLIT = re.compile(r"([ \t\n]+)")
_PLAIN = r"[^ \t;&|<>()\n\\'\"`$*?\[~{]"
"""A character that is itself in an unquoted word (not a blank, operator, quote, escape, expansion, pattern,
tilde or brace)."""
_DQ_RUN = r'[^"\\`$]*(?:\\[\s\S][^"\\`$]*)*'
"""Inside double quotes, characters that are themselves and backslash pairs, as one unrolled loop (a class run
between pairs, so the regex engine takes a long string in tight steps, not one alternation per character)."""
_SIMPLE_WORD = re.compile(rf"""(?:{_PLAIN}+|'[^']*'|\\[^\n]|"{_DQ_RUN}")+""")
"""A word of pieces that expand to themselves (a literal run, a single-quoted string, a backslash pair, a
double-quoted string without ``$`` or a backtick): each such stretch of a word is read in one match."""
_PIECE = re.compile(rf"""({_PLAIN}+)|'([^']*)'|\\([^\n])|"({_DQ_RUN})["]""")
_BLANK_RUN = re.compile(r"(?:[ \t]|\\\n)*")
_DQ_BODY = re.compile(_DQ_RUN)
"""Inside double quotes, a run of characters that are themselves and of backslash pairs (the scan's unit, so
a long string costs one match, not one step per character)."""
_DQ_ESCAPE = re.compile(r'\\(?:([$`"\\])|\n)')
"""The pairs whose backslash bash removes inside double quotes (a backslash-newline goes whole): split on
it, the captured characters kept, the newlines' None dropped."""
BASH_OWN = frozenset((
    "BASH BASHOPTS BASHPID BASH_ALIASES BASH_ARGC BASH_ARGV BASH_ARGV0 BASH_CMDS BASH_COMMAND "
    "BASH_EXECUTION_STRING BASH_LINENO BASH_LOADABLES_PATH BASH_REMATCH BASH_SOURCE BASH_SUBSHELL "
    "BASH_VERSINFO BASH_VERSION COLUMNS COMP_CWORD COMP_KEY COMP_LINE COMP_POINT COMP_TYPE COMP_WORDBREAKS "
    "COMP_WORDS DIRSTACK EPOCHREALTIME EPOCHSECONDS EUID FUNCNAME GROUPS HISTCMD HISTFILE HISTFILESIZE "
    "HISTSIZE HOSTNAME HOSTTYPE IFS LINENO LINES MACHTYPE MAILCHECK OLDPWD OPTARG OPTERR OPTIND OSTYPE "
    "PIPESTATUS PPID PS1 PS2 PS4 PWD RANDOM READLINE_ARGUMENT READLINE_LINE READLINE_MARK READLINE_POINT "
    "REPLY SECONDS SHELLOPTS SHLVL SRANDOM UID").split())
"""Variables bash sets for itself whatever its environment holds: their value is not the text's to fix."""
RESERVED = frozenset("! [[ ]] { } case coproc do done elif else esac fi for function if in select then time "
                     "until while".split())


@dataclass
class Command:
    """One simple command as bash executes it: its fields, its redirections' operators, and what ended it
    (``""`` at the end of the text, else the operator: ``;`` ``&`` ``|`` ``&&`` ``||`` ``|&`` or a newline)."""

    words: list[str] = field(default_factory=list)
    redirections: list[str] = field(default_factory=list)
    assignments: list[str] = field(default_factory=list)
    end: str = ""
    start: int = 0


class _Word:
    """One word under construction: its finished fields, the pieces of the field being built (lists, so a
    long word costs linear time), whether that field exists yet, and the word as written less its quotes."""

    __slots__ = ("fields", "cur", "real", "plain")

    def __init__(self) -> None:
        self.fields: list[str] = []
        self.cur: list[str] = []
        self.real = False  # the field under construction exists (a quoted empty string makes one)
        self.plain: list[str] = []

    def add(self, text: str) -> None:
        self.cur.append(text)
        self.real = True

    def text(self) -> str:
        return "".join(self.cur)

    def split_in(self, value: str) -> None:
        """An unquoted expansion's value: split on default IFS white space (the outer shell's IFS is bash's
        default, never inherited)."""
        for piece in _IFS_SPLIT.split(value):
            if not piece:
                continue
            if piece[0] in " \t\n":
                if self.real:
                    self.fields.append(self.text())
                self.cur, self.real = [], False
            else:
                self.add(piece)

    def done(self) -> list[str]:
        if self.real:
            self.fields.append(self.text())
        return [f if f.isascii() else _normal(f) for f in self.fields]


def _normal(text: str) -> str:
    """Bytes made by ``\\xHH`` escapes are carried as surrogate escapes; join them as the kernel's argv is read."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")


class Scanner:
    """Reads ``text`` command by command (see the module docstring). ``env``: the outer shell's whole
    environment, or None when it is not known (then every ``$NAME`` is unknown)."""

    def __init__(self, text: str, env: Mapping[str, str] | None = None, *, syntax_only: bool = False) -> None:
        self.s = text
        self.i = 0
        self.env = env
        self.syntax_only = syntax_only  # values and the file system do not matter: only where commands end

    # -- the command level -------------------------------------------------------------------------------
    def commands(self, limit: int = 64) -> list[Command]:
        """Every command up to the end of the text (at most ``limit``); raises :class:`Unknown`."""
        out: list[Command] = []
        while len(out) < limit:
            self.skip_blanks_and_comment()
            if self.i >= len(self.s):
                break
            out.append(self.command())
            if out[-1].end == "":
                break
        else:
            raise Unknown("more commands than the model follows", self.i)
        if out and out[-1].end in CONTINUED:
            raise ParseError(f"the text ends in '{out[-1].end}', which needs a command after it (a syntax error)",
                             self.i)
        return out

    def command(self) -> Command:
        """The next simple command and the operator that ends it."""
        cmd = Command(start=self.i)
        s = self.s
        while True:
            self.i = _BLANK_RUN.match(s, self.i).end()  # type: ignore[union-attr]  # matches the empty text
            if self.i >= len(s):
                return cmd
            c = s[self.i]
            if c == "#":
                self.skip_blanks_and_comment()
                continue
            if c == "\\" and self.s.startswith("\\\n", self.i):
                self.i += 2
                continue
            if c in OPERATOR_CHARS or (c.isdigit() and self._fd_redirection()):
                op = self._operator()
                if op in ("<", ">", ">>", ">|", "&>", "&>>", "<>", ">&", "<&") or op[:1].isdigit():
                    self._redirection(cmd, op)
                    continue
                if op in ("(", ")", "<<", "<<-", "<<<", ";;", ";&", ";;&"):
                    raise Unknown(f"'{op}' (grammar this lint does not model)", self.i - len(op))
                if not cmd.words and not cmd.assignments:
                    raise ParseError(f"an empty command before '{op}' (a syntax error)", self.i - len(op))
                cmd.end = op
                return cmd
            start = self.i
            if not cmd.words and not cmd.assignments and self._reserved_here():
                raise Unknown("a compound command (grammar this lint does not model)", start)
            assignment = not cmd.words and _ASSIGNMENT.match(self.s, start) is not None
            word = self.word()
            if assignment:
                cmd.assignments.append("".join(word.plain))
            else:
                cmd.words.extend(word.done())

    def _reserved_here(self) -> bool:
        m = _FIRST_WORD.match(self.s, self.i)
        return m is not None and (m.group(0) in RESERVED or m.group(0).startswith(("{", "((", "[[")))

    def _fd_redirection(self) -> bool:
        m = _FD.match(self.s, self.i)
        return m is not None

    def _operator(self) -> str:
        for op in ("&>>", ";;&", "<<<", "<<-", "&&", "||", "|&", ";;", ";&", ">>", ">|", "&>", "<>", ">&", "<&",
                   "<<", ";", "&", "|", "<", ">", "(", ")", "\n"):
            if self.s.startswith(op, self.i):
                if op in ("<", ">") and self.s.startswith("(", self.i + 1):
                    raise Unknown(f"'{op}(...)' (process substitution runs code)", self.i)
                self.i += len(op)
                return op
        m = _FD_OPERATOR.match(self.s, self.i)
        assert m is not None
        self.i = m.end()
        return m.group(0)

    def _redirection(self, cmd: Command, op: str) -> None:
        if op.endswith("<<") or op.endswith("<<-"):
            raise Unknown("a here-document (grammar this lint does not model)", self.i)
        self._skip_blanks()
        if self.i >= len(self.s) or self.s[self.i] in OPERATOR_CHARS:
            raise ParseError(f"'{op}' with no target (a syntax error)", self.i)
        target = self.word().done()
        if len(target) != 1:
            raise Unknown(f"'{op}' to a word that expands to {len(target)} words", self.i)
        cmd.redirections.append(op + target[0])

    def _skip_blanks(self) -> None:
        self.i = _BLANK_RUN.match(self.s, self.i).end()  # type: ignore[union-attr]  # matches the empty text

    def skip_blanks_and_comment(self) -> None:
        self._skip_blanks()
        if self.s.startswith("#", self.i):
            end = self.s.find("\n", self.i)
            self.i = len(self.s) if end < 0 else end

    # -- the word level ----------------------------------------------------------------------------------
    def word(self) -> _Word:
        """One word, from here to the next unquoted blank or operator."""
        w = _Word()
        s = self.s
        first = self.i
        while self.i < len(s):
            m = _SIMPLE_WORD.match(s, self.i)
            if m is not None:  # pieces that expand to themselves, taken in one match
                text = "".join([a or b or c or ("".join(filter(None, _DQ_ESCAPE.split(d))) if "\\" in d else d)
                                for a, b, c, d in _PIECE.findall(m.group(0))])
                w.add(text)
                w.plain.append(text)
                self.i = m.end()
                continue
            c = s[self.i]
            if c in BLANKS or c in OPERATOR_CHARS:
                break
            if c == "\\":
                if self.i + 1 >= len(s):
                    w.add("\\")  # a backslash at the very end is kept
                    w.plain.append("\\")
                    self.i += 1
                elif s[self.i + 1] == "\n":
                    self.i += 2
                else:
                    w.add(s[self.i + 1])
                    w.plain.append(s[self.i + 1])
                    self.i += 2
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end < 0:
                    raise ParseError("a single quote that never closes (a syntax error: nothing runs)", self.i)
                w.add(s[self.i + 1:end])
                w.plain.append(s[self.i + 1:end])
                self.i = end + 1
            elif c == '"':
                text = self._double_quoted()
                w.add(text)
                w.plain.append(text)
            elif c == "`":
                raise Unknown("a backtick command substitution (the outer shell runs it)", self.i)
            elif c == "$":
                self._dollar(w, quoted=False)
            elif c in "*?[" and not self.syntax_only:
                raise Unknown(f"an unquoted '{c}' (pathname expansion depends on the working directory)", self.i)
            elif c == "~" and (self.i == first or s[self.i - 1] in "=:") and not self.syntax_only:
                raise Unknown("an unquoted '~' (tilde expansion)", self.i)
            elif c == "{" and not self.syntax_only and _BRACE.match(s, self.i):
                raise Unknown("an unquoted brace expansion", self.i)
            else:  # a pattern, tilde or brace character where it is literal
                w.add(c)
                w.plain.append(c)
                self.i += 1
        return w

    def _double_quoted(self) -> str:
        """From an opening ``"`` to its close; the text after quote removal. A run of plain characters and
        backslash pairs is taken in one match, its escapes removed in one substitution (a left-to-right scan
        pairs each backslash with the character after it, as bash does)."""
        s = self.s
        start = self.i
        self.i += 1
        out: list[str] = []
        while self.i < len(s):
            m = _DQ_BODY.match(s, self.i)
            if m.end() > self.i:
                run = m.group(0)
                out.append("".join(filter(None, _DQ_ESCAPE.split(run))) if "\\" in run else run)
                self.i = m.end()
                continue
            c = s[self.i]
            if c == '"':
                self.i += 1
                return "".join(out)
            if c == "`":
                raise Unknown("a backtick inside double quotes (the outer shell runs it)", self.i)
            if c == "$":
                w = _Word()
                self._dollar(w, quoted=True)
                out.append(w.text())
            else:  # a backslash that ends the text: the quote never closes
                out.append(c)
                self.i += 1
        raise ParseError("a double quote that never closes (a syntax error: nothing runs)", start)

    def _dollar(self, w: _Word, quoted: bool) -> None:
        s, i = self.s, self.i
        nxt = s[i + 1] if i + 1 < len(s) else ""
        if nxt == "(":
            what = "arithmetic expansion" if s.startswith("((", i + 1) else "command substitution (the outer shell runs it)"
            raise Unknown(f"'$(' {what}", i)
        if nxt == "[":
            raise Unknown("'$[' arithmetic expansion", i)
        if nxt == "'" and not quoted:
            self.i = i + 2
            text = self._ansi_c()
            w.add(text)
            w.plain.append(text)
            return
        if nxt == '"':
            raise Unknown("'$\"' (a locale-translated string)", i)
        if nxt == "{":
            end = s.find("}", i + 2)
            inner = s[i + 2:end] if end >= 0 else ""
            if end < 0 or not (_NAME.fullmatch(inner) or inner.isdigit()):
                raise Unknown("a parameter expansion with an operator", i)
            self.i = end + 1
            self._value(w, inner, quoted, i)
            return
        m = _NAME.match(s, i + 1)
        if m:
            self.i = m.end()
            self._value(w, m.group(0), quoted, i)
            return
        if nxt and nxt in "0123456789@*#?$!-_":
            self.i = i + 2
            self._value(w, nxt, quoted, i)
            return
        w.add("$")  # a $ before anything else is itself
        w.plain.append("$")
        self.i = i + 1

    def _value(self, w: _Word, name: str, quoted: bool, at: int) -> None:
        if self.syntax_only:
            w.add("")
            return
        if name in ("@", "*"):
            raise Unknown(f"'${name}' (its fields depend on how the word is quoted)", at)
        if name in ("$", "!", "-", "_", "0") or name in BASH_OWN:
            raise Unknown(f"'${name}' (a value bash sets at run time)", at)
        if name == "#" or name == "?":
            value = "0"
        elif name.isdigit():
            value = ""  # the outer shell has no positional parameters
        elif self.env is None:
            raise Unknown(f"'${name}' (the outer shell's environment is not known)", at)
        else:
            value = self.env.get(name, "")
        if quoted:
            w.add(value)
        else:
            if any(ch in value for ch in "*?["):
                raise Unknown(f"'${name}' unquoted, whose value holds a pattern character", at)
            w.split_in(value)

    def _ansi_c(self) -> str:
        """The body of ``$'...'`` after its escapes; ``self.i`` is just past the opening quote."""
        text, self.i = ansi_c(self.s, self.i)
        return text
