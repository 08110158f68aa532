"""``--suite`` and ``--userland``: the two environment axes every command that takes tasks accepts.

Both are set once per process before anything loads a task or builds a sandbox
(like ``--memory``): ``--suite`` makes a directory of family files the suite that
every task lookup uses (:func:`tasks.load.use_suite`), ``--userland`` the userland
every sandbox gets (:func:`transports.sandbox.set_default_userland`). Records
carry both (``suite``, ``userland``), and the report never pools them.
"""

from __future__ import annotations

from typing import Any

import typer

from ..console import fail

SUITE_OPT = typer.Option("public", "--suite", metavar="public|DIR",
                         help="The task suite: the public one, or a directory written by `tasks generate`.")
USERLAND_OPT = typer.Option("gnu", "--userland", metavar="gnu|busybox|uutils",
                            help="Whose coreutils, sed, grep, find ... commands get (busybox: Debian's busybox applets; "
                                 "uutils: the Rust coreutils, with GNU sed, grep, find).")


ALLOW_SUITE_MISMATCH_OPT = typer.Option(
    False, "--allow-suite-mismatch",
    help="Score a reply store's replies made on another suite (its lines' 'suite') against the active --suite "
         "anyway; without it such a store is refused, naming both suite ids.")


def apply_suite(value: str) -> str:
    """Make ``value`` the active suite; its id. A bad directory or family file is one line, exit 2."""
    from tasks.load import select_suite

    try:
        return select_suite(value)
    except ValueError as e:
        fail(str(e))


def apply_userland(value: str) -> str:
    from transports.sandbox import set_default_userland
    from transports.sandbox.userland import UserlandError

    try:
        set_default_userland(value)
    except UserlandError as e:
        fail(f"--userland: {e}")
    return value


TIMEOUT_OPT = typer.Option(None, "--timeout", metavar="SECONDS",
                           help="Wall clock per command in its sandbox (default 10).")


def apply_timeout(seconds: float | None, option: str = "--timeout") -> None:
    """Give every command this process runs ``seconds`` of wall clock (:mod:`qb_client.campaign.limits`)."""
    from ..campaign.limits import set_command_timeout

    try:
        set_command_timeout(seconds, option)
    except ValueError as e:
        fail(str(e))


JOBS_OPT = typer.Option(None, "--jobs", "-j", min=1, metavar="N",
                        help="Executions at once (default: the CPUs this process may use). The records are the same "
                             "whatever N; each says the N it was made under (docs/spec.md#concurrency).")


def jobs_alias(name: str) -> Any:
    """An older name of ``--jobs``, kept working for scripts and not shown in ``-h``."""
    return typer.Option(None, name, min=1, hidden=True)


def apply_jobs(jobs: int | None, older: int | None = None, older_name: str = "") -> int:
    """The executions at once: ``--jobs``, else its older name, else the CPU count; both given and different
    is bad input (one line)."""
    from ..campaign.jobs import cpu_count

    if jobs is not None and older is not None and jobs != older:
        fail(f"--jobs {jobs} and {older_name} {older} disagree: {older_name} is the older name of --jobs; give one")
    return jobs or older or cpu_count()
