"""A harness as the agent: the real harness runs a whole task in its sandbox, its model reached through a relay.

How it differs from the route (:mod:`transports.harnesses.harness`)
    The route hands one R to the harness through the in-sandbox courier. Here the harness gets the task's
    instruction as its prompt and talks, over as many turns as it likes, to whatever answers on the host's
    side of a Unix socket (the recording proxy in :mod:`qb_client.campaign.harness_proxy`: a provider, the
    scripted courier, or a replay). The sandbox still has no network: the launcher starts
    :mod:`transports.harnesses.relay` on 127.0.0.1 and the harness's base URL names it.

What it returns (:class:`AgentRun`)
    The run's execution (the harness's own exit code and output) and **every** final shell the harness
    started, in the kernel's order: for each, the program (``wrapper``), ``received`` (read as the route
    reads it: the ``eval`` word for Claude Code, ``/bin/sh``'s ``-c`` program for mini-swe-agent) and the
    shell's exit code as the kernel reported it to the tracer (``Trace.exits``). Nothing here comes from
    the harness or the model: the caller pairs the shells with the commands of the recorded model replies.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from ..base import check_command
from ..capture import program_identity, received_from
from ..needs import MissingComponent
from ..sandbox import ArgumentTooLong, Execution, Sandbox
from ..sandbox.exectrace import Exec
from .claude_code import MARKER, eval_marker
from .dequote import DequoteError, dequote, word_after
from .harness import LAUNCH_FAILED, HarnessRoute, launcher

RELAY = Path(__file__).with_name("relay.py")
SOCKET_INSIDE = "/run/qb-proxy"
"""Where the host's proxy directory appears under bwrap (a fixed path: the same on every run)."""
DUMMY_KEY = "quotebench-relay-dummy-key"
"""What the harness is given as its key: the proxy drops it and adds the real one on the host."""
LAUNCHER = launcher("relay", "relay=$1 sock=$2 url_var=$3 url_path=$4; shift 4", 'python3 -I "$relay" "$sock" "$port" $$')
"""The launcher: the relay in the background, then the harness in the launcher's place."""


@dataclass
class Shell:
    """One final shell the harness started: its program, what it received, its exit code (kernel)."""

    seq: int
    wrapper: str | None
    received: str | None
    exit_code: int | None
    note: str | None = None


@dataclass
class AgentRun:
    execution: Execution | None
    shells: list[Shell] = field(default_factory=list)
    harness_error: str | None = None
    note: str | None = None
    relay_pid: int | None = None
    """The relay the launcher started (host pid, from the trace): the only process whose requests count."""


@dataclass(frozen=True)
class AgentSpec:
    """How one harness is started as the agent: its argv for a prompt and model, its environment."""

    argv: Callable[[str, str, str, int], list[str]]
    env: Callable[[str], dict[str, str]]
    shells: Callable[[list[Exec], dict[int, int]], list[Shell]]


def _claude_argv(program: str, prompt: str, model: str, max_turns: int) -> list[str]:
    return [program, "-p", prompt, "--dangerously-skip-permissions", "--model", model]


def _claude_env(model: str) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": DUMMY_KEY, "IS_SANDBOX": "1", "ANTHROPIC_SMALL_FAST_MODEL": model,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1"}


def _mini_argv(program: str, prompt: str, model: str, max_turns: int) -> list[str]:
    return [program, "-m", "minisweagent.run.mini", "-m", f"openai/{model}", "-t", prompt, "-y", "--exit-immediately", "-c", "mini.yaml",
            "-c", f"agent.step_limit={max_turns + 1}", "-c", "agent.cost_limit=0"]


def _mini_env(model: str) -> dict[str, str]:
    return {"OPENAI_API_KEY": DUMMY_KEY, "MSWEA_CONFIGURED": "true", "MSWEA_COST_TRACKING": "ignore_errors",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONDONTWRITEBYTECODE": "1"}


def exit_code(status: int | None) -> int | None:
    """A wait status as the shell convention writes it (a death by signal n is 128+n)."""
    if status is None:
        return None
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def _shells(execs: list[Exec], exits: dict[int, int], program: str, wanted: Callable[[str], bool],
            read: Callable[[str], str]) -> list[Shell]:
    """Every shell of ``program``'s file that the harness itself started whose ``-c`` program is ``wanted``, in
    order, with what ``read`` takes from that program as received (a ``DequoteError`` becomes the shell's note)."""
    if not execs:
        return []
    harness, identity = execs[0].pid, program_identity(program)
    found: list[Shell] = []
    for e in execs:
        if e.parent != harness or e.exe is None or e.exe != identity:
            continue
        text = received_from(list(e.argv))
        if text is None or not wanted(text):
            continue
        received, note = None, None
        if not e.argv_complete:
            note = "the final shell's argv could not be read whole"
        else:
            try:
                received = read(text)
            except DequoteError as err:
                note = str(err)
        found.append(Shell(e.seq, text, received, exit_code(exits.get(e.pid)), note))
    return found


def eval_shells(execs: list[Exec], exits: dict[int, int]) -> list[Shell]:
    """Every bash the harness itself started whose ``-c`` program is Claude Code's ``eval`` wrapper, in order
    (the same test as :func:`transports.harnesses.claude_code.eval_shell`, which takes the first)."""
    return _shells(execs, exits, "bash", lambda text: eval_marker(text) is not None,
                   lambda text: dequote(word_after(text, eval_marker(text) or MARKER)))


def sh_shells(execs: list[Exec], exits: dict[int, int]) -> list[Shell]:
    """Every ``/bin/sh -c`` (dash's file) the harness itself started, in order: it received its ``-c`` program."""
    return _shells(execs, exits, "sh", lambda text: True, lambda text: text)


SPECS: dict[str, AgentSpec] = {
    "claude-code": AgentSpec(_claude_argv, _claude_env, eval_shells),
    "mini-swe-agent": AgentSpec(_mini_argv, _mini_env, sh_shells),
}
"""The harnesses that can run as the agent (``quotebench run --harness NAME``)."""


async def run_agent(route: HarnessRoute, sandbox: Sandbox, *, prompt: str, model: str, proxy_dir: Path,
                    max_turns: int) -> AgentRun:
    """Run the harness on ``prompt`` in ``sandbox``, its model behind the Unix socket ``proxy_dir/proxy.sock``.

    ``proxy_dir`` is a host directory holding only the proxy's socket; it is bound read-only into the
    sandbox. A missing component is a harness error (nothing ran); a prompt no argument can carry is one too."""
    spec = SPECS[route.harness]
    if (why := check_command(prompt)) is not None:
        return AgentRun(None, harness_error=f"{route.harness}: the prompt cannot be passed: {why}")
    try:
        prefix = await anyio.to_thread.run_sync(route.installed)
        program = route.program(prefix)
    except MissingComponent as e:
        return AgentRun(None, harness_error=f"{route.harness}: {e}")
    mount = sandbox.mount_point(prefix, f"qb-{route.harness}")
    inside_program = f"{mount}/{program.relative_to(prefix)}" if mount != str(prefix) else str(program)
    sock_dir = sandbox.mount_point(proxy_dir, "qb-proxy")
    relay = sandbox.write_file("relay.py", RELAY.read_bytes())
    argv = ["/bin/sh", "-c", LAUNCHER, "qb-agent", relay, f"{sock_dir}/proxy.sock", route.url_var, route.url_path,
            *spec.argv(inside_program, prompt, model, max_turns)]
    try:
        ex = await sandbox.run(argv, env=spec.env(model), binds=((prefix, mount), (proxy_dir, sock_dir)))
    except ArgumentTooLong as e:
        return AgentRun(None, harness_error=f"{route.harness}: the prompt is too long: {e}")
    trace = ex.trace
    shells = spec.shells(list(trace.execs), dict(trace.exits)) if trace is not None else []
    note = None
    if not shells and ex.exit_code == LAUNCH_FAILED and "relay did not start" in ex.stderr.text:
        note = "the relay did not start, so the harness never reached its model"
    if trace is not None and trace.dropped:
        note = "; ".join(filter(None, [note, f"{trace.dropped} execs past the trace's cap were counted, not kept"]))
    relay_pid = next((e.pid for e in trace.execs[1:] if trace.execs and e.parent == trace.execs[0].pid
                      and relay.encode() in e.argv), None) if trace is not None else None
    return AgentRun(ex, shells, note=note, relay_pid=relay_pid)
