"""The ``quotebench`` command line (SPEC.md, "Command line").

Exit status: 0 success, 1 a check or task failed, 2 bad input. Bad input is
one line on stderr naming the file and field, never a traceback, also when it
surfaces inside an anyio task group (a group of one exception is unwrapped). With
``--json`` stdout carries exactly one JSON document. The commands are
registered on :data:`qb_client.cli_app.app` by the cli_* modules imported here.
"""

from __future__ import annotations

import sys

from tasks.load import TaskFileError, UnknownTaskError
from transports.registry import UnknownTransportError
from transports.sandbox import SandboxError
from transports.store import StoreError

from . import cli_runs, cli_suite, cli_tools  # noqa: F401  (they register the commands)
from .cli_app import app
from .console import BadInput, err

KNOWN_ERRORS = (BadInput, TaskFileError, UnknownTaskError, UnknownTransportError, StoreError, SandboxError)


def _known_errors() -> tuple[type[BaseException], ...]:
    from .contracts import UnknownContractError
    from .native import NativeError
    from .report import ReportInputError

    return (*KNOWN_ERRORS, ReportInputError, UnknownContractError, NativeError)


def _unwrap(e: BaseException) -> BaseException:
    """The one exception inside (nested) single-member exception groups; ``e`` itself otherwise."""
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    return e


def main() -> None:
    try:
        try:
            app()
        except BaseExceptionGroup as group:
            inner = _unwrap(group)
            if inner is group:
                raise
            raise inner from None
    except SystemExit:  # the normal way out; checked first so the error classes below load only on errors
        raise
    except _known_errors() as e:
        err.print(f"quotebench: error: {' '.join(str(e).splitlines())}", markup=False)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("quotebench: interrupted; everything recorded so far is kept", markup=False)
        sys.exit(130)
