"""How many executions run at once (``--jobs``), and what records say of it.

Why a default from the CPUs this process may use: an execution is a short chain of programs (the uid drop,
bwrap, the shell, the command), CPU-bound and isolated in its own sandbox, so as many at once as there are
CPUs keeps every one busy, and more only makes each run slower. The count is the one the scheduler lets
this process use (``os.process_cpu_count`` on Python 3.13+, else the affinity mask), not the machine's:
under ``taskset`` or a container's cpuset those differ.

Why a harness run's count is also held to the host's memory: a harness is a whole program (a 235 MB
native program, a Python interpreter with litellm) in a sandbox of ``--disk`` bytes and a command cap of
``--memory``; the rule of the server's host budget (:mod:`qb_server.budget`: open sandboxes x disk +
running commands x memory within half of the RAM by default) applies to a sweep's runs alike.

What a record says: ``jobs`` (the executions this invocation allowed at once) and ``cpus`` (the CPUs it
saw). Neither changes what a command received or its verdict (``tests/test_jobs.py`` pins that a replay
with ``--jobs 1`` and ``--jobs 4`` gives the same records); they explain its ``timing.exec_ms``, which
other runs on the same CPUs slow down. The report never pools or splits by them.
"""

from __future__ import annotations

import os
from typing import TypeVar

from transports.results.record import Record
from transports.sandbox import Limits

R = TypeVar("R", bound=Record)


def cpu_count() -> int:
    """The CPUs this process may run on (at least 1)."""
    counted = getattr(os, "process_cpu_count", None)  # Python 3.13+: the affinity mask, and -X cpu_count
    if counted is not None:
        return max(1, counted() or 1)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on this platform
        return max(1, os.cpu_count() or 1)


def check_jobs(jobs: int, option: str = "--jobs") -> int:
    """A positive number of executions at once; ValueError (one line) otherwise."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"{option} must be a positive number of executions at once, not {jobs}")
    return jobs


def memory_jobs(jobs: int, limits: Limits | None = None, runs: int = 1, budget: int | None = None) -> int:
    """``jobs``, held to what the host budget holds of runs with these limits: each run keeps one sandbox
    (``disk``) and ``runs`` running programs (``memory`` each) for its whole life; at least 1."""
    from qb_server.budget import default_budget

    caps = limits or Limits()
    total = default_budget() if budget is None else budget
    return max(1, min(jobs, total // (caps.disk + caps.memory * runs)))


def stamped(record: R, jobs: int) -> R:
    """``record`` with the concurrency it was made under (``jobs``, ``cpus``)."""
    return record.model_copy(update={"jobs": jobs, "cpus": cpu_count()})
