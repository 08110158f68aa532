"""Commands on the suite: tasks list/show/check/generate, transports list (exec is in exec_command)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import anyio
import typer
from rich.text import Text

from tasks.load import get_task, select, suite

from .app import JSON_OPT, app, tasks_app, transports_app
from .options import SUITE_OPT, USERLAND_OPT, apply_suite, apply_userland
from ..console import err, fail, human, make_dirs, out, print_json, safe, safe_text


# ---------------------------------------------------------------- tasks


@tasks_app.command("list")
def tasks_list(as_json: bool = JSON_OPT, suite_opt: str = SUITE_OPT) -> None:
    """Every task: its id, operation and payload (with --json: id, family, tier, instruction)."""
    apply_suite(suite_opt)
    ts = suite()
    if as_json:
        print_json([{"id": t.id, "family": t.family, "tier": t.tier, "instruction": t.instruction} for t in ts])
        return
    from rich.table import Table

    table = Table("id", "operation", "payload", title=f"{len(ts)} tasks (suite {safe(ts[0].suite)})")
    for t in ts:
        table.add_row(safe(t.id), safe(t.operation),
                      Text(safe(", ".join(f"{k}={' '.join(human(v).split())}" for k, v in t.payload.items())),
                           overflow="ellipsis", no_wrap=True))
    out.print(table)


@tasks_app.command("show")
def tasks_show(task_id: str = typer.Argument(..., metavar="ID"), as_json: bool = JSON_OPT,
               suite_opt: str = SUITE_OPT) -> None:
    """One task whole: instruction, payload, fixture, checks, reference solutions."""
    apply_suite(suite_opt)
    t = get_task(task_id)
    doc = {
        "id": t.id, "suite": t.suite, "family": t.family, "tier": t.tier, "operation": t.operation, "instruction": t.instruction,
        "payload": t.payload,
        "fixture": [{"path": f.path, "mode": f"{f.mode:o}", "source": f.source, "bytes": len(f.text or "")}
                    for f in t.fixture.files] + [{"dir": d} for d in t.fixture.dirs]
                   + ([{"git": t.fixture.git.model_dump()}] if t.fixture.git else []),
        "checks": [c.model_dump() for c in t.checks],
        "solution": t.solution, "solution_disclosed": t.solution_disclosed,
    }
    if as_json:
        print_json(doc)
        return
    from rich.panel import Panel
    from rich.syntax import Syntax

    out.print(Panel(safe_text(t.instruction), title=safe_text(f"{t.id}: {t.operation}")))
    out.print(Text("payload", style="bold"))
    out.print(_fields(doc["payload"]))
    out.print(Text("fixture", style="bold"))
    for f in t.fixture.files:
        out.print(safe_text(f"  {f.path}  (mode {f.mode:o}, {len(f.text or '')} bytes"
                            + (f", from {f.source})" if f.source else ")")))
    for d in t.fixture.dirs:
        out.print(safe_text(f"  {d}/  (directory)"))
    if t.fixture.git:
        out.print(Text("  git repository:"))
        out.print(_fields(t.fixture.git.model_dump(), indent=4))
    out.print(Text("checks", style="bold"))
    for c in doc["checks"]:
        c = dict(c)
        out.print(safe_text(f"  - {c.pop('kind', 'check')}"))
        out.print(_fields(c, indent=4))
    out.print(Text("solution", style="bold") + Text(" (bash -c R)"))
    out.print(Syntax(safe(t.solution), "bash", word_wrap=True))
    out.print(Text("solution_disclosed", style="bold") + Text(' (bash -c "R")'))
    out.print(Syntax(safe(t.solution_disclosed), "bash", word_wrap=True))


def _fields(fields: dict, indent: int = 2) -> Text:
    """``key: value`` lines as a reader reads them (none, yes/no, text as it is, JSON for structures);
    a multi-line value starts on its own line, indented."""
    text = Text()
    pad = " " * indent
    for key, value in fields.items():
        shown = human(value)
        text.append(f"{pad}{safe(str(key))}:", style="bold")
        if "\n" in shown:
            text.append("\n" + "\n".join(pad + "  " + line for line in shown.split("\n")))
        else:
            text.append(" " + shown)
        text.append("\n")
    text.rstrip()
    return text


@tasks_app.command("check")
def tasks_check(as_json: bool = JSON_OPT,
                tasks: Optional[str] = typer.Option(None, "--tasks", help="Glob(s) of task ids, comma-separated."),
                suite_opt: str = SUITE_OPT, userland: str = USERLAND_OPT) -> None:
    """Every task's reference solutions on their paths, and every near-miss state rejected."""
    from ..ops.suite_check import check_suite

    suite_id = apply_suite(suite_opt)
    apply_userland(userland)
    chosen = select(tasks)
    if as_json:
        results = anyio.run(check_suite, chosen)
    else:
        from rich.progress import Progress

        with Progress(console=err, transient=True) as progress:
            bar = progress.add_task("checking tasks", total=len(chosen))
            results = anyio.run(lambda: check_suite(chosen, on_done=lambda _: progress.advance(bar)))
    good = sum(r.ok for r in results)
    nm = sum(r.near_misses for r in results)
    nm_ok = sum(r.near_misses_rejected for r in results)
    if as_json:
        print_json({"suite": suite_id, "userland": userland, "tasks": len(results), "ok": good, "near_misses": nm, "near_misses_rejected": nm_ok,
                    "results": [r.as_json() for r in results]})
    else:
        from rich.table import Table

        table = Table("task", "solution/raw", "disclosed/nested", "fixture fails", "near misses rejected")
        mark = lambda b: Text("yes", style="green") if b else Text("NO", style="red")  # noqa: E731
        for r in results:
            table.add_row(r.task_id, mark(r.solution), mark(r.solution_disclosed), mark(r.fixture_rejected),
                          f"{r.near_misses_rejected}/{r.near_misses}" if r.near_misses else "-")
        out.print(table)
        for r in results:
            for p in r.problems:
                out.print(Text(r.task_id, style="red") + safe_text(f": {p}"))
        out.print(f"{good}/{len(results)} tasks hold; {nm_ok}/{nm} near misses rejected "
                  f"(suite {safe(suite_id)}, userland {userland})")
    raise typer.Exit(0 if good == len(results) else 1)


@tasks_app.command("generate")
def tasks_generate(
    seed: str = typer.Option(..., "--seed", help="The secret that draws the split (any text). Keep it private."),
    out_dir: Path = typer.Option(Path("quotebench-private"), "--out",
                                 help="Directory for the suite (made with any missing parents; must be "
                                      "empty or hold this same suite). The default is in .gitignore."),
    as_json: bool = JSON_OPT,
) -> None:
    """A held-out payload split: the same families, fixtures and validators, new payloads from the seed."""
    from tasks.generate import GENERATOR_VERSION, OutputError, write

    make_dirs("--out", out_dir.parent)
    try:
        suite_id = write(seed, out_dir)
    except OutputError as e:
        fail(str(e))
    except OSError as e:
        fail(f"--out {safe(str(out_dir))}: cannot write: {e.strerror or e}")
    if as_json:
        print_json({"suite": suite_id, "out": str(out_dir), "generator_version": GENERATOR_VERSION})
        return
    out.print(safe_text(f"wrote suite {suite_id} (56 tasks) to {out_dir}"))
    err.print(safe_text(f"check it: quotebench tasks check --suite {out_dir}; never commit it (the seed and the "
                        "files are the secret)"))


# ---------------------------------------------------------------- transports


@transports_app.command("list")
def transports_list(as_json: bool = JSON_OPT,
                    markdown: bool = typer.Option(False, "--markdown", help="The deployment paths as the README's Markdown table.")) -> None:
    """Each transport and deployment path: the boundary it adds, its source, component and final shell."""
    from transports.registry import catalogue, catalogue_markdown

    if markdown:
        print(catalogue_markdown(), end="")
        return
    rows = catalogue()
    if as_json:
        print_json(rows)
        return
    from rich.table import Table

    table = Table("transport", "boundary it adds", "final shell", "component", "source", show_lines=True)
    for r in rows:
        name = r["name"] + (f" (fixes {r['fixes']})" if r.get("fixes") else "")
        table.add_row(safe(name), safe(r["boundary"] or ""), safe(r["shell"] or ""), safe(r["component"] or ""),
                      safe(r["source"] or ""))
    out.print(table)
    out.print("Compose with +, outermost first (json-naive+ssh decodes naive JSON, then sends over ssh); "
              "name a final shell with @ (raw@dash, nested@zsh).")
