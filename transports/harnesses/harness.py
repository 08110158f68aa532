"""The frame every real agent harness route shares: install on first use, a courier beside it in the sandbox,
and ``received`` from the kernel's exec trace.

How one delivery runs (all inside one ``sandbox.run``, so bwrap's namespaces, the run's cgroup and the limits
hold the harness, its courier and everything R starts)
    1. The harness's package is installed into the per-user cache on first use (host side, under the cache's
       lock; :mod:`transports.paths.npm_cache` for npm, :mod:`transports.paths.venv_cache` for PyPI). A failure
       is a harness error: nothing ran, no damage.
    2. The host writes R and the courier script (:mod:`transports.harnesses.courier`) as read-only files
       (``sandbox.write_file``) and makes a run directory in ``meta/`` for the courier's log.
    3. The launcher (``/bin/sh -c LAUNCHER``) starts the courier with ``python3 -I`` on 127.0.0.1, an ephemeral
       port in the sandbox's own network namespace (bwrap unshares the network: loopback is all there is),
       waits for its port, exports the harness's base-URL variable and execs the harness, stdin
       ``/dev/null``.
    4. The harness asks the courier, which answers with one tool call carrying R, then ends the run (a text
       end of turn, or the harness's own submit command).
    5. The host picks the final shell out of the exec trace (:meth:`HarnessRoute.final_shell`, per harness, or
       :meth:`HarnessRoute.final_shell_in` where the trace's forks are needed) and
       computes ``received`` from it (:mod:`transports.harnesses.dequote` where the harness wraps R).

What the courier's log is
    Informational: kept on the record (``harness_log``) for debugging, capped at 64 KiB. R runs as the same
    user as the courier and can kill it or rewrite the log; ``received`` never depends on either.
"""

from __future__ import annotations

from dataclasses import dataclass
import signal
from pathlib import Path

import anyio

from tasks.safefs import UnsafeRead, read_under, remove_tree

from ..base import Delivery, HarnessRun, check_command
from ..components import Component
from ..needs import MissingComponent
from ..paths.route import Route
from ..sandbox import ArgumentTooLong, Execution, Sandbox
from ..sandbox.exectrace import Exec, Trace
from ..shells import DEFAULT, Shell
from .courier import LOG_CAP

COURIER = Path(__file__).with_name("courier.py")

LAUNCH_FAILED = 97
"""The launcher's exit code when its helper server never wrote its port (nothing of the harness ran)."""


def launcher(what: str, head: str, start: str) -> str:
    """A launcher script: ``head`` names its positional parameters and shifts them away (``url_var`` and
    ``url_path`` among them), ``start`` starts the helper server (``what``: the courier, or harness runs' relay)
    writing its port to ``$port``; the launcher waits for the port, exports the base URL and execs the harness
    in its own place, stdin ``/dev/null``."""
    return f"""
{head}
port=${{TMPDIR:-/tmp}}/qb-{what}-port-$$  # the sandbox's own /tmp; per run even without bwrap
{start} </dev/null >/dev/null 2>&1 &
i=0
while [ ! -s "$port" ]; do
  i=$((i + 1)); [ "$i" -gt 1000 ] && {{ echo "quotebench: the {what} did not start" >&2; exit {LAUNCH_FAILED}; }}
  sleep 0.01
done
export "$url_var=http://127.0.0.1:$(cat "$port")$url_path"
exec "$@" </dev/null
"""


LAUNCHER = launcher("courier", "courier=$1 command=$2 log=$3 url_var=$4 url_path=$5; shift 5",
                    'python3 -I "$courier" "$command" "$log" "$port"')
"""The launcher: the courier in the background, then the harness in the launcher's place."""


@dataclass
class Final:
    """The final shell as a harness route reads it from the trace: the exec (None: not found), the text the
    harness built (``wrapper``), ``received`` and a one-line note."""

    exec: Exec | None
    wrapper: str | None = None
    received: str | None = None
    note: str | None = None


def forked_shells(execs: list[Exec]) -> list[Exec]:
    """The execs that are the first program of their process after its fork: a process the harness forked and
    whose first exec is the shell. A later exec in the same process (an rc file, a hook or R itself replacing
    its shell with ``exec bash -c "... && eval '...'"``) is that process's own doing, never the harness's
    choice of shell, so no route's final-shell picker may take it."""
    first: dict[tuple[int, int | None], int] = {}
    for e in execs:
        key = (e.pid, e.forked_at)
        first[key] = min(first.get(key, e.seq), e.seq)
    return [e for e in execs if first[(e.pid, e.forked_at)] == e.seq]


class HarnessRoute(Route):
    """A real agent harness as a deployment path. Subclasses say what to install (``package``), how to find
    its program in the cache (:meth:`program`), how to start it (:meth:`argv`, :meth:`env`, ``url_var``) and
    which exec is the final shell (:meth:`final_shell`). There is no ``-safe`` twin unless a subclass has one."""

    harness: str
    package: Component
    url_var: str
    url_path: str = ""
    version: str

    def __init__(self, *, boundary: str, shell: Shell = DEFAULT) -> None:
        super().__init__(self.harness, False, shell, boundary=boundary, fix="")

    # -- what a harness says -------------------------------------------------

    def program(self, prefix: Path) -> Path:
        """The harness's executable under the installed prefix; MissingComponent if it is not there."""
        raise NotImplementedError

    def argv(self, program: str) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        raise NotImplementedError

    def final_shell(self, execs: list[Exec]) -> Final:
        raise NotImplementedError

    def final_shell_in(self, trace: Trace | None) -> Final:
        """The final shell from the whole trace; a harness whose shell is started by a thread or helper process
        of its own (Codex) reads the trace's forks too. By default :meth:`final_shell` on its execs."""
        return self.final_shell(list(trace.execs) if trace is not None else [])

    def run_env(self, run_dir: str) -> dict[str, str]:
        """Variables naming the run's own directory (as the sandbox names it; writable, removed after the run),
        for a harness that keeps state or configuration there (Codex's ``CODEX_HOME``). None by default."""
        return {}

    # -- the frame -----------------------------------------------------------

    def installed(self) -> Path:
        """The installed prefix (npm or pip install on first use, under the cache's lock). MissingComponent."""
        from ..paths import npm_cache, venv_cache

        c = self.package
        if c.kind == "venv":
            return venv_cache.venv_dir(c.package, c.version or "", c.pins, timeout_s=c.install_timeout_s)
        return npm_cache.package_dir(c.package, c.version or "", timeout_s=c.install_timeout_s)

    async def deliver(self, command: str, sandbox: Sandbox) -> Delivery:
        if (why := check_command(command)) is not None:
            return Delivery(received=None, execution=None, transport_error=why)
        try:
            prefix = await anyio.to_thread.run_sync(self.installed)
            program = self.program(prefix)
        except MissingComponent as e:  # the machine's, not the route's: never a transport error
            return Delivery(received=None, execution=None, harness_error=f"{self.name}: {e}")
        run = sandbox.scratch("harness")
        try:
            sandbox.make_dir(run)
        except OSError as e:
            return Delivery(received=None, execution=None,
                            transport_error=f"{self.name}: cannot make the run directory: {e.strerror or e}")
        try:
            return await self._deliver(command, sandbox, prefix, program, run.name)
        finally:
            remove_tree(run)

    async def _deliver(self, command: str, sandbox: Sandbox, prefix: Path, program: Path, rel: str) -> Delivery:
        mount = sandbox.mount_point(prefix, f"qb-{self.harness}")
        inside_program = f"{mount}/{program.relative_to(prefix)}" if mount != str(prefix) else str(program)
        command_file = sandbox.write_file("command", command.encode("utf-8"))
        courier = sandbox.write_file("courier.py", COURIER.read_bytes())
        log = f"{sandbox.inside(sandbox.meta / rel)}/courier.log"
        info = HarnessRun(self.harness, self.version)
        fresh = sandbox.runs == 0  # before this run: did any command run in this sandbox already?
        try:
            ex = await sandbox.run(["/bin/sh", "-c", LAUNCHER, "qb-harness", courier, command_file, log, self.url_var,
                                    self.url_path, *self.argv(inside_program)],
                                   env={**self.env(), **self.run_env(sandbox.inside(sandbox.meta / rel))},
                                   binds=((prefix, mount),))
        except ArgumentTooLong as e:
            return Delivery(received=None, execution=None, transport_error=str(e), harness=info)
        info.log = _read_log(sandbox, f"{rel}/courier.log")
        final = self.final_shell_in(ex.trace)
        info.wrapper = final.wrapper
        note = final.note
        if final.exec is None and ex.exit_code == LAUNCH_FAILED and "courier did not start" in ex.stderr.text:
            note = "the courier did not start, so the harness never ran"
        if ex.trace is not None and ex.trace.dropped:
            note = "; ".join(filter(None, [note, f"{ex.trace.dropped} execs past the trace's cap were counted, not kept"]))
        if (crash := crashed(final, ex)) is not None:
            if fresh:
                return Delivery(received=None, execution=ex, received_note=note, harness=info,
                                harness_error=f"{self.name}: {crash}")
            note = "; ".join(filter(None, [note, crash.replace("; nothing of R ran", "") + ", after an earlier "
                                           "command in this sandbox (which could have caused it): kept as the outcome"]))
        return Delivery(received=final.received, execution=ex, received_note=note, harness=info)


CRASH_SIGNALS = {signal.SIGILL: "SIGILL", signal.SIGSEGV: "SIGSEGV", signal.SIGBUS: "SIGBUS",
                 signal.SIGABRT: "SIGABRT", signal.SIGFPE: "SIGFPE", signal.SIGTRAP: "SIGTRAP"}


def crashed(final: Final, ex: Execution) -> str | None:
    """Why the harness itself crashed before it started its final shell, or None.

    Claude Code 2.1.197's runtime (Bun) dies of SIGILL now and then on a loaded machine before it starts any
    shell (5 of about 50 runs in one audit, 1 of 112 in a sweep; reruns of the same reply pass). That is the
    harness failing on this machine, not the route doing something to R: nothing of R ran (the kernel saw no
    final shell, so R cannot have caused it), and counting it as damage would put noise in every rate. So it
    is a harness error (``error: harness: ...``), left out of rates, and ``replay``/``run`` resume retries it,
    but only in a fresh sandbox: after an earlier command in the same sandbox (a chain's later turn), that
    command may have left what kills the harness (a Claude Code hook, an rc file), so the crash is kept as the
    outcome, with a note.
    Only a death by a crash signal counts: a harness that exits by itself without a shell (a refusal, a
    configuration error) or is killed at the time limit stays what it is."""
    if final.exec is not None or ex.timed_out or ex.exit_code is None or not 128 < ex.exit_code < 128 + 65:
        return None
    name = CRASH_SIGNALS.get(ex.exit_code - 128)
    if name is None:
        return None
    return f"the harness died of {name} (exit {ex.exit_code}) before it started a shell; nothing of R ran"


def _read_log(sandbox: Sandbox, rel: str) -> str | None:
    """The courier's log, at most LOG_CAP bytes, read without following a link or opening a FIFO (the command
    can reach the run's directory); None when missing or unsafe."""
    try:
        return read_under(sandbox.meta, rel, LOG_CAP).decode("utf-8", "replace")
    except (UnsafeRead, OSError):
        return None
