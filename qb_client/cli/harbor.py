"""``quotebench export harbor`` and ``quotebench import-atif``: QuoteBench tasks into Harbor, Harbor's
trajectories back into a reply store (:mod:`qb_client.adapters.harbor`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .app import CONTEXT, app, version
from .options import SUITE_OPT, apply_suite
from ..console import check_output_file, err, safe

export_app = typer.Typer(no_args_is_help=True, context_settings=CONTEXT,
                         help="Write the suite's tasks in another harness's format.")
app.add_typer(export_app, name="export")


@export_app.command("harbor")
def export_harbor(
    out: Path = typer.Argument(..., metavar="DIR", help="A new or empty directory for the dataset."),
    suite_opt: str = SUITE_OPT,
) -> None:
    """The suite's tasks as a Harbor dataset: per task task.toml, instruction.md, environment/ (Dockerfile and
    the fixture), solution/ (the reference solution) and tests/ (QuoteBench's own validator on the final
    state). Run it with `harbor run -p DIR -a AGENT`."""
    from tasks.load import suite

    from ..adapters.harbor.export import export

    apply_suite(suite_opt)
    done = export(list(suite()), out, version())
    err.print(safe(f"exported {len(done.tasks)} tasks to {out} (validator sha256 {done.validator_sha256[:16]}); "
                   f"next: harbor run -p {out} -a AGENT"), soft_wrap=True)


@app.command("import-atif")
def import_atif_cmd(
    trajectories: list[Path] = typer.Argument(..., metavar="TRAJECTORY...",
                                              help="ATIF trajectory files, or directories holding trajectory.json "
                                                   "files (a Harbor job or trial directory)."),
    out: Path = typer.Option(..., "--out", help="The reply store (JSONL) to append to; made if missing."),
    task: Optional[str] = typer.Option(None, "--task", metavar="TASK_ID",
                                       help="The task whose fixture the commands are replayed on (default: the "
                                            "suite task whose instruction the trajectory's first user message holds)."),
    tool: Optional[list[str]] = typer.Option(None, "--tool", metavar="NAME",
                                             help="Another tool name whose command/cmd argument is a shell command."),
    suite_opt: str = SUITE_OPT,
) -> None:
    """The shell commands of ATIF trajectories (Harbor runs of any agent) as a reply store, for `quotebench
    replay`. Parsed with Harbor's own models; each reply keeps its provenance."""
    from tasks.load import get_task, suite

    from ..adapters.harbor.atif import import_atif, summary

    apply_suite(suite_opt)
    check_output_file("--out", out)
    given = get_task(task) if task is not None else None
    got = import_atif(trajectories, out, list(suite()), given, list(tool or []))
    for note in got.notes[:20]:
        err.print(f"quotebench: note: {safe(note)}", soft_wrap=True)
    if len(got.notes) > 20:
        err.print(f"quotebench: note: {len(got.notes) - 20} more calls left out", soft_wrap=True)
    err.print(safe(summary(got, out)), soft_wrap=True)
