"""``--suite`` and ``--userland``: the two environment axes every command that takes tasks accepts.

Both are set once per process before anything loads a task or builds a sandbox
(like ``--memory``): ``--suite`` makes a directory of family files the suite that
every task lookup uses (:func:`tasks.load.use_suite`), ``--userland`` the userland
every sandbox gets (:func:`transports.sandbox.set_default_userland`). Records
carry both (``suite``, ``userland``), and the report never pools them.
"""

from __future__ import annotations

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
