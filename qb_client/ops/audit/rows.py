"""The rows of an audit, from its probe runs: one measured fact each, through the harness and through ``raw``.

Where each value comes from
    the final shell's file and argv: the kernel's exec trace (the route's ``final_shell``); everything the shell
    itself reports (``$-``, ``set -o``, ``shopt``, names, environment, cwd, descriptors): the probe's files;
    which rc files ran: the planted files' log, by pid; what the model is told: the courier's log (the first
    tool result and its length); trimming and refused constructs: ``received`` against R.
Values that change between the runs of one audit (ports, session ids, temporary names) are masked by
:func:`.read.mask`, so a row means the same on every audit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from transports.capture import program_identity, received_from
from transports.harnesses.harness import HarnessRoute
from transports.sandbox.exectrace import Exec

from . import probes
from .model import Row
from .read import (
    UUID,
    change,
    descriptor,
    env_of,
    escaped,
    mask,
    names_of_aliases,
    names_of_functions,
    on_options,
    shown,
    text,
    tool_result,
    type_kinds,
)
from .route import launcher_names
from .run import Observation

SHELL_FILES = ("bash", "dash", "zsh", "busybox")
HARNESS_RUNS = ("main", "cap", "trim", "constructs")
ARRIVES = "arrives whole"


@dataclass
class Runs:
    route: HarnessRoute
    baseline: str
    seen: dict[str, Observation]

    def harness(self) -> list[Observation]:
        return [self.seen[k] for k in HARNESS_RUNS if k in self.seen]

    def raw(self) -> list[Observation]:
        return [self.seen[k] for k in ("raw main", "raw cap")]


def rows(runs: Runs) -> list[Row]:
    main, raw = runs.seen["main"], runs.seen["raw main"]
    return [*_shell(runs, main, raw), *_rc(main, raw), *_names(main, raw), *_env(runs), *_cwd_io(runs, main, raw),
            *_status(main, raw), *_output(runs), *_time(runs), *_set_e(runs), *_trimming(runs), *_constructs(runs)]


def _row(key: str, group: str, measure: str, harness: str, raw: str | None, how: str, stable: bool = True) -> Row:
    return Row(key=key, group=group, measure=measure, harness=harness, raw=raw, how=how, stable=stable)


# -- the shell ------------------------------------------------------------------------------------------------

def shell_file(e: Exec | None) -> str:
    """Which shell's file an exec ran (by device and inode, as ``received`` is recognised), and its argv[0]."""
    if e is None:
        return "none: the harness started no final shell"
    name = next((n for n in SHELL_FILES if e.exe is not None and e.exe == program_identity(n)), "another program")
    return f"{name} ({e.argv[0].decode('utf-8', 'replace') if e.argv else '?'})"


def program_of(ob: Observation) -> str | None:
    """The final shell's program as the kernel saw it: its ``-c`` argument (``received_from`` reads ``-c``, ``-lc``,
    ``-c -x`` alike); the route's ``wrapper`` where the argv holds none."""
    if ob.final is not None and (program := received_from(list(ob.final.argv))) is not None:
        return program
    return ob.wrapper


def template(program: str, command: str) -> str:
    """The final shell's program with R shown as ``<R>`` (the probes hold no single quote, so a harness that
    single-quotes R embeds ``'R'``)."""
    if f"'{command}'" in program:
        return program.replace(f"'{command}'", "'<R>'", 1)
    return program.replace(command, "<R>", 1) if command in program else program


SOURCE = re.compile(r"(?:^|&&|\|\||;|\n|\()\s*(?:source|\.)\s+([^\s;&|<>]+)")


def sources(program: str) -> str:
    """The files a program sources (``source F``, ``. F`` at the start of a command), R (``<R>``) left out."""
    found = [f for f in SOURCE.findall(program.replace("'<R>'", "").replace("<R>", "")) if f]
    return ", ".join(found) if found else "none"


def argv_shape(ob: Observation) -> str:
    e, program = ob.final, program_of(ob)
    if e is None:
        return "-"
    words = [w.decode("utf-8", "replace") for w in e.argv]
    return " ".join("<program>" if w == program else escaped(w, 80) for w in words)



def _masked(values: list[str]) -> tuple[str, bool]:
    value, consistent = mask(values)
    return value if value is not None else "-", consistent


def _shell(runs: Runs, main: Observation, raw: Observation) -> list[Row]:
    h_prog, stable = _masked([template(p, o.command) for o in runs.harness() if (p := program_of(o)) is not None])
    r_prog, _ = _masked([template(p, o.command) for o in runs.raw() if (p := program_of(o)) is not None])
    m, r = main.files, raw.files
    flags, raw_flags = (text(m, "flags") or "").strip(), (text(r, "flags") or "").strip()

    def login(files: dict[str, bytes]) -> str:
        if (v := text(files, "login")) is not None:
            return v.strip() + " (shopt login_shell)"
        return ("yes" if (text(files, "arg0") or "").startswith("-") else "no") + " ($0 without a leading -)"

    def shopt(files: dict[str, bytes]) -> str:
        listing = text(files, "shopt")
        return "not bash" if listing is None else (", ".join(on_options(listing)) or "none")

    trace, probe = "the kernel's exec trace (the route's final_shell)", "the main probe"
    return [
        _row("shell.file", "shell", "final shell (file, argv[0])", shell_file(main.final), shell_file(raw.final), trace),
        _row("shell.argv", "shell", "final shell's argv", argv_shape(main), argv_shape(raw), trace),
        _row("shell.program", "shell", "its program (R as <R>)", escaped(h_prog, 600), escaped(r_prog, 600),
             trace + ", every harness run", stable),
        _row("shell.sources", "shell", "files its program sources", sources(h_prog), sources(r_prog),
             trace + " (source and . commands in the program)"),
        _row("shell.login", "shell", "login shell", login(m), login(r), probe),
        _row("shell.interactive", "shell", "interactive ($- has i)", "yes" if "i" in flags else "no",
             "yes" if "i" in raw_flags else "no", probe),
        _row("shell.flags", "shell", "$-", flags or "(empty)", raw_flags or "(empty)", probe),
        _row("shell.set_o", "shell", "set -o options on", ", ".join(on_options(text(m, "set_o"))) or "none",
             ", ".join(on_options(text(r, "set_o"))) or "none", probe),
        _row("shell.shopt", "shell", "shopt -s (bash)", shopt(m), shopt(r), probe),
        _row("shell.arg0", "shell", "$0", escaped((text(m, "arg0") or "").rstrip("\n")),
             escaped((text(r, "arg0") or "").rstrip("\n")), probe),
    ]


# -- rc files, names --------------------------------------------------------------------------------------------

def rc_fact(ob: Observation, marker: str) -> str:
    """Where rc file ``marker`` ran (its log lines, by pid: the final shell's is the main probe's ``$$``) and which
    of its alias, function and variable reached R."""
    final = (text(ob.files, "pid") or "").strip()
    pids = [line.split()[1] for line in ob.rc_log.splitlines() if len(line.split()) >= 2 and line.split()[0] == marker]
    others = len({p for p in pids if p != final})
    where = []
    if final and final in pids:
        where.append("in the final shell")
    if others:
        where.append(f"in {others} other shell{'s' if others > 1 else ''} the harness started")
    ran = "ran " + " and ".join(where) if where else "never ran"
    env = env_of(ob.files) or {}
    reached = [what for what, ok in (
        ("alias", type_kinds(f"qb_alias_{marker}", text(ob.files, f"type.qb_alias_{marker}")).startswith("alias")),
        ("function", type_kinds(f"qb_fn_{marker}", text(ob.files, f"type.qb_fn_{marker}")).startswith("function")),
        ("variable", f"QB_RC_{marker.upper()}" in env)) if ok]
    return f"{ran}; reaches R: {', '.join(reached) if reached else 'nothing'}"


def _rc(main: Observation, raw: Observation) -> list[Row]:
    how = "planted rc files log their shell's pid; the probe's $$ is the final shell's; type and env for the rest"
    return [_row(f"rc.{marker}", "rc", f"~/{name}", rc_fact(main, marker), rc_fact(raw, marker), how)
            for marker, name in probes.RC_FILES.items()]


def _names(main: Observation, raw: Observation) -> list[Row]:
    out = [_row(f"type.{c}", "names", f"type -a {c}", type_kinds(c, text(main.files, f"type.{c}")),
                type_kinds(c, text(raw.files, f"type.{c}")), "the main probe (type -a in bash, type in sh)")
           for c in probes.COMMANDS]

    def functions(files: dict[str, bytes]) -> str:
        listing = text(files, "functions")
        return "(not bash: not listed)" if listing is None else (", ".join(names_of_functions(listing)) or "none")

    out.append(_row("names.functions", "names", "functions defined", functions(main.files), functions(raw.files),
                    "the main probe (declare -F)"))
    out.append(_row("names.aliases", "names", "aliases defined",
                    ", ".join(names_of_aliases(text(main.files, "alias"))) or "none",
                    ", ".join(names_of_aliases(text(raw.files, "alias"))) or "none",
                    "the main probe (alias); an alias applies to R only where expand_aliases is on, and only then "
                    "does type report it"))
    return out


# -- environment ------------------------------------------------------------------------------------------------

def _env(runs: Runs) -> list[Row]:
    """Each variable whose value differs between the harness's main probe and raw's: added, changed or removed, and
    by whom: the route's launcher (the names the route's ``env`` and ``url_var`` set) or the harness. Values are
    masked across the runs; anything named like a key or token is shown as set, never printed."""
    h_envs = [e for o in runs.harness() if (e := env_of(o.files)) is not None]
    r_envs = [e for o in runs.raw() if (e := env_of(o.files)) is not None]
    if not h_envs or not r_envs:
        return [_row("env", "env", "environment", "not read: the probe wrote no env dump", None, "the probes")]
    h, r = h_envs[0], r_envs[0]
    launcher = launcher_names(runs.route)
    out = []
    for name in sorted(set(h) | set(r)):
        if h.get(name) == r.get(name):
            continue
        hv, h_ok = _env_value(name, [e.get(name) for e in h_envs])
        rv, r_ok = _env_value(name, [e.get(name) for e in r_envs])
        kind = "added" if name not in r else "removed" if name not in h else "changed"
        by = "the route's launcher" if name in launcher else "the harness"
        out.append(_row(f"env.{name}", "env", f"${name} ({kind}: {by})", hv, rv,
                        "env -0 in every probe, the harness's against raw's", h_ok and r_ok))
    if not out:
        out.append(_row("env", "env", "environment", "the same as raw's", "-", "env -0 in every probe"))
    return out


def _env_value(name: str, values: list[str | None]) -> tuple[str, bool]:
    if all(v is None for v in values):
        return "(unset)", True
    if any(v is None for v in values):
        return "set in some runs only", False
    value, ok = mask([v for v in values if v is not None])
    return shown(name, value), ok


# -- cwd, descriptors -------------------------------------------------------------------------------------------

def _cwd_io(runs: Runs, main: Observation, raw: Observation) -> list[Row]:
    def cwd(files: dict[str, bytes]) -> str:
        logical, physical = (text(files, "pwd") or "").strip(), (text(files, "pwd_p") or "").strip()
        return logical + (f" (pwd -P: {physical})" if physical != logical else "") if logical else "-"

    def fds(obs: list[Observation]) -> list[tuple[str, bool]]:
        lists = [(text(o.files, "fds") or "").splitlines() for o in obs if "fds" in o.files]
        out = []
        for fd in range(3):
            values = [descriptor(lst[fd]) for lst in lists if len(lst) > fd]
            out.append(_masked(values) if values else ("-", True))
        return out

    def tty(files: dict[str, bytes]) -> str:
        lines = (text(files, "tty") or "").split("\n")
        ttys = [line.split()[0] for line in lines if line.endswith(" yes")]
        return ("fd " + ", ".join(ttys) + " a tty") if ttys else ("none" if lines != [""] else "-")

    h_fds, r_fds = fds(runs.harness()), fds(runs.raw())
    names = ("stdin (fd 0)", "stdout (fd 1)", "stderr (fd 2)")
    how = "readlink /proc/$$/fd/N in every probe"
    return [_row("cwd", "cwd", "working directory (pwd)", cwd(main.files), cwd(raw.files), "the main probe"),
            *[_row(f"io.fd{i}", "io", names[i], escaped(h_fds[i][0]), escaped(r_fds[i][0]), how, h_fds[i][1])
              for i in range(3)],
            _row("io.tty", "io", "ttys among fds 0-2 ([ -t N ])", tty(main.files), tty(raw.files), "the main probe")]


# -- what the model is told -------------------------------------------------------------------------------------

def _status(main: Observation, raw: Observation) -> list[Row]:
    result = tool_result(main.log)
    told = escaped(UUID.sub("*-*-*-*-*", result.text)) if result else "no tool result reached the courier"
    status = "-" if result is None else ("yes" if re.search(rf"\b{probes.EXIT_STATUS}\b", result.text) else "no")
    how = "the courier's log: the first tool result"
    out_seen = "-" if result is None else ("yes" if probes.STDOUT_MARK in result.text else "no")
    err_seen = "-" if result is None else ("yes" if probes.STDERR_MARK in result.text else "no")
    return [
        _row("status.told", "status", f"exit {probes.EXIT_STATUS}: the tool result", told, None, how, stable=False),
        _row("status.in_result", "status", f"the status {probes.EXIT_STATUS} is in it", status, None, how),
        _row("status.stdout", "status", "R's stdout is in it", out_seen, None, how),
        _row("status.stderr", "status", "R's stderr is in it", err_seen, None, how),
        _row("status.exit", "status", "the route's own exit status", str(main.exit_code), str(raw.exit_code),
             "the outermost process the route started"),
    ]


def _output(runs: Runs) -> list[Row]:
    cap = runs.seen["cap"]
    result = tool_result(cap.log)
    how = "the courier's log: the tool result's length (chars=), last 256 characters (tail=) and first 4 KiB"
    if result is None:
        return [_row("output.chars", "output", f"printing {probes.CAP_BYTES} bytes: characters the model gets",
                     "no tool result reached the courier", None, how)]
    first, last = "L000001", f"L{probes.CAP_BYTES // 8:06d}"
    seen = result.text if result.whole else result.tail
    last_seen = "not seen (this courier logs no tail)" if seen is None else "yes" if last in seen else "no"
    return [
        _row("output.chars", "output", f"printing {probes.CAP_BYTES} bytes: characters the model gets",
             str(result.chars) if result.chars is not None else "unknown", None, how),
        _row("output.first", "output", f"its first line ({first}) is in it", "yes" if first in result.text else "no",
             None, how),
        _row("output.last", "output", f"its last line ({last}) is in it", last_seen, None, how),
        _row("output.text", "output", "how the tool result begins", escaped(UUID.sub("*-*-*-*-*", result.text), 200),
             None, how, stable=False),
        _row("output.end", "output", "how it ends", escaped(seen[-64:] if seen is not None else "-", 100), None, how,
             stable=False),
    ]


def _time(runs: Runs) -> list[Row]:
    return [_row("time.cap", "time", "a time limit on one command",
                 "not measured: a harness's own limit, if any, lies beyond a cheap run; finding it would hold a run "
                 "open until it fires (the sandbox cuts every run here at its own limit, --timeout)", None, "-")]


def _set_e(runs: Runs) -> list[Row]:
    def fact(ob: Observation) -> str:
        return ("ignored: the line after false ran" if "sete" in ob.files else "honoured: the shell stopped at false")
    return [_row("set_e", "set-e", "set -e; false; echo reached > f", fact(runs.seen["cap"]),
                 fact(runs.seen["raw cap"]), "the cap probe's file")]


# -- what arrives -----------------------------------------------------------------------------------------------

def arrival(ob: Observation) -> str:
    """R against what the final shell received (the route's ``received``, from the kernel's trace)."""
    if ob.transport_error is not None:
        return f"transport error: {escaped(ob.transport_error, 200)}"
    if ob.received is None:
        return "refused: nothing received" + (f" ({escaped(ob.received_note, 200)})" if ob.received_note else "")
    if ob.received == ob.command:
        return ARRIVES
    return f"changed: {change(ob.command, ob.received)}"


def _trimming(runs: Runs) -> list[Row]:
    how = "received (the route's, from the exec trace) against R"
    return [_row("trim.leading_backslash", "trimming", "leading blanks, trailing backslash",
                 arrival(runs.seen["trim"]), ARRIVES, how),
            _row("trim.trailing_blanks", "trimming", "trailing blanks (the cap probe)", arrival(runs.seen["cap"]),
                 ARRIVES, how)]


def _constructs(runs: Runs) -> list[Row]:
    how = "received against R: one run with all three, one each when they did not all arrive"
    together = runs.seen["constructs"]
    out = []
    for name in probes.CONSTRUCTS:
        ob = runs.seen.get(f"construct {name}", together)
        out.append(_row(f"construct.{name.split()[-1]}", "constructs", name, arrival(ob), ARRIVES, how))
    return out
