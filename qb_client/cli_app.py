"""The ``quotebench`` Typer app and its global options; commands live in the cli_* modules."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .console import fail

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="QuoteBench: how command paths damage agents' shell commands, and how models compensate.")
tasks_app = typer.Typer(no_args_is_help=True, help="The 56-task suite.")
transports_app = typer.Typer(no_args_is_help=True, help="The transports a command can take.")
app.add_typer(tasks_app, name="tasks")
app.add_typer(transports_app, name="transports")

JSON_OPT = typer.Option(False, "--json", help="Print one JSON document on stdout.")

@app.callback()
def global_options(
    ssh_target: Optional[str] = typer.Option(None, "--ssh-target", metavar="USER@HOST:PORT",
                                             help="Send the ssh transport to this sshd instead of the embedded server."),
    ssh_key: Optional[Path] = typer.Option(None, "--ssh-key", help="Private key for --ssh-target."),
) -> None:
    """Options that apply to every command (given before it: quotebench --ssh-target ... exec ...)."""
    if ssh_target is None and ssh_key is None:
        return
    from transports.ssh import configure

    try:
        configure(ssh_target, str(ssh_key) if ssh_key else None)
    except ValueError as e:
        fail(str(e))
