"""`template:<command line with {R}>`: a user's own path, without writing Python.

Why
    The catalogue (:mod:`transports.paths`) holds the routes we modelled; a user's route is
    often one command line they already type: ``docker exec -i ctr sh -c "{R}"``, ``ssh -T
    host "{R}"``, ``kubectl exec pod -- sh -c "{R}"``. A template is that line with ``{R}``
    where the command goes. R is pasted raw (every ``{R}``), exactly as a harness that
    formats a string would, and the text is run by a real outer shell: bash, or the shell a
    trailing ``@NAME`` names (``template:sh -c "{R}"@dash``). Only a last ``@word`` that is a
    known shell is a suffix, since templates say ``user@host``.

Stand-ins for remotes and containers
    The template's own programs that name somewhere else are resolved to sandboxed stand-ins,
    so the sandbox plays the container or the host:

    * ``docker exec`` / ``podman exec`` [options] CTR CMD... (also ``docker container exec``)
      run CMD here. Honoured: ``-e/--env NAME=VALUE`` and ``NAME`` (exported to CMD),
      ``-w/--workdir DIR`` (a ``cd``; a missing one is exit 126, as docker's OCI error).
      Accepted and ignored: ``-i``, ``-t``, ``-it``, ``--privileged``, ``-u/--user`` (the
      sandbox has one user). Any other option is refused (exit 125, one line naming it).
    * ``kubectl exec`` [options] POD -- CMD... runs CMD here. Accepted and ignored: ``-i``,
      ``-t``, ``-q``, ``-c/--container``, ``-n/--namespace``, ``--context``. The ``--`` is
      required, as in current kubectl.
    * ``ssh`` [options] HOST "..." goes through the ``ssh`` transport's own machinery
      (OpenSSH client, guarded master, embedded server in the same sandbox:
      :class:`transports.ssh.Ssh` with this template as its outer text). ``received`` is then
      the server's exec request, as on ``ssh``. Such a template runs under bash and names no
      container tool.

    The stand-ins are small ``/bin/sh`` scripts in a host directory (``qb-shim-<pid>-*``, swept
    like the others when a harness dies) bound read-only into the sandbox. They use builtins
    only: a process they forked would count as R's text run before the final shell.
    They are reached only by the outer shell's own lookup, so ``$PATH`` as R sees it is
    unchanged:

    * bash (the default): ``BASH_ENV`` names a file that bash sources before the template,
      which says ``hash -p STANDIN docker`` (and podman, kubectl), then ``unset BASH_ENV``, so
      neither R's outer expansion nor the final shell sees it (the ssh transport does the same).
    * dash, zsh, busybox (``@NAME``): none of them reads a startup file when non-interactive
      (zsh reads ``.zshenv``, but from ``$ZDOTDIR``, which R would then see), so the outer
      shell is given ``PATH=STANDINS:$PATH``; each stand-in strips that first entry before it
      runs CMD, so the final shell's ``$PATH`` is the sandbox's. Only an expansion the outer
      shell itself does (``$PATH`` in a double-quoted paste) sees the extra entry.

    A template without these programs is run as it is: no ``BASH_ENV``, no extra binds.

What ``received`` is
    Whatever the final shell got, from the kernel's exec trace
    (:func:`transports.capture.find_boundary`): the first exec of any installed shell's file
    after the outer program, in the outer program's pid (the template is one simple command,
    which the outer shell and the stand-in exec in place) or else the first one it forked
    (``split``), leaving out the stand-ins' own interpreter execs (their ``argv[1]`` is a
    stand-in's path). The variables the path itself sets (``BASH_ENV``, the extra ``PATH``
    entry, ``docker exec -e``) are not a change made by R; any other difference in the final
    shell's environment still makes the record ``split``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import tempfile
import threading
from pathlib import Path

from tasks import forking

from .base import Delivery, check_command, run_program
from .capture import Boundary, find_boundary
from .sandbox.exectrace import Exec, Trace
from .sandbox import Sandbox, shell_identities
from .shells import DEFAULT, SH, SHELLS, Shell, UnknownShellError, get_shell
from .sandbox.ownexit import at_exit

PREFIX = "template:"
PLACE = "{R}"
EXAMPLE = 'template:docker exec -i ctr sh -c "{R}"'
CONTAINER_TOOLS = ("docker", "podman", "kubectl")


class TemplateError(ValueError):
    """A template that cannot be run: empty, without ``{R}``, or with an unknown ``@shell``."""


def _show(text: str, limit: int = 60) -> str:
    """A template as quoted in a one-line error."""
    shown = text if len(text) <= limit else text[:limit] + "..."
    return repr(shown)


_SUFFIX = re.compile(r"@([A-Za-z0-9_.-]+)\s*\Z")


def parse(spec: str) -> tuple[str, Shell]:
    """The template text and its outer shell, from what follows ``template:``.

    A last ``@word`` is the outer shell when ``word`` is a known shell; when it is not, it is an
    error if it follows a quote, a ``}`` or a blank (``"{R}"@fish``: meant as a shell), and part of
    the template otherwise (``... ssh user@host``)."""
    text = spec.strip()
    shell = DEFAULT
    m = _SUFFIX.search(text)
    if m is not None:
        word, before = m.group(1), text[:m.start()]
        if word in SHELLS:
            try:
                shell = get_shell(word)
            except UnknownShellError as e:
                raise TemplateError(f"template: {e}") from None
            text = before.rstrip()
        elif before[-1:] in ('"', "'", "}", " ", "\t") or not before:
            raise TemplateError(f"template: unknown outer shell '@{word}' (known: {', '.join(SHELLS)})")
    if not text:
        raise TemplateError(f"template: the template is empty; give a command line with {PLACE}, e.g. {EXAMPLE}")
    if PLACE not in text:
        raise TemplateError(f"template {_show(text)} has no {PLACE}: say where the command goes, e.g. {EXAMPLE}")
    if "\x00" in text:
        raise TemplateError("template: the template contains a NUL byte, which no shell argument can carry")
    uses_ssh, tools = _routes(text)
    if uses_ssh and tools:
        raise TemplateError(f"template {_show(text)}: a template goes through ssh or through "
                            f"{'/'.join(tools)}, not both")
    if uses_ssh and shell is not DEFAULT:
        raise TemplateError(f"template {_show(text)}: an ssh template runs under bash (the ssh transport's "
                            f"local side); '@{shell.name}' does not apply")
    return text, shell


def normal(spec: str) -> str:
    """The normal form of what follows ``template:`` (``@bash`` dropped, blanks at the ends trimmed)."""
    text, shell = parse(spec)
    return text if shell is DEFAULT else f"{text}@{shell.name}"


def _word(program: str) -> re.Pattern[str]:
    """``program`` where a command line could run it: at the start or after a blank or an operator."""
    return re.compile(r"(?:\A|[\s;&|(`])" + re.escape(program) + r"(?=\s|\Z)")


def _routes(text: str) -> tuple[bool, tuple[str, ...]]:
    """Whether the template runs ssh, and which container tools it runs."""
    return bool(_word("ssh").search(text)), tuple(t for t in CONTAINER_TOOLS if _word(t).search(text))


def _final_guess(text: str) -> Shell:
    """The shell the template names before ``{R}`` (the record's ``shell`` field): bash if none."""
    head = text.split(PLACE, 1)[0]
    found: list[tuple[int, Shell]] = []
    for name, shell in (("busybox sh", SHELLS["busybox"]), ("bash", SHELLS["bash"]), ("dash", SHELLS["dash"]),
                        ("zsh", SHELLS["zsh"]), ("sh", SH)):
        for m in _word(name).finditer(head):
            if name == "sh" and head[max(0, m.start() - 7):m.end()].endswith("busybox sh"):
                continue
            found.append((m.end(), shell))
    return max(found, key=lambda f: f[0])[1] if found else DEFAULT


# -- the stand-ins --------------------------------------------------------------------

_HEAD = """#!/bin/sh
# quotebench: the stand-in for `{tool} exec` in a template: path (transports/template.py). It runs CMD
# here, in the sandbox, which plays the {what}. Builtins only: a process forked here would count as R's
# text run before the final shell.
case $PATH in {dir_q}:*) PATH=${{PATH#{dir_q}:}} ;; esac
if [ "${{1-}}" = container ] && [ {tool} != kubectl ]; then shift; fi
if [ "${{1-}}" != exec ]; then
  echo "{tool}: quotebench's stand-in runs only '{tool} exec' (got '${{1-}}')" >&2; exit 125
fi
shift
"""

_DOCKER = _HEAD + """while [ $# -gt 0 ]; do
  case $1 in
    -i|-t|-it|-ti|--interactive|--tty|--privileged) shift ;;
    -e|--env) [ $# -ge 2 ] || break; export "$2"; shift 2 ;;
    --env=*) export "${{1#--env=}}"; shift ;;
    -e?*) export "${{1#-e}}"; shift ;;
    -w|--workdir) [ $# -ge 2 ] || break
      cd "$2" 2>/dev/null || {{ echo "{tool}: chdir to '$2': no such file or directory" >&2; exit 126; }}; shift 2 ;;
    --workdir=*) cd "${{1#--workdir=}}" 2>/dev/null ||
      {{ echo "{tool}: chdir to '${{1#--workdir=}}': no such file or directory" >&2; exit 126; }}; shift ;;
    -w?*) cd "${{1#-w}}" 2>/dev/null ||
      {{ echo "{tool}: chdir to '${{1#-w}}': no such file or directory" >&2; exit 126; }}; shift ;;
    -u|--user) shift 2 ;;
    --user=*|-u?*) shift ;;
    -*) echo "{tool}: quotebench's stand-in does not support the option '$1' of {tool} exec" >&2; exit 125 ;;
    *) break ;;
  esac
done
if [ $# -lt 2 ]; then echo "{tool}: '{tool} exec' requires at least 2 arguments" >&2; exit 1; fi
shift
exec "$@"
"""

_KUBECTL = _HEAD + """qb_pod= qb_cmd=
while [ $# -gt 0 ]; do
  case $1 in
    --) shift; qb_cmd=1; break ;;
    -i|-t|-it|-ti|--stdin|--tty|-q|--quiet) shift ;;
    -c|--container|-n|--namespace|--context) [ $# -ge 2 ] || break; shift 2 ;;
    --container=*|--namespace=*|--context=*|-c?*|-n?*) shift ;;
    -*) echo "kubectl: quotebench's stand-in does not support the option '$1' of kubectl exec" >&2; exit 125 ;;
    *) if [ -n "$qb_pod" ]; then
         echo "error: exec [POD] [COMMAND] is not supported anymore. Use exec [POD] -- [COMMAND] instead" >&2; exit 1
       fi
       qb_pod=$1; shift ;;
  esac
done
if [ -z "$qb_pod" ] || [ -z "$qb_cmd" ] || [ $# -lt 1 ]; then
  echo "error: kubectl exec needs POD -- COMMAND [args...]" >&2; exit 1
fi
unset qb_pod qb_cmd
exec "$@"
"""


class StandIns:
    """The host directory of stand-in scripts, made once per process and bound read-only into sandboxes."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        # named like the other per-process directories, so sandbox.sweep_leftovers removes it after a kill
        self.dir = Path(tempfile.mkdtemp(prefix=f"qb-shim-{os.getpid()}-")).resolve()
        self.dir.chmod(0o755)  # the sandbox may run as another uid (transports.sandbox.hostuid)
        dir_q = shlex.quote(str(self.dir))
        for tool in CONTAINER_TOOLS:
            body = (_KUBECTL if tool == "kubectl" else _DOCKER).format(
                tool=tool, dir_q=dir_q, what="pod" if tool == "kubectl" else "container")
            forking.write_executable(self.dir / tool, body)
        self.enter = self.dir / "enter"
        self.enter.write_text("".join(f"hash -p {shlex.quote(str(self.dir / t))} {t}\n" for t in CONTAINER_TOOLS)
                              + "unset BASH_ENV\n")
        self.enter.chmod(0o644)
        self.paths = frozenset(str(self.dir / t).encode() for t in CONTAINER_TOOLS)

    def close(self) -> None:
        if self.pid == os.getpid():  # never the parent's directory, whoever calls it in a forked child
            shutil.rmtree(self.dir, ignore_errors=True)


_standins: list[StandIns] = []
_lock = threading.Lock()


def standins() -> StandIns:
    """This process's stand-ins, removed at its exit."""
    with _lock:
        if not _standins or not _standins[0].dir.is_dir():
            made = StandIns()
            if not _standins:
                at_exit(lambda: _standins and _standins[0].close())
            _standins[:] = [made]
        return _standins[0]


def _forked() -> None:
    """A forked child makes stand-ins of its own, and removes them at its exit (the parent's are not its to
    remove); its lock is new, since a thread of the parent may have held it at the fork."""
    global _lock
    _standins.clear()
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forked)


def _docker_env(argv: tuple[bytes, ...]) -> dict[bytes, bytes]:
    """The ``NAME=VALUE`` a docker/podman stand-in exports, read from its argument vector as the kernel held
    it (``[interpreter, stand-in, args...]``), by the stand-in's own grammar."""
    args = list(argv[2:])
    if args[:1] == [b"container"]:
        args = args[1:]
    args = args[1:]  # exec
    out: dict[bytes, bytes] = {}
    i = 0
    while i < len(args):
        a = args[i]
        value: bytes | None = None
        if a in (b"-e", b"--env"):
            if i + 1 >= len(args):
                break
            value, i = args[i + 1], i + 2
        elif a.startswith(b"--env="):
            value, i = a[len(b"--env="):], i + 1
        elif a.startswith(b"-e") and len(a) > 2:
            value, i = a[2:], i + 1
        elif a in (b"-w", b"--workdir"):
            if i + 1 < len(args):  # the stand-in's cd: the directory variables are its doing too
                out[b"PWD"], out[b"OLDPWD"] = args[i + 1], b""
            i += 2
        elif a.startswith((b"--workdir=", b"-w")) and a not in (b"-w",):
            out[b"PWD"], out[b"OLDPWD"] = a.split(b"=", 1)[-1] if a.startswith(b"--") else a[2:], b""
            i += 1
        elif a in (b"-u", b"--user"):
            i += 2
        elif a.startswith(b"-"):
            i += 1
        else:
            break
        if value is not None and b"=" in value:
            name, _, v = value.partition(b"=")
            out[name] = v
    return out


def _dash_forks_last(trace: Trace, boundary: Boundary) -> Boundary:
    """dash (0.5.12) forks even the one command of ``dash -c TEXT``, where bash, zsh and busybox exec it in
    place: the final shell is then always forked. It is not a split when it is the only process the outer
    dash started and nothing else was noted (R's text ran nothing before it); a paste that splits R into
    several commands still shows in ``received`` differing from R, and any other fork keeps ``split``."""
    chosen, outer = boundary.exec, trace.execs[0]
    if chosen is None or chosen.pid == outer.pid or chosen.parent != outer.pid or trace.dropped:
        return boundary
    children = [c for c, (parent, _) in trace.forks.items() if parent == outer.pid]
    if children != [chosen.pid] or boundary.note != _FORKED_NOTE:
        return boundary
    return Boundary(chosen, False, None)


_FORKED_NOTE = "the outer program forked the final shell (the paste split R into several commands)"


# -- the transport ----------------------------------------------------------------------


class Template:
    """``template:TEXT[@OUTER]``; see the module docstring."""

    source = "your own command line (template:), run by a real outer shell"

    def __init__(self, spec: str) -> None:
        self.text, self.outer = parse(spec)
        self.name = PREFIX + normal(spec)
        uses_ssh, self.tools = _routes(self.text)
        self.boundary = f"pasted raw into the template {_show(self.text)}, run by {self.outer.text}"
        self.component = (f"{self.outer.text} (outer shell)"
                          + (" + OpenSSH client and embedded asyncssh server" if uses_ssh else "")
                          + (f" + stand-ins for {', '.join(self.tools)} exec" if self.tools else ""))
        self.shell = DEFAULT if uses_ssh else _final_guess(self.text)
        self._ssh = None
        if uses_ssh:
            from .ssh import Ssh  # lazily, as the registry does: asyncssh only when ssh is used

            self._ssh = Ssh(outer=self.outer_text)
        self.sandboxed_runs = 2 if uses_ssh else 1

    def outer_text(self, command: str) -> str:
        """The outer shell's program: the template with R pasted raw at every ``{R}``."""
        return self.text.replace(PLACE, command)

    async def deliver(self, command: str, sandbox: Sandbox) -> Delivery:
        if (why := check_command(command)) is not None:
            return Delivery(received=None, execution=None, transport_error=why)
        if self._ssh is not None:
            return await self._ssh.deliver(command, sandbox)
        env: dict[str, str] | None = None
        binds: tuple[Path, ...] = ()
        passed: dict[bytes, bytes | None] = {}
        skip: frozenset[bytes] = frozenset()
        if self.tools:
            s = standins()
            binds, skip = (s.dir,), s.paths
            if self.outer is DEFAULT:
                env = {"BASH_ENV": str(s.enter)}
                passed[b"BASH_ENV"] = None
            else:
                path = sandbox.env()["PATH"]
                env = {"PATH": f"{s.dir}:{path}"}
                passed[b"PATH"] = path.encode()
        delivery = await run_program(sandbox, self.outer.argv("-c", self.outer_text(command)), received=None,
                                     env=env, binds=binds)
        trace = delivery.execution.trace if delivery.execution else None
        shells = shell_identities()

        def is_final(e: Exec) -> bool:
            return e.exe is not None and e.exe in shells and not (len(e.argv) > 1 and e.argv[1] in skip)

        boundary = find_boundary(trace, is_final, passed)
        if skip and boundary.exec is not None:
            # what the stand-ins that led to the final shell exported (docker exec -e): they ran in its pid
            chosen = boundary.exec
            for e in (trace.execs if trace is not None else []):
                if e.pid == chosen.pid and e.seq < chosen.seq and len(e.argv) > 1 and e.argv[1] in skip \
                        and not e.argv[1].endswith(b"/kubectl"):
                    passed.update(_docker_env(e.argv))
            boundary = find_boundary(trace, is_final, passed)
        if self.outer.name == "dash" and trace is not None:
            boundary = _dash_forks_last(trace, boundary)
        delivery.received, delivery.received_note, delivery.split = boundary.received, boundary.note, boundary.split
        return delivery

