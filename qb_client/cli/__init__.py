"""The ``quotebench`` command line (SPEC.md, "Command line").

Exit status: 0 success, 1 a check or task failed, 2 bad input. Bad input is
one line on stderr naming the file and field, never a traceback, also when it
surfaces inside an anyio task group (a group of one exception is unwrapped). With
``--json`` stdout carries exactly one JSON document. The commands are
registered on :data:`qb_client.cli.app.app` by the modules of this package imported here:
:mod:`.components` (doctor, components install), :mod:`.exec_command` (exec),
:mod:`.import_inspect`, :mod:`.harbor` (export harbor, import-atif), :mod:`.runs` (replay, run, demo), :mod:`.suite` (tasks,
transports list), :mod:`.around_runs` (serve, report, bench), :mod:`.harness` (harness audit), :mod:`.lint` (lint); :mod:`.app`,
:mod:`.options`, :mod:`.help` and :mod:`.run_checks` are what they share.

May import: everything (``tasks``, ``transports``, ``qb_server`` and every other
room of ``qb_client``); nothing imports it but ``python -m qb_client`` and the
``quotebench`` entry point (``qb_client.cli:main``). Commands import their
machinery inside the command, so ``quotebench --help`` stays fast.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import typer
import typer.main

from tasks.load import TaskFileError, UnknownTaskError
from transports.registry import UnknownTransportError
from transports.sandbox import SandboxError
from transports.results.store import StoreError

# they register the commands; the order of this import is the order of ``--help``
from . import components, exec_command, import_inspect, runs, suite, around_runs  # noqa: F401  # isort: skip
from . import harness  # noqa: F401  # isort: skip  (harness audit)
from . import harbor  # noqa: F401  # isort: skip  (export harbor, import-atif)
from . import harness_run  # noqa: F401  # isort: skip  (run --harness, harness-report)
from . import lint  # noqa: F401  # isort: skip  (lint)
from .app import app
from .help import tidy
from ..console import BadInput, err, one_line

KNOWN_ERRORS = (BadInput, TaskFileError, UnknownTaskError, UnknownTransportError, StoreError, SandboxError)


LOADED_ERRORS = (("qb_client.report.load", "ReportInputError"), ("qb_client.replies.contracts", "UnknownContractError"),
                 ("qb_client.campaign.native", "NativeError"))
"""Bad-input classes of modules a command imports only when it needs them: one whose module was never
imported cannot have been raised, so the error path names only those loaded and imports nothing (importing
them all cost 2.5 s of CPU on every one-line error: scipy, matplotlib, the provider SDKs)."""


def _known_errors() -> tuple[type[BaseException], ...]:
    loaded = (getattr(sys.modules.get(module), name, None) for module, name in LOADED_ERRORS)
    return (*KNOWN_ERRORS, *(c for c in loaded if isinstance(c, type)))


def _unwrap(e: BaseException) -> BaseException:
    """The one exception inside (nested) single-member exception groups; ``e`` itself otherwise."""
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    return e


# typer 0.29 carries its own copy of click; TyperException is the public base of its parsing errors
PARSE_ERROR: type[Exception] = getattr(typer, "TyperException", None) or __import__("click").ClickException


GLOBAL_OPTIONS = ("--memory", "--disk", "--ssh-target", "--ssh-key")
"""The options of :func:`qb_client.cli.app.global_options`: given after a command, they are not its own."""


def _usage_error(e: Exception) -> NoReturn:
    """A typer/click parsing error as one line on stderr, naming the option, with where to read more; exit 2.

    ``--help`` output is untouched; so is the help a command group prints when given no command."""
    code = getattr(e, "exit_code", 2)
    if type(e).__name__ == "NoArgsIsHelpError":
        sys.exit(code)  # the help was printed while the error was built
    ctx = getattr(e, "ctx", None)
    hint = f" (see {ctx.command_path} --help)" if ctx is not None else ""
    text = e.format_message() if hasattr(e, "format_message") else str(e)
    if (option := getattr(e, "option_name", None)) in GLOBAL_OPTIONS and ctx is not None and ctx.parent is not None:
        hint = f" ({option} is a global option: give it before the command, quotebench {option} VALUE " \
               f"{ctx.command_path.partition(' ')[2]} ...)"
    err.print(f"quotebench: error: {one_line(text)}{hint}")
    sys.exit(code)


def main() -> None:
    try:
        try:
            code = tidy(typer.main.get_command(app))(prog_name="quotebench", standalone_mode=False)
        except BaseExceptionGroup as group:
            inner = _unwrap(group)
            if inner is group:
                raise
            raise inner from None
    except SystemExit:  # the normal way out; checked first so the error classes below load only on errors
        raise
    except PARSE_ERROR as e:
        _usage_error(e)
    except typer.Abort:  # end of input at a prompt
        err.print("quotebench: aborted")
        sys.exit(1)
    except _known_errors() as e:
        err.print(f"quotebench: error: {one_line(str(e))}")
        sys.exit(2)
    except KeyboardInterrupt:
        code = 130
    if code == 130:  # typer turns Ctrl-C inside a command into exit 130
        err.print("quotebench: interrupted; everything recorded so far is kept")
    sys.exit(code if isinstance(code, int) else 0)
