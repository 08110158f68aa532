"""``quotebench import-inspect``: Inspect AI eval logs into a reply store and records (the ``inspect`` extra)."""

from __future__ import annotations

from pathlib import Path

import typer

from .app import app
from ..console import err, fail, safe


@app.command("import-inspect")
def import_inspect_cmd(
    logs: list[Path] = typer.Argument(..., metavar="LOG...", help="Inspect eval logs of quotebench/quotebench."),
    out: Path = typer.Option(..., "--out", help="Directory for replies.jsonl and results.jsonl (made with any missing parents)."),
) -> None:
    """Turn Inspect eval logs into DIR/replies.jsonl and DIR/results.jsonl, for `quotebench report`."""
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        fail("import-inspect needs Inspect AI: pip install 'quotebench[inspect]'")
    from .runs import check_out_dir
    from ..adapters.inspect_ext.importer import import_logs, summary

    check_out_dir(out)
    written = import_logs(logs, out)
    for note in written.notes:
        err.print(f"quotebench: note: {safe(note)}")
    err.print(safe(summary(written, out)))
