"""`tmux`: a terminal agent types R into a tmux pane, ``tmux send-keys -t P R Enter``, into an interactive bash.

The route
    Terminal agents (Terminal-Bench's harness, libtmux callers, the harnesses of tmux #1849 and
    #4350) keep an interactive bash in a tmux pane and type each command into it. Here the
    harness calls tmux with the argument vector ``[tmux, send-keys, -t, P, R, Enter]``, as
    libtmux and Terminal-Bench do (no host shell in between, no ``-l``). Three parsers then
    stand between R and what runs:

    * tmux's command parser. An argument ending in ``;`` ends the command (even with ``-l``);
      ``\\;`` at the end becomes ``;``. So ``echo two;`` makes ``Enter`` a command of its own,
      tmux answers ``unknown command: Enter`` and types nothing. Without ``-l`` an argument
      that names a key (``Enter``, ``C-c``, ``Up``) is that key, and one starting with ``-``
      is taken as options. A command line longer than a tmux message (about 16 KiB) is refused
      (``command too long``).
    * readline, in the interactive bash: a tab asks for completion, control characters edit
      the line. What differs from a default bash: readline reads only the harness's init file
      (``INPUTRC``, written by the host, read-only to the command; no ``~/.inputrc``, no
      ``/etc/inputrc``), in which every key bash 5.2 binds by default to a readline command that
      expands the line or runs code (:data:`UNSAFE_READLINE`: ``ESC C-e`` shell-expand-line, ``ESC
      ^`` history-expand-line, ``C-x C-e`` edit-and-execute-command, ``C-x *``, ``C-x g``, ``ESC g``
      glob expansion, ``ESC &`` tilde-expand, ``C-x s``, ``C-x C-v``; ``v`` and ``&`` in vi's command
      keymap) is bound to ``abort``: those keys do nothing (a bell) and are not inserted. Such a
      command would run ``$(...)`` or assign ``$((PS0=0))`` while the line is edited, before the
      line's own ``PS0`` entry. ``TERMINFO`` is the system's ``/lib/terminfo``, so a planted
      ``~/.terminfo`` is not read either.
    * the interactive bash: history expansion of ``!`` is on; a multi-line R arrives line by
      line through the continuation prompt (PS2); a line that reads standard input reads the
      lines typed after it (the terminal is its stdin, not ``/dev/null``).

The component, all real, inside the sandbox
    One driver (a bash script run by ``sandbox.run``, so bwrap's pid namespace and the run's
    cgroup hold the tmux server it starts and everything in the pane) starts a private tmux
    server (``-S`` socket in the run's ``meta/`` directory, ``-f /dev/null``: no user config),
    whose pane runs ``bash --norc --noprofile -i`` on a real pty with the sandbox's environment
    and working directory (``HISTFILE=/dev/null``; history expansion stays on). When the first
    prompt is up and readline has the terminal (``stty -icanon``), the driver sends the keys,
    waits until bash is idle (a prompt with no typed input left: ``read -t 0``, then ``tmux
    wait-for``) or the time is up, captures the pane and kills the server. When bash answered
    fewer prompts than R has lines, the driver waits until bash's log file stops growing for
    50 ms: a line may have been read as data, or a long R may not all be in the pty yet. (That
    file only paces the driver; the host never reads it.)

``received``: what the pane's shell read from its terminal, from the kernel
    The pane's interactive bash is recognised in the exec trace by the file it executes and the
    argv tmux starts it with (it starts before any key is typed); the host's tracer stops it at
    its system calls and copies every byte it ``read(2)``s from fd 0, at the syscall's exit, from
    its memory (:mod:`transports.sandbox.exectrace`). ``received`` is those bytes, less the one Enter the
    harness typed after R: the keys as tmux, the pty and the line discipline delivered them.
    Nothing in the sandbox takes part, so a later line cannot rewrite an earlier line's record.
    A byte that a builtin of the pane's shell (``read``) takes as data was read by the shell too.

``split``: what bash ran, by its own log, copied by the host as it is written
    bash's hooks log what it made of the text: ``PS0`` (expanded after a command is read, before
    it runs) writes ``C`` and ``history 1``, the entry bash made for it (the text *after* history
    expansion); ``PROMPT_COMMAND`` writes ``P`` and ``$?`` before each primary prompt, ``PS2``
    writes ``W``; ``lithist`` keeps a multi-line command's newlines. The hooks write to the pane
    shell's descriptor ``LOG_FD``, opened on a file before bash starts, and the tracer copies each
    of those ``write(2)`` calls from memory as it happens (:mod:`transports.sandbox.shellcopy`): a line's
    entry is in the host's hands before the line runs. A later line can only append to the log,
    and :func:`parse_log` stops at anything the hooks never write; that, more entries than typed
    lines, or a log past the trace's budget is damage. The file itself is never read back, so
    replacing, truncating or closing it hides nothing: a missing entry makes the log differ. The
    descriptor is inherited by the command's programs (bash cannot mark it close-on-exec); only
    bash's own writes are copied, so theirs change nothing. Each copied write is attributed to its
    writer: ``P`` must come from the shell itself, ``C`` and ``W`` from its hook fork (the first fork
    after a terminal read); an entry from the other one is damage, so a builtin's ``printf >&LOG_FD``
    (after ``read`` took the next line as data, or through a moved descriptor) cannot write an entry.

    When the log differs from what was read (history expansion of ``!``, readline completing a
    tab away, a backslash-newline joined, a line read as data, a command left incomplete at PS2),
    the delivery is ``split`` (damaged) and the note quotes it. What a line does to the hooks
    (``PS0=``, ``unset PROMPT_COMMAND``, ``bind``, ``complete -F``, ``set -o vi``) changes what the log
    says of the lines after it, never of itself or the lines before (docs/sandbox.md, residual risks),
    and never ``received``. One more residual: a line that reads the next line as data (``read``, ``read
    -e`` is readline itself) and then forks a subshell makes the same system calls as readline and the
    ``PS0`` hook, so that subshell can write the next line's entry (tests/test_tmux_log.py).

The output, the status
    ``stdout`` is the pane as the agent would see it (prompts, echoed input and output, stdout
    and stderr merged); ``stderr`` is what tmux said to the harness. ``exit_code`` is ``$?``
    at the last prompt, or the interactive shell's status if it exited by itself (the kernel's
    wait status of its pid); ``None`` when the time ran out, bash was left waiting at PS2, the last
    command never came back to a prompt, or the shell was killed by a signal before the harness
    ended the run (the trace orders the shell's death against the driver's ``exec tmux
    kill-server``): a ``P`` entry it wrote itself before ``kill -9 $$`` is no status.

The fix, ``tmux-safe``
    The host writes R to a file in ``meta/`` (not through the pane) and the harness types only
    ``bash FILE </dev/null``, with ``send-keys -l`` and ``Enter`` as a separate key. The typed
    text has no ``;`` at the end, no ``!``, tab or quote, so tmux, readline and history expansion
    leave it alone, and bash reads R from the file, as ``bash -c R`` would get it, with stdin
    at ``/dev/null`` as on ``raw``. ``received`` is the file's contents, when the shell read
    exactly the typed line and bash's log shows that line ran. What stays different from
    ``raw``: ``$0`` is the file's name, stdout and stderr are the terminal (``isatty`` is true),
    and the command's programs inherit ``LOG_FD`` (bash cannot mark it close-on-exec).

Why one module (over 400 lines)
    The driver script, the hooks' log format, its parser and the judge of a delivery are one contract:
    the parser reads exactly what the hooks in the driver write, and the judge's rules name both.
"""

from __future__ import annotations

import bisect
import os
import re
import shutil
from dataclasses import dataclass, field, replace

from tasks.safefs import UnsafeRead, read_under, remove_tree

from collections.abc import Callable

from ..base import Delivery, check_command
from ..capture import program_identity
from ..components import TMUX
from ..sandbox.exectrace import Exec, Trace
from ..sandbox import SYSTEM_PATH, ArgumentTooLong, Execution, Sandbox, Stream
from ..shells import DEFAULT
from .route import Route

MARGIN_S = 0.6          # kept from the sandbox's timeout for capturing the pane and stopping the server
LOG_FD = 247            # the pane shell's descriptor for its hooks' log: clear of 3-9 and 200, which scripts use
COLUMNS, ROWS, SCROLLBACK = 200, 50, 5000
TERMINFO = "/lib/terminfo"  # Debian's compiled terminfo (tmux, tmux-256color, screen): ncurses looks there first

# readline commands that expand the line or run code while it is edited, before bash's PS0 hook logs it:
# each key bash 5.2 binds to one of them by default is bound to ``abort`` (a bell, the line unchanged).
# (alias-expand-line, history-and-alias-expand-line, magic-space and vi-editing-mode have no default key;
# with this file as INPUTRC readline reads no other init file, so none gets one.)
UNSAFE_READLINE = ("shell-expand-line", "history-expand-line", "history-and-alias-expand-line", "alias-expand-line",
                   "edit-and-execute-command", "vi-edit-and-execute-command", "glob-expand-word",
                   "glob-list-expansions", "glob-complete-word", "magic-space", "display-shell-version",
                   "tilde-expand", "vi-tilde-expand", "spell-correct-word", "vi-editing-mode")
_UNBOUND = {"emacs": ('"\\e\\C-e"', '"\\e^"', '"\\C-x\\C-e"', '"\\C-x*"', '"\\C-xg"', '"\\eg"',
                      '"\\C-x\\C-v"', '"\\e&"', '"\\C-xs"'),
            "vi-command": ('"v"', '"&"'), "vi-insert": ()}
INPUTRC = "".join(f"set keymap {keymap}\n" + "".join(f"{key}: abort\n" for key in keys)
                  for keymap, keys in _UNBOUND.items()) + "set keymap emacs\n"
"""The pane's readline init file (``INPUTRC``), written by the host read-only: the keys of
:data:`UNSAFE_READLINE` do nothing."""

DRIVER = r"""
mode=$1 d=$2 budget_us=$3 text=$4 inputrc=$5
S=$d/sock E=$d/log  # the hooks' log: the host copies its writes as they happen; the driver only paces on it
t() { tmux -S "$S" "$@"; }
start=${EPOCHREALTIME/./}
left() { local r=$(( start + budget_us - ${EPOCHREALTIME/./} )); (( r < 50000 )) && r=50000; printf '%d.%06d' $((r / 1000000)) $((r % 1000000)); }
export HISTFILE=/dev/null
# readline's init file is the harness's read-only INPUTRC (no ~/.inputrc, no /etc/inputrc): no key runs an
# expansion or a command while a line is edited; terminfo from the system only (never a planted ~/.terminfo)
export INPUTRC=$inputrc TERMINFO={terminfo}
unset TERMINFO_DIRS TERMCAP
# the hooks travel under other names (a non-interactive bash, the pane's wrapper, unsets PS1 and PS2) and are
# set by the first PROMPT_COMMAND, before any key is typed; the wrapper is bash for a descriptor above 9 (and
# not tmux's pane-died hook, which now and then never fires, tells the driver when the pane's shell is gone)
# P is written by the shell itself (PROMPT_COMMAND), C and W by its first fork after it read (transports.sandbox.shellcopy)
export PROMPT_COMMAND='shopt -s lithist; PS0=$QB_PS0 PS1=$QB_PS1 PS2=$QB_PS2 PROMPT_COMMAND=$QB_PC
unset QB_PS0 QB_PS1 QB_PS2 QB_PC; export -n HISTFILE PROMPT_COMMAND; eval "$PROMPT_COMMAND"'
export QB_PC='echo "P $?" >&{fd}'
export QB_PS0='$(LC_ALL=C; h=$(history 1); { echo "C ${#h}"; echo "$h"; } >&{fd})'
export QB_PS1='$(read -t 0 || tmux wait-for -S qb-idle)$ '
export QB_PS2='$(echo W >&{fd}; read -t 0 || tmux wait-for -S qb-idle)> '
pane='exec {fd}>>"$0"; bash --norc --noprofile -i; tmux wait-for -S qb-idle'
t -f /dev/null start-server \; set -g history-limit {scrollback} \; set -g remain-on-exit on \
  \; new-session -d -s qb -x {columns} -y {rows} -c "$PWD" bash -c "$pane" "$E" 2>"$d/tmux-err" \
  || { echo "start $?" >"$d/status"; exit 0; }
timeout "$(left)" tmux -S "$S" wait-for qb-idle || { echo "start prompt" >"$d/status"; t kill-server; exit 0; }
tty=$(t display -p -t qb '#{pane_tty}')
for _ in {1..500}; do case $(stty -F "$tty" -a 2>/dev/null) in *' -icanon'*) break;; esac; sleep 0.002; done
if [ "$mode" = keys ]; then t send-keys -t qb "$text" Enter 2>"$d/tmux-err"
else t send-keys -t qb -l "$text" \; send-keys -t qb Enter 2>"$d/tmux-err"; fi
rc=$?
if [ $rc != 0 ]; then state="send-failed $rc"
else
  nl=${text//[!$'\n']/}; want=$(( ${#nl} + 2 ))  # the first prompt, then one prompt per typed line
  for _ in 1 2 3 4; do
    timeout "$(left)" tmux -S "$S" wait-for qb-idle; case $? in 0) state=idle;; 124) state=timeout;; *) state=gone;; esac
    [ "$state" = idle ] && [ "$mode" = keys ] && [ -f "$E" ] && [ ! -L "$E" ] || break  # never read a FIFO
    (( $(grep -c '^[PW]' "$E") >= want )) && break
    # fewer prompts than typed lines: a line was read as data, or tmux had not written all the keys yet
    # when bash looked (a long R fills the pty); idle only if nothing moves for a moment
    size=$(stat -c %s "$E"); sleep 0.05; [ "$(stat -c %s "$E")" = "$size" ] && break
  done
fi
t capture-pane -p -J -S - -E - -t qb >"$d/pane" 2>/dev/null
echo "$state" >"$d/status"
# the harness ends the run here: an exec in the driver's own pid, which the trace always records, so a pane shell
# killed by a signal before this point was not killed by the harness (tmux.Tmux._judge)
exec tmux -S "$S" kill-server 2>/dev/null
""".replace("{fd}", str(LOG_FD)).replace("{terminfo}", TERMINFO).replace("{scrollback}", str(SCROLLBACK)).replace("{columns}", str(COLUMNS)) \
    .replace("{rows}", str(ROWS))
"""Arguments: mode (``keys``: R as one argument then ``Enter``; ``safe``: ``-l LINE`` then ``Enter``), the
run's directory as the sandbox names it, the time budget in microseconds, and the text."""

_ENTRY = re.compile(rb" *\d+[ *] ")
PANE_ARGV = (b"bash", b"--norc", b"--noprofile", b"-i")


def pane_shell() -> Callable[[Exec], bool]:
    """The pane's interactive bash, recognised by the file it executes and the argv tmux started it with;
    it starts before any key is typed, so nothing of R can be it."""
    bash = program_identity("bash")
    return lambda e: e.exe == bash and e.argv == PANE_ARGV


@dataclass
class Record:
    """What the prompt hooks logged: one line per primary prompt answered, and where the log stopped."""

    lines: list[str] = field(default_factory=list)
    status: int | None = None        # $? at the last primary prompt
    pending: list[str] = field(default_factory=list)  # commands read after the last prompt (still running)
    at_continuation: bool = False    # the last prompt was PS2: an incomplete command waited for more input
    prompted: bool = False           # bash showed its first primary prompt
    commands: int = 0                # history entries logged (each needs at least one typed line)
    damage: str | None = None        # why the log is not the hooks' own sequence; parsing stopped there

    def executed(self) -> str | None:
        """What bash ran, by its own log, in the form of what it read (lines joined by newlines); None
        before the first prompt. A write appended to the log can only extend it."""
        if not self.prompted:
            return None
        return "\n".join(self.lines + (["\n".join(self.pending)] if self.pending else []))


def _writers(writers: list[tuple[int, bool]], start: int, end: int) -> set[bool]:
    """Who wrote the bytes ``data[start:end]`` of the log (True: the hook fork, False: the shell itself)."""
    offsets = [o for o, _ in writers]
    i = max(bisect.bisect_right(offsets, start) - 1, 0)
    found = set()
    while i < len(writers) and writers[i][0] < end:  # write i holds [its offset, the next one's)
        if i + 1 >= len(writers) or writers[i + 1][0] > start:
            found.add(writers[i][1])
        i += 1
    return found


def parse_log(data: bytes, writers: list[tuple[int, bool]] | None = None) -> Record:
    """Parse the hooks' log (``P status``, ``W``, ``C nbytes`` + entry), as the tracer copied it.

    ``writers`` (``Trace.shell_log_writers``): who wrote each part. The hooks write ``P`` from the shell
    itself and ``C``/``W`` from its hook fork; an entry any part of which came from the other writer was
    written by the command (a builtin's ``printf >&N``), and the parse stops there with ``damage`` set.

    The hooks write a prompt (``P``) first, then per command read ``W`` for each continuation line and
    one ``C`` before it runs. Anything else (malformed data, a ``C`` or ``W`` before the first prompt, a
    second ``C`` with no prompt since the last) can only have been written by the command: the parse
    stops there with ``damage`` set. Entries are in the order they were written, so what a command
    appends never changes how the entries before it parse."""
    rec = Record()
    since: list[str] = []
    answered = False  # a prompt since the last C: the next C is the hooks'
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            rec.damage = "ends inside an entry"
            break
        head = data[pos:end].split(b" ")
        start, pos = pos, end + 1
        kind = head[0]
        try:
            arg = int(head[1]) if len(head) == 2 else None
        except ValueError:
            rec.damage = "malformed"
            break
        if kind in (b"C", b"W") and not rec.prompted:
            rec.damage = "an entry before the first prompt"
            break
        whole = arg is not None and 0 <= arg < len(data) - pos and data[pos + arg:pos + arg + 1] == b"\n"
        if writers is not None and kind in (b"C", b"W", b"P"):
            stop = pos + arg + 1 if kind == b"C" and whole else pos
            if _writers(writers, start, stop) != {kind != b"P"}:
                rec.damage = (f"a {kind.decode()} entry written by the shell itself, not its hook's fork"
                              if kind != b"P" else "a P entry written by a fork, not the shell itself")
                break
        if kind == b"C" and whole:
            if not answered:
                rec.damage = "two commands with no prompt between"
                break
            entry = data[pos:pos + arg]
            pos += arg + 1
            m = _ENTRY.match(entry)
            text = entry[m.end():] if m else entry
            since.append(text.decode("utf-8", errors="surrogateescape"))
            rec.commands += 1
            rec.at_continuation, answered = False, False
        elif kind == b"P" and arg is not None:
            if rec.prompted:
                rec.lines.append("\n".join(since))
            rec.prompted, since, rec.status, rec.at_continuation, answered = True, [], arg, False, True
        elif kind == b"W" and arg is None:
            rec.at_continuation, answered = True, True
        else:
            rec.damage = "malformed"
            break
    rec.pending = since
    return rec


def _read(sandbox: Sandbox, rel: str, cap: int) -> bytes | None:
    """The file ``meta/rel`` (at most ``cap`` bytes), or None when missing or unsafe to read: the command can
    reach the run's directory, so it is read without following a link or opening a FIFO."""
    try:
        return read_under(sandbox.meta, rel, cap)
    except (UnsafeRead, OSError):
        return None


class Tmux(Route):
    source = ("tmux #1849 and #4350 (a trailing ; is tmux's command separator, even with -l); "
              "Terminal-Bench and libtmux type commands with send-keys into an interactive bash")
    component = "tmux 3 server, a real pty, bash --norc --noprofile -i (readline, history expansion on)"
    route_needs = (TMUX,)

    def __init__(self, safe: bool = False) -> None:
        super().__init__("tmux", safe, DEFAULT,
                         fix=("R written to a file by the host; typed: send-keys -l 'bash FILE </dev/null', then Enter "
                         "(the fix)"),
                         boundary=("typed into an interactive bash: send-keys -t P R Enter (tmux's ; parse, key names), "
                         "readline (tab completes), history expansion of !, multi-line input through PS2"))

    async def deliver(self, command: str, sandbox: Sandbox) -> Delivery:
        if (why := check_command(command)) is not None:
            return Delivery(received=None, execution=None, transport_error=why)
        if shutil.which("tmux", path=SYSTEM_PATH) is None:
            return Delivery(received=None, execution=None,
                            transport_error=f"{self.name}: tmux is not installed (Debian package: tmux)")
        run = sandbox.scratch("tmux")  # an unguessable name; a planted one makes mkdir fail, never followed
        try:
            sandbox.make_dir(run)
        except OSError as e:
            return Delivery(received=None, execution=None,
                            transport_error=f"{self.name}: cannot make the run directory: {e.strerror or e}")
        try:
            return await self._deliver(command, sandbox, run.name)
        finally:
            remove_tree(run)

    async def _deliver(self, command: str, sandbox: Sandbox, rel: str) -> Delivery:
        inside = sandbox.inside(sandbox.meta / rel)
        if self.safe:
            script = sandbox.write_file("command", command.encode("utf-8"))  # read-only to the command
            mode, text = "safe", typed("safe", command, script)
        else:
            mode, text = "keys", command
        budget_us = max(int((sandbox.limits.timeout_s - MARGIN_S) * 1e6), 100_000)
        inputrc = sandbox.write_file("inputrc", INPUTRC.encode())  # read-only to the command, earlier runs too
        try:
            ex = await sandbox.run(["bash", "-c", DRIVER, "qb-tmux", mode, inside, str(budget_us), text, inputrc],
                                   input_of=pane_shell(), log_fd=LOG_FD)
        except ArgumentTooLong as e:
            return Delivery(received=None, execution=None, transport_error=str(e))
        state = (_read(sandbox, f"{rel}/status", 256) or b"").decode("ascii", "replace").strip()
        rec = (parse_log(ex.trace.shell_log, ex.trace.shell_log_writers) if ex.trace is not None
               else parse_log(b""))
        tmux_said = (_read(sandbox, f"{rel}/tmux-err", sandbox.limits.output_cap) or b"").decode("utf-8", "replace")
        pane = _read(sandbox, f"{rel}/pane", sandbox.limits.output_cap + 1) or b""
        return self._judge(command, text, ex, state, rec, tmux_said, pane, sandbox.limits.output_cap)

    def _judge(self, command: str, typed: str, ex: Execution, state: str, rec: Record, tmux_said: str,
               pane: bytes, cap: int) -> Delivery:
        notes: list[str] = []
        screen = Stream(text=pane[:cap].decode("utf-8", "replace").rstrip("\n") + "\n" if pane.strip() else "",
                        truncated=len(pane) > cap)
        timed_out = ex.timed_out or state == "timeout"
        run = replace(ex, stdout=screen, stderr=Stream(text=tmux_said), timed_out=timed_out,
                      limit_hit="time" if timed_out else ex.limit_hit)
        failed = re.fullmatch(r"send-failed (\d{1,3})", state)
        if failed and not rec.lines and not rec.pending:
            run.exit_code = int(failed.group(1))
            return Delivery(received=None, execution=run, received_note="tmux refused the send-keys command: "
                            "nothing was typed")
        if state.startswith("start") or (state not in ("idle", "timeout", "gone") and not rec.prompted):
            why = tmux_said.strip()[:200] or state or ex.stderr.text.strip()[:200] or "no report"
            return Delivery(received=None, execution=None, transport_error=f"{self.name}: tmux did not start: {why}")
        if state not in ("idle", "timeout", "gone") and not ex.timed_out:
            notes.append("the driver's report was missing or unreadable (the command interfered with it?)")
        executed = rec.executed()  # bash's own record, as the tracer copied it
        received, split = delivered(ex), False
        trace = ex.trace
        status = trace.reader_status if trace is not None else None
        # a shell killed by a signal was, as a rule, killed at the end (kill-server's SIGHUP, the timeout's
        # SIGKILL): only a shell that exited by itself has a status of its own
        exited = os.waitstatus_to_exitcode(status) if status is not None and os.WIFEXITED(status) else None
        if exited is not None and trace is not None and _ended_after(trace):
            exited = None  # after the driver's kill-server the closing pty can give bash EOF first: teardown's exit
        killed_early = (status is not None and os.WIFSIGNALED(status) and trace is not None
                        and not _ended_after(trace))
        if trace is None or trace.reader is None:
            notes.append("the pane's shell never started")
        elif not trace.input_complete:
            split = True
            notes.append("the pane's shell read more than the trace keeps (or part of it could not be read)")
        for why in self._log_damage(rec, trace, received):
            split = True  # only the command can have caused it: it adds damage, never removes it
            notes.append(why)
        if received is not None and executed is not None and executed != received and not self.safe:
            split = True  # delivered intact, then bash changed it: history expansion, a continuation
            notes.append(f"bash's own record of what it ran differs from what it read: {executed[:200]!r}")
        at_ps2 = rec.at_continuation and not rec.pending
        if timed_out:
            run.exit_code = None
        elif killed_early:
            run.exit_code = None  # it died before the harness ended the run: its last P entry is no status
            notes.append(f"the pane's shell was killed by signal {os.WTERMSIG(status)} before the harness ended "
                         "the run (the driver's kill-server): its status is unknown")
        elif exited is not None and not (at_ps2 and state == "idle"):
            # (left idle at PS2, the shell is ended by the harness: as the pty closes it may read EOF and exit
            # 2 "by itself" before the SIGHUP lands, a race that is teardown's, not the command's)
            run.exit_code = exited
        elif rec.pending:
            run.exit_code = None  # the last command never came back to a prompt
            if state == "idle" and rec.damage is None:  # ...yet the pane did: the hooks could not write there
                notes.append("bash's log stops inside its last command, though the pane came back to a prompt "
                             "(the command closed or moved the log's descriptor?): its status is unknown")
        elif rec.at_continuation:
            run.exit_code = None
            notes.append("bash was left at its continuation prompt (PS2): the last command was incomplete and "
                         "never ran")
        else:
            run.exit_code = rec.status
        if state == "gone":
            notes.append("the tmux server was gone before the command finished")
        if self.safe:
            if received == typed and executed == typed:
                received = command  # the file bash was started on held exactly R, written by the host
            else:
                notes.append("the pane's shell did not read and run the typed line alone: received is what it "
                             "read")
        return Delivery(received=received, execution=run, received_note="; ".join(notes) or None, split=split)

    @staticmethod
    def _log_damage(rec: Record, trace: Trace | None, received: str | None) -> list[str]:
        """Why bash's log is not the hooks' own: each is something only the command can have caused (the
        hooks' entries for a line are copied before that line runs), so each is damage."""
        why: list[str] = []
        if trace is not None and trace.reader is not None and not trace.shell_log_complete:
            why.append("bash's log of what it ran was longer than the trace keeps, or could not be copied")
        if rec.damage:
            why.append(f"bash's log of what it ran holds what its hooks never write ({rec.damage}): "
                       "written by the command")
        typed_lines = len(re.findall(r"[\r\n]", received)) + 1 if received is not None else 0
        if rec.commands > typed_lines:
            why.append(f"bash's log holds {rec.commands} commands for {typed_lines} typed lines")
        return why


def _ended_after(trace: Trace) -> bool:
    """Whether the pane's shell ended after the driver's ``exec tmux ... kill-server`` (the harness ending the
    run), by the trace's order of events; False when that exec is not in the trace."""
    if not trace.execs or trace.reader_exit_seq is None:
        return False
    driver = trace.execs[0].pid
    end = next((e.seq for e in trace.execs if e.pid == driver and e.argv[-1:] == (b"kill-server",)), None)
    return end is not None and trace.reader_exit_seq >= end


def delivered(ex: Execution) -> str | None:
    """What the pane's interactive shell read from its terminal, as the kernel's trace copied it at each
    ``read(2)`` from fd 0, less the one Enter the harness typed after R; None when nothing arrived."""
    if ex.trace is None or not ex.trace.input:
        return None
    data = ex.trace.input
    if data.endswith((b"\r", b"\n")):
        data = data[:-1]
    return data.decode("utf-8", errors="surrogateescape")


# ---------------------------------------------------------------- what exec shows (qb_client.records.route)

def typed(mode: str, command: str, script: str) -> str:
    """What the harness types: R itself (``keys``), or for the fix the line that runs the host's copy of R."""
    return f"bash {script} </dev/null" if mode == "safe" else command


def send_keys_argv(command: str, safe: bool, script: str = "/run/qb-files/command-N",
                   socket: str = "SOCKET") -> list[str]:
    """The argv of the ``tmux send-keys`` call the harness makes for R, read from :data:`DRIVER` itself
    (its ``t`` function and the branch for the mode, ``$text`` the typed text), so ``exec`` shows what
    runs. ``script``: the fix's file, as :meth:`Sandbox.write_file` names it; ``socket``: the server's.
    ValueError when DRIVER no longer has that shape (a test says so)."""
    import shlex

    mode = "safe" if safe else "keys"
    t = re.search(r'^t\(\) \{ (.*) "\$@"; \}$', DRIVER, re.M)
    call = re.search(r'^if \[ "\$mode" = keys \]; then t (.*?) 2>.*\n^else t (.*?) 2>', DRIVER, re.M)
    if t is None or call is None:
        raise ValueError("tmux DRIVER: its send-keys lines are not where send_keys_argv reads them")
    words = shlex.split(t.group(1)) + shlex.split(call.group(1 if mode == "keys" else 2))
    values = {"$S": socket, "$text": typed(mode, command, script)}
    return [values.get(w, w) for w in words]
