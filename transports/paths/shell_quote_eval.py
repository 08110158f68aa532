"""`shell-quote-eval`: an agent harness re-tokenises R with the npm ``shell-quote`` library, rebuilds
it, and hands the rebuilt string to ``bash -c`` (its ``eval``).

The route (Claude Code's Bash tool; trackers anthropics/claude-code #7387, #32879, #32487)
    When the command contains a pipe, the harness takes its "pipe-aware" path: it tokenises R
    with ``shell-quote``'s ``parse(R, env)`` and rebuilds a string from the tokens, which bash then
    evaluates. Without a pipe it hands R on as one unit (exact). What ``parse`` does to the text:

    * ``$VAR``, ``${VAR}``, ``$$``, ``$1`` are expanded by parse itself against ``env``, the
      harness's environment, not the shell's: a variable R sets (``D=/x && rm -rf ${D}/*``)
      becomes ``''`` (#7387: this ran ``rm -rf /*``); ``$$`` is lost (#32879);
    * quotes are removed; each string token is re-quoted on its own, so ``"$HOME/a b"`` survives
      only as the already-expanded text, and ``{`` ``}`` become quoted words (#32879: a brace group
      is "{: command not found");
    * operators come back as objects (``{op: '|'}``, ``{op: '&&'}``, ``{op: '<'}``...): ``<<`` is
      two ``<`` (#32879: ``bash < < MY-MARKER``), newlines are plain whitespace, so lines merge;
    * an unquoted ``*`` or ``?`` makes the token a glob object ``{op: 'glob', pattern}``;
    * ``#`` starts a comment object that holds the rest of the whole string, newlines included.

The rebuild used here (the harness's, as the trackers describe it; its source is not public)
    string token: bare when it consists only of ``[A-Za-z0-9_./=:,+@%-]`` (so ``CLEAN_DIR=/x``
    stays an assignment, as in #7387's executed text), else single-quoted on its own (#32487: "re-escapes
    each token individually with single quotes"); ``''`` for the empty string. A digit string right
    before a redirection operator is glued to it (``2>&1``: the fix shipped for #4711). Operator:
    its text. Glob: its pattern, bare. Comment: ``#`` and its text. Tokens are joined by one space.
    The harness also redirects stdin from ``/dev/null``; that is left out (stdin is ``/dev/null``
    in the sandbox already).

Where the parse runs
    Real node with the real ``shell-quote`` (pinned, :data:`VERSION`), inside the sandbox
    (``sandbox.run``; the package's directory bound read-only), with R on stdin and the
    sandbox's scrubbed environment as ``process.env``, the ``env`` handed to ``parse``: never the
    harness's own, which holds API keys. Variables a shell sets itself (``PWD``, ``SHLVL``) are
    not in it. A command with no ``|`` character cannot yield a pipe operator, so node is not
    started for it (the route then hands R on unchanged). The final execution's ``exec_ms``
    includes node's run.

``received`` is the string handed to ``bash -c``.

The fix, ``shell-quote-eval-safe``: do not re-tokenise; hand R to ``bash -c`` as it is. (Quoting R
once for an ``eval`` is equivalent only with a correct quoter: shell-quote's own ``quote`` turns
``!`` into ``\\!`` inside double quotes, which a non-interactive bash keeps; see docs/paths.md.)
"""

from __future__ import annotations

import json

import anyio

from ..base import Delivery, check_command, run_program
from ..components import NODE, NPM, Component
from ..sandbox import Sandbox
from ..shells import DEFAULT, Shell
from .npm_cache import MissingComponent, node_program, package_dir
from .route import Route

PACKAGE = "shell-quote"
VERSION = "1.8.3"
"""The release current when the tracker reports were filed (March 2026)."""
SHELL_QUOTE = Component(PACKAGE, "npm", PACKAGE, version=VERSION,
                        note="the library the route re-tokenises with, pinned")

REBUILD_JS = r"""
const sq = require(process.argv[1] + '/node_modules/shell-quote');
const chunks = [];
process.stdin.on('data', (c) => chunks.push(c));
process.stdin.on('end', () => {
  const command = Buffer.concat(chunks).toString('utf8');
  let tokens;
  try {
    tokens = sq.parse(command, process.env);
  } catch (e) {
    process.stderr.write(String(e && e.message || e).split('\n')[0]);
    process.exit(3);
  }
  const piped = tokens.some((t) => typeof t === 'object' && t !== null && t.op === '|');
  if (!piped) { process.stdout.write(JSON.stringify({piped: false})); return; }
  const bare = /^[A-Za-z0-9_.\/=:,+@%-]+$/;
  const redirect = /^(>|>>|>&|<|<&)$/;
  const word = (s) => s === '' ? "''" : (bare.test(s) ? s : "'" + s.replace(/'/g, "'\\''") + "'");
  const parts = [];
  tokens.forEach((t, i) => {
    let text;
    if (typeof t === 'string') text = word(t);
    else if ('comment' in t) text = '#' + t.comment;
    else if (t.op === 'glob') text = t.pattern;
    else text = t.op;
    const prev = tokens[i - 1];
    if (typeof prev === 'string' && /^[0-9]+$/.test(prev) && typeof t === 'object' && redirect.test(t.op || '')) {
      parts[parts.length - 1] += text;
    } else {
      parts.push(text);
    }
  });
  process.stdout.write(JSON.stringify({piped: true, program: parts.join(' ')}));
});
"""


def pipe_aware(command: str) -> bool:
    """Whether the harness takes its pipe-aware path (re-tokenises R): only a ``|`` character can make a
    pipe operator, so without one node is never started and R is handed on unchanged."""
    return "|" in command


class ShellQuoteEval(Route):
    source = ("anthropics/claude-code #7387 (${VAR} expanded by shell-quote when a pipe is present; ran rm -rf /*), "
              "#32879 (brace groups, heredoc markers, $$ mangled), #32487 (tokens re-quoted one by one)")
    component = f"node + npm shell-quote@{VERSION} parse() and the harness's rebuild, then bash -c"
    route_needs = (NODE, SHELL_QUOTE, NPM)
    fix_needs = ()  # the fix never re-tokenises: bash alone

    def __init__(self, safe: bool = False, shell: Shell = DEFAULT) -> None:
        super().__init__("shell-quote-eval", safe, shell,
                         fix=("handed to bash -c unchanged, never re-tokenised (the fix)"),
                         boundary=("with a pipe: tokenised by shell-quote parse(R, env) ($VAR expanded against the harness env, "
                         "quotes and newlines dropped), tokens re-quoted and joined, then bash -c"))

    async def rebuild(self, command: str, sandbox: Sandbox) -> tuple[str | None, float, str | None]:
        """(program handed to bash -c, node's ms, transport error): shell-quote run inside the sandbox.
        MissingComponent when node or the package cannot be had."""
        if not pipe_aware(command):
            return command, 0.0, None
        node = node_program()  # MissingComponent: a harness error (deliver)
        prefix = await anyio.to_thread.run_sync(package_dir, PACKAGE, VERSION)  # npm install on first use
        inside = sandbox.mount_point(prefix, "qb-npm")
        ran = await sandbox.run([node, "-e", REBUILD_JS, inside], binds=((prefix, inside),),
                                stdin=command.encode("utf-8"))
        if ran.exit_code == 3:
            return None, ran.exec_ms, f"{self.name}: shell-quote parse: {ran.stderr.text.strip()[:200]}"
        if ran.exit_code != 0 or ran.stdout.truncated:
            why = "its output passed the output cap" if ran.stdout.truncated else (
                f"exit {ran.exit_code}: {(ran.stderr.text.strip().splitlines() or [''])[-1][:200]}")
            return None, ran.exec_ms, f"{self.name}: node failed ({why})"
        try:
            answer = json.loads(ran.stdout.text)
        except ValueError:
            return None, ran.exec_ms, f"{self.name}: node's answer is not JSON"
        return (answer["program"] if answer.get("piped") else command), ran.exec_ms, None

    def handed_on(self, command: str) -> str | None:
        """The program the harness hands its shell when that is known without running shell-quote: R
        itself, for the fix and for an R without ``|`` (never re-tokenised); None when R goes through
        ``parse`` (node, in the sandbox, with the sandbox's environment: only a run can say)."""
        return command if self.safe or not pipe_aware(command) else None

    def argv(self, program: str) -> list[str]:
        """How the final shell is started on the program handed on (``bash -c PROGRAM``)."""
        return self.shell.argv("-c", program)

    async def deliver(self, command: str, sandbox: Sandbox) -> Delivery:
        if (why := check_command(command)) is not None:
            return Delivery(received=None, execution=None, transport_error=why)
        if self.safe:
            return await run_program(sandbox, self.argv(command), received=command)
        try:
            program, parse_ms, error = await self.rebuild(command, sandbox)
        except MissingComponent as e:  # the machine's, not the route's: never a transport error
            return Delivery(received=None, execution=None, harness_error=f"{self.name}: {e}")
        if program is None:
            return Delivery(received=None, execution=None, transport_error=error)
        delivery = await run_program(sandbox, self.argv(program), received=program)
        if delivery.execution is not None:
            delivery.execution.exec_ms += parse_ms  # the route's cost includes the parse
        return delivery
