"""The execution oracle for the lint: every prediction checked against the real route's traced delivery.

For each (command, route), ``quotebench lint``'s prediction is computed without running anything, then the
command is delivered by the real transport in a sandbox (the task's fixture where the command is a suite
reply), and the two are compared:

* an exact prediction (``known``) must equal the delivery: ``received``, ``split``, a transport error;
* a prediction that is unknown but sure of damage must meet a damaged delivery;
* the ``safe`` text, where it is an escaped text, must arrive as exactly R on the same route.

Shared by tests/test_lint_oracle.py and the closing measurements (the counts per route).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import anyio

from harness_corpus import HOSTILE
from qb_client.adapters.agents.habits import habitual_command_for
from qb_client.replies.contracts import reference_reply
from tasks.load import suite
from tasks.schema import Task
from transports.base import Delivery
from transports.lint import Lint, lint
from transports.registry import get
from transports.sandbox import Limits, Sandbox

ROUTES = ("raw", "nested", "nested-single", "escaped", "tempscript", "json-naive", "json-correct", "ssh", "ssh-safe",
          "docker-sh", "docker-sh-safe", "shlex-sh", "shlex-sh-safe", "shell-quote-eval", "shell-quote-eval-safe",
          "make", "make-safe", "gha-run", "gha-run-safe", "gha-block", "gha-block-safe", "tmux", "tmux-safe",
          "nested@dash", "json-naive+ssh")
"""Every lab transport and deployment path, and two compositions."""
HARNESS_ROUTES = ("claude-code", "codex", "mini-swe-agent", "openai-agents")
"""The harness routes the lint predicts (seconds per run each: measured by hand, not in the suite's oracle)."""


EXTRA: tuple[str, ...] = (
    "", "-V", "--help x", "- x", "echo ~ ~/x a=~", "echo $HOME ${HOME} $1 $# $?", 'echo "$HOME"', "a\\",
    'echo "a\\"', "echo a &&", "echo a |", "echo a; echo b", "echo a\necho \"b", "x=1 echo a", "echo {a,b}",
    "echo $'\\x41\\101\\u00e9'", "echo a > f; cat f", "echo a 2>&1", '" "', "'", '"', "\\", "@-+ echo x",
    "echo $$ $- $_", "Enter", "C-c", "echo tab\there", "echo a;", "echo 'a b' \"c d\" e\\ f",
)
"""Texts chosen for the lint's own edges: ssh's option words, empty and lone-quote commands, operators at the
end, ANSI-C escapes, tilde and brace expansion, tmux key names."""


def corpus() -> list[tuple[str, Task | None]]:
    """The hostile corpus (no fixture) and the suite's replies: each task's reference solutions under raw
    and disclosed, and the habits agent's commands under the same contracts, each with its task; repeats
    of the same (command, task) dropped."""
    items: list[tuple[str, Task | None]] = [(r, None) for _, r in HOSTILE] + [(r, None) for r in EXTRA]
    seen: set[tuple[str, str]] = set()
    for task in suite():
        for contract in ("raw", "disclosed"):
            for command in (reference_reply(task, contract).command, habitual_command_for(task, contract)):
                if command and (command, task.id) not in seen:
                    seen.add((command, task.id))
                    items.append((command, task))
    return items


@dataclass
class Tally:
    """Counts per route: exact predictions confirmed, unknowns checked for damage only, unknowns skipped,
    safe texts confirmed; ``wrong`` lists every disagreement in one line each."""

    exact: Counter[str] = field(default_factory=Counter)
    damage_only: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    safe: Counter[str] = field(default_factory=Counter)
    wrong: list[str] = field(default_factory=list)
    unknown_why: Counter[tuple[str, str]] = field(default_factory=Counter)


def damaged(d: Delivery, command: str) -> bool:
    return d.transport_error is not None or d.split or d.received != command


def disagreement(p: Lint, d: Delivery) -> str | None:
    if d.harness_error is not None:
        return f"harness error: {d.harness_error}"
    if p.known:
        if (p.transport_error is None) != (d.transport_error is None):
            return f"transport error predicted {p.transport_error!r}, delivered {d.transport_error!r}"
        if p.received != d.received:
            return f"received predicted {p.received!r}, delivered {d.received!r} ({d.received_note})"
        if p.split != d.split:
            return f"split predicted {p.split}, delivered {d.split} ({d.received_note})"
        return None
    if p.damaged is True and not damaged(d, p.command):
        return f"damage predicted ({p.unknown}), delivered intact"
    return None


async def _deliver(route: str, command: str, task: Task | None) -> tuple[Delivery, dict[str, str]]:
    limits = Limits(timeout_s=60) if route in HARNESS_ROUTES else None  # a harness starts in seconds
    async with Sandbox.create(task, limits) as sandbox:
        transport = get(route)
        delivery = await transport.deliver(command, sandbox)
        return delivery, sandbox.env()


async def check(route: str, command: str, task: Task | None, env: dict[str, str], tally: Tally) -> None:
    where = f"{route} {task.id if task else 'corpus'} {command[:60]!r}"
    prediction = lint(command, route, env=env)
    if not prediction.known:
        tally.unknown_why[(route, prediction.unknown or "")] += 1
        if prediction.damaged is None:
            tally.skipped[route] += 1
            return
    delivery, _ = await _deliver(route, command, task)
    if (why := disagreement(prediction, delivery)) is not None:
        tally.wrong.append(f"{where}: {why}")
        return
    (tally.exact if prediction.known else tally.damage_only)[route] += 1
    safe = prediction.safe
    if safe is not None and safe.how == "escaped" and safe.text is not None:
        again, _ = await _deliver(route, safe.text, task)
        if again.received != command or again.split or again.transport_error is not None:
            tally.wrong.append(f"{where}: safe text {safe.text[:60]!r} arrived as {again.received!r}")
        else:
            tally.safe[route] += 1


async def sandbox_env(task: Task | None) -> dict[str, str]:
    async with Sandbox.create(task) as sandbox:
        return sandbox.env()


async def run(routes: tuple[str, ...] = ROUTES, items: list[tuple[str, Task | None]] | None = None,
              concurrency: int = 4) -> Tally:
    tally = Tally()
    items = corpus() if items is None else items
    env = await sandbox_env(None)
    limiter = anyio.CapacityLimiter(concurrency)

    async def one(route: str, command: str, task: Task | None) -> None:
        async with limiter:
            await check(route, command, task, env, tally)

    async with anyio.create_task_group() as tg:
        for route in routes:
            for command, task in items:
                tg.start_soon(one, route, command, task)
    return tally
