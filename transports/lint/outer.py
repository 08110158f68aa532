"""Routes whose damage is one shell's parse of a text holding R: ``bash -c "R"`` (``nested``, ``escaped``,
``nested-single``, ``docker-sh``) and ``ssh qb-remote "R"`` (``ssh``), as the outer bash reads it.

The outer text is scanned by :mod:`.bashparse`. What the final shell gets follows the capture rules of
:mod:`transports.capture` (docs/spec.md, Received):

* the text is one simple command: bash execs it in place and its ``-c`` program (or, for ssh, its words
  after the host joined with spaces, OpenSSH's request) is ``received``;
* the text holds several commands (the paste split R): the record is ``split``, so damaged; ``received`` is
  the first command's program when that command runs first and nothing after it can exec a final shell in
  the outer program's place (every later command is a builtin or a program known not to exec another);
* a syntax error on the first line: bash runs nothing of it, ``received`` is None;
* a construct whose result needs a run (:class:`.bashparse.Unknown`): ``received`` is unknown, and the
  record is surely damaged when the construct itself changes the text (an expansion, a quote that the
  paste closed); it never is left unchanged by a run.
"""

from __future__ import annotations

from collections.abc import Mapping

from .bashparse import Command, ParseError, Scanner, Unknown
from .model import Outcome, exact, refused, unknown

ARG_MAX = 131072
"""The kernel's limit on one argument (MAX_ARG_STRLEN, with its NUL): a longer outer text never starts."""
INERT = frozenset((
    "echo printf true false : cd export wait test [ set shift unset read exit return local declare typeset "
    "readonly let umask cat tr touch ls mkdir rmdir rm cp mv head tail wc sort uniq cut grep sed date ln chmod "
    "mktemp sleep basename dirname pwd tee").split())
"""Commands that never exec another program in their own process: a split paste's later commands must be
these for the first command's program to be the one the kernel reports (a later ``env bash``, a script run
by its ``#!`` line or ``exec`` could take the outer program's pid)."""
SSH_HOST = "qb-remote"


def too_long(text: str) -> str | None:
    if len(text) * 4 >= ARG_MAX and len(text.encode("utf-8", "surrogateescape")) >= ARG_MAX:
        return "the program is longer than the kernel allows for one argument (131072 bytes); nothing ran"
    return None


def program_of(words: list[str]) -> str | None:
    """``received_from`` on words (the capture module's reading of a shell's options). ``SHELL -c PROG ...``
    with neither word an option is PROG in that reading, and is read so here without the bytes round trip."""
    if len(words) >= 3 and words[1] == "-c" and words[0][:1] not in ("-", "+") and words[2][:1] not in ("-", "+"):
        return words[2]
    from ..capture import received_from

    return received_from([w.encode("utf-8", "surrogateescape") for w in words])


def request_of(words: list[str]) -> Outcome:
    """OpenSSH's exec request for ``ssh qb-remote WORDS...``: the words after the host joined by spaces."""
    after = words[2:] if len(words) >= 2 and words[1] == SSH_HOST else None
    if after is None:
        return unknown("the paste changed ssh's destination word", damaged=True)
    if after[:1] == ["--"]:  # ssh reads options again after the host, up to a "--"
        after = after[1:]
    elif after and after[0].startswith("-") and after[0] != "-":
        return unknown("a word after the host starting with '-' is read by ssh as its own option")
    if not after or "".join(after) == "":
        return unknown("ssh with no command opens a shell session: no exec request", damaged=True)
    return exact(" ".join(after))


def predict(text: str, env: Mapping[str, str] | None, ssh: bool = False) -> Outcome:
    """What the final shell receives when the outer bash runs ``text`` (the route's outer program)."""
    if (why := too_long(text)) is not None:
        return refused(why)
    scanner = Scanner(text, env)
    commands: list[Command] = []
    newline_seen = False
    try:
        while True:
            scanner.skip_blanks_and_comment()
            if scanner.i >= len(scanner.s):
                break
            commands.append(scanner.command())
            if commands[-1].end == "\n":
                newline_seen = True
            if commands[-1].end == "" or len(commands) > 64:
                break
    except ParseError as e:
        if not newline_seen:  # bash reads a whole line before it runs any of it
            return exact(None)
        return _split(commands, e.why)
    except Unknown as e:
        if not commands:
            return unknown(e.why, damaged=True)
        return _split(commands, e.why)
    if not commands:
        return exact(None)
    if len(commands) > 64:
        return unknown("more commands than the lint follows", damaged=True, split=True)
    first = commands[0]
    if first.redirections or first.assignments:
        return unknown("the paste gave the outer command a redirection of its own, which may fail", damaged=True,
                       split=len(commands) > 1)
    if len(commands) == 1:
        return request_of(first.words) if ssh else exact(program_of(first.words))
    return _split(commands, None)


def _split(commands: list[Command], stopped: str | None) -> Outcome:
    """Several commands: damaged; the first one's program where nothing later can take its place."""
    first = commands[0]
    if stopped is not None:
        return unknown(f"the paste split R; then {stopped}", damaged=True, split=True)
    if first.redirections or first.assignments:
        return unknown("the paste split R and gave its first command a redirection", damaged=True, split=True)
    for later in commands[1:]:
        name = later.words[0] if later.words else None
        if name is not None and name not in INERT:
            return unknown(f"the paste split R; a later command ({name[:40]!r}) could start a shell in the outer "
                           "program's place", damaged=True, split=True)
    return Outcome(received=program_of(first.words), split=True)


def predict_ssh(text: str, env: Mapping[str, str] | None) -> Outcome:
    """The ssh route: the local bash parses ``ssh qb-remote "R"``; received is the request."""
    out = predict(text, env, ssh=True)
    if out.split and out.known and out.received is not None:
        return unknown("the paste split R: which ssh session the server sees first is the client's race",
                       damaged=True, split=True)
    return out
