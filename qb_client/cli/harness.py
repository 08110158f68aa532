"""``quotebench harness audit NAME``: what a real agent harness does to every command, measured by probes sent
through its real route (:mod:`qb_client.ops.audit`). A table on the terminal; ``--json`` the document;
``--markdown`` the table of docs/harnesses.md; ``--from FILE`` shows a saved document instead of running."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .app import CONTEXT, JSON_OPT, app
from ..console import err, fail, out, print_json

harness_app = typer.Typer(no_args_is_help=True, context_settings=CONTEXT,
                          help="Real agent harnesses (the harness routes): what each does to a command.")
app.add_typer(harness_app, name="harness")


MAX_AUDIT_FILE = 16 << 20
"""The largest ``--from`` document read (checked before reading); a committed audit is about 20 KB."""


def read_audit_file(path: Path) -> bytes:
    """The ``--from`` document, read as every input file is (:func:`tasks.safefs.read_input`): a regular file
    (a FIFO would block, ``/dev/zero`` never ends; a symlink the user named is followed to one) of at most
    :data:`MAX_AUDIT_FILE` bytes, its size checked before anything is read; else one line naming it, exit 2."""
    from tasks.safefs import UnsafeRead, read_input

    try:
        return read_input(path, MAX_AUDIT_FILE)
    except UnsafeRead as e:
        fail(str(e))
    except FileNotFoundError:
        fail(f"{path}: no such file")
    except OSError as e:
        fail(f"{path}: cannot read the audit document: {e.strerror or e}")


@harness_app.command("audit")
def audit_cmd(
    name: str = typer.Argument(..., metavar="NAME", help="A harness route (quotebench transports list shows them)."),
    as_json: bool = JSON_OPT,
    as_markdown: bool = typer.Option(False, "--markdown", help="Print the Markdown table of docs/harnesses.md."),
    source: Optional[Path] = typer.Option(None, "--from", metavar="FILE",
                                          help="Show a saved audit (--json output) instead of running one."),
    timeout: float = typer.Option(120.0, "--timeout", min=1.0, help="Seconds per probe run (the sandbox's limit)."),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="Probe runs at once (each in its own sandbox)."),
) -> None:
    """Send probe commands through harness NAME and through raw on the same final shell, and show what the
    harness changes: its final shell and how it is started, rc files, shadowing functions, environment, cwd,
    stdin and ttys, what the model is told of an exit status and a long output, set -e, trimming, refused
    constructs. Each run costs what a harness run costs (1-7 s; mini-swe-agent more when loaded). Exit 0;
    2 for an unknown NAME or a bad --from file; 1 when the harness cannot run here."""
    from transports.harnesses import HARNESSES

    if name not in HARNESSES:
        fail(f"unknown harness '{name}' (known: {', '.join(HARNESSES)})")
    import anyio
    from pydantic import ValidationError

    from ..ops.audit.measure import audit
    from ..ops.audit.route import AuditError
    from ..ops.audit.model import Audit
    from ..ops.audit.render import markdown, runs_table, table

    if source is not None:
        data = read_audit_file(source)
        try:
            doc = Audit.model_validate_json(data)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(document)"
            fail(f"{source}: not an audit document: field '{where}': {first['msg']}")
        except (OSError, ValueError) as e:
            fail(f"{source}: cannot read the audit document: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
        if doc.harness != name:
            fail(f"{source}: field 'harness' is '{doc.harness}', not '{name}'")
    else:
        try:
            doc = anyio.run(lambda: audit(name, timeout_s=timeout, concurrency=concurrency))
        except AuditError as e:
            err.print(f"quotebench: error: {e}")
            raise typer.Exit(1)
    if as_json:
        print_json(doc.model_dump(mode="json"))
    elif as_markdown:
        print(markdown(doc), end="")
    else:
        out.print(table(doc))
        out.print(runs_table(doc))
