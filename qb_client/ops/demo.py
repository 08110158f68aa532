"""``quotebench demo``: the whole crossed design offline, then the report.

Two built-in offline agents stand in for models: ``reference`` (each task's
reference solutions) and ``habits`` (a deterministic baseline with common human
quoting habits; not a model). Each answers all 56 tasks under the raw and the
disclosed contract once; every reply is then replayed on raw, nested, ssh (a
real SSH client against the embedded server on 127.0.0.1), escaped and
tempscript, and on two deployment paths, docker-sh and shlex-sh, with raw@dash
(their final shell) as their baseline. The report shows the decomposition: the reference agent's matched
score is perfect although the nested path alone costs it most of its passes.
"""

from __future__ import annotations

from pathlib import Path

from tasks.load import suite

from ..campaign.jobs import cpu_count
from ..campaign.oneshot import Campaign
from ..campaign.work import Plan, Progress
from ..adapters.providers.factory import make_provider

AGENTS = ("reference", "habits")
CONTRACTS = ["raw", "disclosed"]
TRANSPORTS = ["raw", "nested", "ssh", "escaped", "tempscript", "raw@dash", "docker-sh", "shlex-sh"]
"""The paper's transports, then a few deployment paths with their baseline: docker-sh and shlex-sh end in
dash, so raw@dash is what they are compared with."""


async def run_demo(out: Path, progress: Progress | None = None, transports: list[str] | None = None,
                   jobs: int | None = None) -> list[str]:
    """Run both agents into ``out``, ``jobs`` executions at once (default: the CPU count); returns the errors
    (empty when all went through)."""
    errors: list[str] = []
    for agent in AGENTS:
        plan = Plan(tasks=list(suite()), contracts=CONTRACTS, transports=transports or TRANSPORTS,
                    exec_concurrency=jobs or cpu_count())
        outcome = await Campaign(make_provider(agent), plan, out, progress).run()
        errors += outcome.errors
    return errors
