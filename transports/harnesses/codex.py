"""`codex`: OpenAI's Codex CLI, the real release, driven offline by the courier.

The route (measured offline with strace; docs/harnesses.md)
    Codex 0.171's model tool is ``exec_command {cmd, login, tty, shell, workdir}``. With the shell snapshot off
    it runs ``cmd`` as the exact argument vector ``/usr/bin/bash -lc R`` (``login`` defaults to true):
    R arrives whole, but as a *login* shell's program, so ``/etc/profile`` and ``~/.bash_profile`` (or
    ``~/.profile``) run first: Debian's ``/etc/profile`` resets ``PATH`` (a userland first on the sandbox's
    ``PATH`` is gone), and Codex adds its ``CODEX_*`` variables and ``PAGER=cat`` to the environment.

Why the snapshot is off (``[features] shell_snapshot = false``)
    With it on, Codex runs a login shell once per session to capture the user's environment into a snapshot
    file, in the background; a command that comes before the snapshot is ready runs as ``/bin/bash -lc R``, one
    that comes after runs as ``/bin/bash -c <wrapper>`` whose wrapper sources the snapshot and ends ``exec
    '/bin/bash' -c '<R quoted>'``. Which one a run gets is a race against the courier's first answer, so the
    same R would be measured on two different routes from run to run. Off, every run is ``bash -lc R``.

The component
    npm ``@openai/codex`` at :data:`VERSION`, installed with scripts off: the package is a node launcher that
    execs the native program of the platform package (``@openai/codex-linux-x64``, an optional dependency,
    ``vendor/<triple>/bin/codex``, a static program; 424 MB in all). Neither package has an install script; the
    route runs that program directly, so node is not needed at run time. ``CODEX_HOME`` is a directory in the run's own ``meta/`` directory (not
    ``/tmp``: Codex will not put its helper links under a temporary directory); its ``config.toml`` is written
    by a ``/bin/sh`` prelude that then ``exec``\\ s Codex in its place, because only the launcher knows the
    courier's port (:data:`PRELUDE`, :data:`CONFIG`): the courier as a custom provider (``wire_api =
    "responses"``, the key from ``FAKE_API_KEY``), the update check, analytics, plugins and apps off (each
    would otherwise reach for github.com or chatgpt.com), and the shell snapshot off. Started as ``codex exec
    --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox PROMPT``, stdin ``/dev/null``.

``received``
    The final shell is the first exec, in the kernel's trace, of the system's bash whose parent is the harness
    (the launcher's pid, which becomes the prelude, then Codex) with argv ``[bash, -lc, R]``; ``received`` is
    ``argv[2]`` exactly, and the record's ``wrapper`` the whole argv joined with spaces. A bash that R starts
    is R's shell's child (or its grandchild), never the harness's, so R cannot add a look-alike: even a copy of
    the Codex binary that R starts is not the harness's pid. None when the harness started no such shell.

No ``-safe`` twin
    R travels as the tool call's JSON string and arrives whole as one argument (37/37 in HARNESSES.md); what
    differs from ``raw`` is the login shell and Codex's environment, which no encoding of R changes.
"""

from __future__ import annotations

import platform
import shlex
from pathlib import Path

from ..base import Delivery
from ..capture import program_identity
from ..components import Component
from ..needs import MissingComponent
from ..sandbox import Sandbox
from ..sandbox.exectrace import Exec, Identity, Trace
from .claude_code import PYTHON3
from .courier import logged_result
from .harness import Final, HarnessRoute

PACKAGE = "@openai/codex"
VERSION = "0.171.0"
"""The release measured in HARNESSES.md."""
CODEX = Component("codex", "npm", PACKAGE, version=VERSION, node=False, install_timeout_s=900.0,
                  note="the real harness (a native program, 424 MB), pinned; installed with --ignore-scripts")
PROMPT = "Run the command the task needs with the exec_command tool."
TRIPLE = {"x86_64": ("x64", "x86_64-unknown-linux-musl"), "amd64": ("x64", "x86_64-unknown-linux-musl"),
          "aarch64": ("arm64", "aarch64-unknown-linux-musl"), "arm64": ("arm64", "aarch64-unknown-linux-musl")}
URL_VAR = "QB_CODEX_BASE_URL"
"""The courier's URL, exported by the frame's launcher for the prelude only (Codex reads config.toml)."""

CONFIG = """\
model_provider = "fake"
model = "gpt-5"
check_for_update_on_startup = false

[model_providers.fake]
name = "QuoteBench courier"
base_url = "$QB_CODEX_BASE_URL"
wire_api = "responses"
env_key = "FAKE_API_KEY"

[analytics]
enabled = false

[features]
plugins = false
remote_plugin = false
apps = false
shell_snapshot = false
"""
"""Codex's configuration; ``$QB_CODEX_BASE_URL`` is expanded by the prelude's heredoc (digits and a path)."""

PRELUDE = ('mkdir -p "$CODEX_HOME" || exit 96\n'
           'cat > "$CODEX_HOME/config.toml" <<QB_CODEX_CONFIG || exit 96\n' + CONFIG + 'QB_CODEX_CONFIG\n'
           'unset QB_CODEX_BASE_URL\n'
           'exec "$@"\n')
"""``/bin/sh -c PRELUDE qb-codex CODEX ARGS...``: write the configuration with the courier's port, then become
Codex (same pid, so Codex is still the launcher's process and the final shell's parent)."""


class Codex(HarnessRoute):
    harness = "codex"
    version = VERSION
    package = CODEX
    url_var = URL_VAR
    url_path = "/v1"
    source = (f"OpenAI Codex CLI (npm {PACKAGE} {VERSION}), measured in docs/harnesses.md: exec_command runs "
              "/bin/bash -lc R (shell snapshot off)")
    component = (f"the real Codex {VERSION} (native program) with a scripted Responses server in the sandbox, "
                 "then /bin/bash -lc R")
    route_needs = (CODEX, PYTHON3)

    def __init__(self) -> None:
        super().__init__(boundary=("the model's exec_command tool call, run by Codex as /bin/bash -lc R "
                                   "(a login shell: /etc/profile resets PATH, ~/.profile runs; CODEX_* variables)"))

    def program(self, prefix: Path) -> Path:
        machine = platform.machine().lower()
        arch, triple = TRIPLE.get(machine, (machine, f"{machine}-unknown-linux-musl"))
        found = prefix / "node_modules" / "@openai" / f"codex-linux-{arch}" / "vendor" / triple / "bin" / "codex"
        if not found.is_file():
            raise MissingComponent(f"{PACKAGE}@{VERSION} in {prefix} has no native program for linux-{arch} "
                                   f"(expected {found})")
        return found

    def argv(self, program: str) -> list[str]:
        return ["/bin/sh", "-c", PRELUDE, "qb-codex", program, "exec", "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox", PROMPT]

    def env(self) -> dict[str, str]:
        return {"FAKE_API_KEY": "quotebench-courier-dummy-key"}

    def run_env(self, run_dir: str) -> dict[str, str]:
        """Codex's home in the run's own directory (removed after the run; not /tmp, which Codex refuses for
        its helper links), so nothing of one run's sessions or state reaches the next or ``$HOME``."""
        return {"CODEX_HOME": f"{run_dir}/codex-home"}

    def final_shell(self, execs: list[Exec]) -> Final:
        return login_shell(execs, {})

    async def _deliver(self, command: str, sandbox: Sandbox, prefix: Path, program: Path, rel: str) -> Delivery:
        """The frame's delivery, then what Codex did instead of a shell, when the kernel saw none (so R ran
        nowhere and cannot have written the courier's log): a refusal is a transport error naming Codex's
        words; an ``apply_patch`` invocation, which Codex applies itself, gets a note saying so."""
        done = await super()._deliver(command, sandbox, prefix, program, rel)
        ex = done.execution
        if (ex is None or done.harness is None or done.harness_error is not None or ex.trace is None
                or ex.trace.dropped or self.final_shell_in(ex.trace).exec is not None):
            return done
        said = first_result(done.harness.log)
        if said is not None and said.startswith(FAILED):
            why = said[said.find(REJECTED) + 1:] if REJECTED in said else said[len(FAILED):]
            why = why.splitlines()[0].strip().rstrip('\\")} ')  # Codex's words, without its Rust debug wrapping
            return Delivery(received=None, execution=None, harness=done.harness,
                            transport_error=f"{self.name}: Codex refused the command: {why[:300]}")
        if command.lstrip().startswith(PATCH_WORDS):
            note = ("Codex took R as an apply_patch invocation and applied the patch itself: no shell ran, so "
                    "whatever changed in the working directory was done by the harness, not by a shell")
            return Delivery(received=None, execution=ex, received_note=note, harness=done.harness)
        return done

    def final_shell_in(self, trace: Trace | None) -> Final:
        return login_shell(list(trace.execs), dict(trace.forks)) if trace is not None else login_shell([], {})


FAILED = "exec_command failed:"
"""How Codex 0.171 begins the tool result of a command it would not start (its safety check, before any shell)."""
REJECTED = " rejected: "
PATCH_WORDS = ("apply_patch", "applypatch")
"""Codex intercepts an ``exec_command`` whose program invokes its patch tool and applies the patch in-process."""


def first_result(log: str | None) -> str | None:
    """The text of the first tool result in the courier's log, or None."""
    for line in (log or "").splitlines():
        try:
            content = logged_result(line)
        except ValueError:
            continue
        return content if isinstance(content, str) else None
    return None


def login_shell(execs: list[Exec], forks: dict[int, tuple[int, int]]) -> Final:
    """The first ``bash -lc`` (the system's bash, by file identity) that Codex itself started, and its program.

    Codex starts it from one of its own threads, through a helper (``/proc/self/exe
    --codex-run-as-process-setup``, the Codex binary) that execs bash in place (measured: harness pid P, a
    thread T of P, child X: X execs the helper, then ``/usr/bin/bash -lc R``). So a candidate counts when
    every task from its pid up to P, by the trace's forks (child -> parent), executed nothing but the harness's
    binary (the file P executed last, Codex's) before the candidate: a thread, a fork or a helper of Codex.
    Anything R starts descends from R's shell, which executed bash, so it never counts, even a copy of the
    Codex binary that R runs."""
    if not execs:
        return Final(None, note="the kernel saw no program run")
    harness_pid, bash = execs[0].pid, program_identity("bash")

    def codex_task(pid: int, before: int, own: Identity | None) -> bool:
        """``pid`` ran nothing but ``own`` (the harness's binary) from its fork up to ``before``."""
        born = forks[pid][1] if pid in forks else -1
        return all(e.exe is not None and e.exe == own for e in execs
                   if e.pid == pid and born < e.seq < before)

    def started_by_codex(e: Exec) -> bool:
        own = next((x.exe for x in reversed(execs) if x.pid == harness_pid and x.seq < e.seq), None)
        if own is None or e.parent is None or not codex_task(e.pid, e.seq, own):
            return False
        pid, seen = e.parent, set()
        while pid != harness_pid:
            if pid in seen or pid not in forks or not codex_task(pid, e.seq, own):
                return False
            seen.add(pid)
            pid = forks[pid][0]
        return True

    found = [e for e in execs if e.exe is not None and e.exe == bash and len(e.argv) == 3
             and e.argv[1] == b"-lc" and e.pid != harness_pid and started_by_codex(e)]
    if not found:
        return Final(None, note="the harness started no bash -lc")
    chosen = found[0]
    wrapper = shlex.join(a.decode("utf-8", "surrogateescape") for a in chosen.argv)
    if not chosen.argv_complete:
        return Final(chosen, wrapper, None, "the final shell's argv could not be read whole")
    try:
        received = chosen.argv[2].decode("utf-8")
    except UnicodeDecodeError:
        return Final(chosen, wrapper, None, "the final shell's program is not UTF-8")
    return Final(chosen, wrapper, received, None)
