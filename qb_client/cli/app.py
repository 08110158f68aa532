"""The ``quotebench`` Typer app and its global options; commands live in the other modules of :mod:`qb_client.cli`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..console import fail

# -h is --help on every command (click passes help_option_names down to the subcommands' contexts)
CONTEXT = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, context_settings=CONTEXT,
                  help="QuoteBench: how command paths damage agents' shell commands, and how models compensate. "
                       "Output files and directories: missing directories on the way are created.")
tasks_app = typer.Typer(no_args_is_help=True, context_settings=CONTEXT, help="The 56-task suite.")
transports_app = typer.Typer(no_args_is_help=True, context_settings=CONTEXT, help="The transports a command can take.")
app.add_typer(tasks_app, name="tasks")
app.add_typer(transports_app, name="transports")

JSON_OPT = typer.Option(False, "--json", help="Print one JSON document on stdout.")


def version() -> str:
    """The installed distribution's version (the source tree's when run from a checkout without install)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("quotebench")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _print_version(value: bool) -> None:
    if value:
        print(f"quotebench {version()}")
        raise typer.Exit(0)


@app.callback()
def global_options(
    ssh_target: Optional[str] = typer.Option(None, "--ssh-target", metavar="USER@HOST:PORT",
                                             help="Send the ssh transport to this sshd instead of the embedded server."),
    ssh_key: Optional[Path] = typer.Option(None, "--ssh-key", help="Private key for --ssh-target."),
    _version: bool = typer.Option(False, "--version", "-V", is_eager=True, expose_value=True, callback=_print_version,
                                  help="Print the version and exit."),
    memory: Optional[str] = typer.Option(None, "--memory", metavar="SIZE",
                                         help="Memory cap per sandboxed run (default 1G; also QB_MEMORY)."),
    disk: Optional[str] = typer.Option(None, "--disk", metavar="SIZE",
                                       help="Disk cap per sandbox, as root (default 1G; also QB_DISK)."),
) -> None:
    """Options that apply to every command (given before it: quotebench --ssh-target ... exec ...)."""
    if memory is not None or disk is not None:
        from transports.sandbox import parse_size, set_default_limits

        try:
            set_default_limits(memory=parse_size(memory, "--memory") if memory is not None else None,
                               disk=parse_size(disk, "--disk") if disk is not None else None)
        except ValueError as e:
            fail(str(e))
    if ssh_target is None and ssh_key is None:
        return
    from transports.ssh import configure

    try:
        configure(ssh_target, str(ssh_key) if ssh_key else None)
    except ValueError as e:
        fail(str(e))
