"""The probe commands (R) an audit sends through a harness, and the rc files it plants in the sandbox's HOME.

Why the probes look the way they do
    * R's standard output goes to the harness (and on to the model), not to us: every probe writes what it
      sees to files in one directory of the working directory, named by absolute path (the harness may start
      its shell elsewhere), which the host reads after the run.
    * They are POSIX sh with the bash-only parts behind ``[ -n "$BASH_VERSION" ]``: a harness's final shell may
      be dash (mini-swe-agent) or bash.
    * They hold no ``$(...)``, backticks or ``<(...)`` (some harnesses refuse those: that is measured on its
      own, :data:`CONSTRUCTS`) and no single quote, so a harness that quotes R for its wrapper embeds it as
      ``'R'`` and the wrapper can be shown with R replaced by ``<R>``.
    * Tests of a descriptor look at the shell itself (``[ -t 1 ]`` is a builtin with no redirection;
      ``readlink /proc/$$/fd/1`` runs in a subshell whose output is redirected): dash applies a simple
      command's redirections in the shell before it forks, so ``readlink /proc/$$/fd/1 > f`` would read ``f``.

The rc files
    ``~/.bashrc``, ``~/.bash_profile`` and ``~/.profile`` each append ``NAME PID FLAGS`` to a log in HOME
    and define an alias, a function and an exported variable named after the file; none sources another. The
    main probe writes its shell's pid, so the host tells an rc file that ran in the final shell from one that
    ran in another shell the harness started (a snapshot shell), and whether its alias, function or variable
    reached R anyway. ``/etc``'s files cannot be planted (the system is read-only in the sandbox).
"""

from __future__ import annotations

import shlex

OUT = "qb-audit"
"""The directory in the working directory the probes write to."""
RC_LOG = ".qb-audit-rc.log"
"""The log in HOME the planted rc files append to."""
RC_FILES = {"bashrc": ".bashrc", "bash_profile": ".bash_profile", "profile": ".profile"}
"""Marker name -> file in HOME."""
COMMANDS = ("grep", "find", "rg", "ls", "cat", "cd", "echo", "sed", "git")
"""Names whose meaning in the final shell is shown (``type -a``): an alias or function here shadows a program."""
STDOUT_MARK = "qb-audit-stdout"
STDERR_MARK = "qb-audit-stderr"
EXIT_STATUS = 7
CAP_BYTES = 200_000
"""What the output probe prints: 25,000 lines ``L000001`` .. ``L025000`` of 8 bytes."""
CONSTRUCTS = {"command substitution $(...)": "echo $(echo qb) > {o}/c-dollar",
              "backticks": "echo `echo qb` > {o}/c-backtick",
              "process substitution <(...)": "cat <(echo qb) > {o}/c-process"}
"""Constructs some harnesses refuse: one run with all three, and one each only when that one did not arrive whole."""


def rc_text(marker: str, home: str) -> str:
    """One planted rc file: a log line, then an alias, a function and an exported variable named after it."""
    log = shlex.quote(f"{home}/{RC_LOG}")
    return (f'printf "%s %s %s\\n" {marker} "$$" "$-" >> {log}\n'
            f"alias qb_alias_{marker}=true\n"
            f"qb_fn_{marker}() {{ :; }}\n"
            f"export QB_RC_{marker.upper()}=1\n")


def plant_script() -> str:
    """An ``sh -c`` program run in the sandbox before the probe, as the command's own user: ``$1`` is HOME,
    then pairs of (file name, text). It is the sandbox's own ``run``, so nothing is written from the host."""
    return 'home=$1; shift; while [ $# -gt 1 ]; do printf %s "$2" > "$home/$1"; shift 2; done'


def plant_args(home: str) -> list[str]:
    args = [home]
    for marker, name in RC_FILES.items():
        args += [name, rc_text(marker, home)]
    return args


def names() -> tuple[str, ...]:
    """The names the main probe asks ``type`` about: :data:`COMMANDS`, then each rc file's alias and function."""
    return COMMANDS + tuple(f"qb_{kind}_{m}" for m in RC_FILES for kind in ("alias", "fn"))


def prologue(o: str) -> str:
    """What every probe records first: its environment and where its descriptors 0-2 lead (compared across the
    runs of one audit, so a value that changes from run to run is shown masked)."""
    return f"""/usr/bin/env -0 > {o}/env
(for fd in 0 1 2; do readlink /proc/$$/fd/$fd || echo closed; done) > {o}/fds 2>&1
"""


def main_probe(o: str) -> str:
    """The probe of the shell: how it was started, its options, rc files, names, environment, cwd, descriptors;
    it prints one line on each of stdout and stderr and ends with ``exit 7``."""
    types_bash = "\n".join(f"  type -a {c} > {o}/type.{c} 2>&1" for c in names())
    types_sh = "\n".join(f"  type {c} > {o}/type.{c} 2>&1" for c in names())
    return prologue(o) + f"""echo "$$" > {o}/pid
echo "$0" > {o}/arg0
echo "$-" > {o}/flags
set -o > {o}/set_o 2>&1
pwd > {o}/pwd
pwd -P > {o}/pwd_p
for fd in 0 1 2; do
  if [ -t $fd ]; then echo "$fd yes" >> {o}/tty; else echo "$fd no" >> {o}/tty; fi
done
alias > {o}/alias 2>&1
if [ -n "$BASH_VERSION" ]; then
  shopt -s > {o}/shopt
  if shopt -q login_shell; then echo yes > {o}/login; else echo no > {o}/login; fi
  declare -F > {o}/functions
{types_bash}
else
{types_sh}
fi
echo done > {o}/done
echo {STDOUT_MARK}
echo {STDERR_MARK} >&2
exit {EXIT_STATUS}"""


def cap_probe(o: str) -> str:
    """Prints :data:`CAP_BYTES` bytes, then the ``set -e`` probe; it ends in trailing blanks (trimming)."""
    return prologue(o) + (f"/usr/bin/seq -f L%06g 1 {CAP_BYTES // 8}\n"
            f"set -e; false; echo reached > {o}/sete\n  \t\n")


def trim_probe(o: str) -> str:
    """Leading blanks and a trailing backslash."""
    return "  \t " + prologue(o) + f"echo qb-trim > {o}/trim \\"


def constructs_probe(o: str, names: list[str] | None = None) -> str:
    return prologue(o) + "; ".join(CONSTRUCTS[n].format(o=o) for n in (names or list(CONSTRUCTS)))
