"""The ``quotebench`` command line (SPEC.md, "Command line").

Exit status: 0 success, 1 a check or task failed, 2 bad input. Bad input is
one line on stderr naming the file and field, never a traceback. With
``--json`` stdout carries exactly one JSON document.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import anyio
import typer

from tasks.load import TaskFileError, UnknownTaskError, get_task, select, suite
from transports.registry import UnknownTransportError
from transports.sandbox import SandboxError
from transports.store import StoreError

from .console import BadInput, err, fail, out, print_json, record_table

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="QuoteBench: how command paths damage agents' shell commands, and how models compensate.")
tasks_app = typer.Typer(no_args_is_help=True, help="The 56-task suite.")
transports_app = typer.Typer(no_args_is_help=True, help="The transports a command can take.")
app.add_typer(tasks_app, name="tasks")
app.add_typer(transports_app, name="transports")

JSON_OPT = typer.Option(False, "--json", help="Print one JSON document on stdout.")


# ---------------------------------------------------------------- tasks


@tasks_app.command("list")
def tasks_list(as_json: bool = JSON_OPT) -> None:
    """Every task: id, family, tier, instruction."""
    ts = suite()
    if as_json:
        print_json([{"id": t.id, "family": t.family, "tier": t.tier, "instruction": t.instruction} for t in ts])
        return
    from rich.table import Table

    table = Table("id", "operation", "payload", title=f"{len(ts)} tasks")
    for t in ts:
        table.add_row(t.id, t.operation, ", ".join(f"{k}={v!r}" for k, v in t.payload.items())[:90])
    out.print(table)


@tasks_app.command("show")
def tasks_show(task_id: str = typer.Argument(..., metavar="ID"), as_json: bool = JSON_OPT) -> None:
    """One task whole: instruction, payload, fixture, checks, reference solutions."""
    t = get_task(task_id)
    doc = {
        "id": t.id, "family": t.family, "tier": t.tier, "operation": t.operation, "instruction": t.instruction,
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

    out.print(Panel(t.instruction, title=f"{t.id}: {t.operation}"))
    out.print("[bold]payload[/]", t.payload)
    out.print("[bold]fixture[/]", doc["fixture"])
    out.print("[bold]checks[/]")
    for c in doc["checks"]:
        out.print("  ", c)
    out.print("[bold]solution[/] (bash -c R)")
    out.print(Syntax(t.solution, "bash", word_wrap=True))
    out.print('[bold]solution_disclosed[/] (bash -c "R")')
    out.print(Syntax(t.solution_disclosed, "bash", word_wrap=True))


@tasks_app.command("check")
def tasks_check(as_json: bool = JSON_OPT,
                tasks: Optional[str] = typer.Option(None, "--tasks", help="Glob(s) of task ids, comma-separated.")) -> None:
    """Every task's reference solutions on their paths, and every near-miss state rejected."""
    from .checking import check_suite

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
        print_json({"tasks": len(results), "ok": good, "near_misses": nm, "near_misses_rejected": nm_ok,
                    "results": [r.as_json() for r in results]})
    else:
        from rich.table import Table

        table = Table("task", "solution/raw", "disclosed/nested", "fixture fails", "near misses rejected")
        mark = lambda b: "[green]yes[/]" if b else "[red]NO[/]"  # noqa: E731
        for r in results:
            table.add_row(r.task_id, mark(r.solution), mark(r.solution_disclosed), mark(r.fixture_rejected),
                          f"{r.near_misses_rejected}/{r.near_misses}" if r.near_misses else "-")
        out.print(table)
        for r in results:
            for p in r.problems:
                out.print(f"[red]{r.task_id}[/]: {p}")
        out.print(f"{good}/{len(results)} tasks hold; {nm_ok}/{nm} near misses rejected")
    raise typer.Exit(0 if good == len(results) else 1)


# ---------------------------------------------------------------- transports


@transports_app.command("list")
def transports_list(as_json: bool = JSON_OPT) -> None:
    """Each transport, with the boundary it adds."""
    from transports.registry import ORDER, get

    rows = []
    for name in ORDER:
        try:
            boundary = get(name).boundary or "none: the direct path"
        except Exception as e:  # e.g. ssh without asyncssh: still list it
            boundary = f"(unavailable: {e})"
        rows.append({"name": name, "boundary": boundary})
    if as_json:
        print_json(rows)
        return
    from rich.table import Table

    table = Table("transport", "boundary it adds")
    for r in rows:
        table.add_row(r["name"], r["boundary"])
    out.print(table)
    out.print("Compose with +, outermost first: json-naive+ssh decodes naive JSON, then sends over ssh.")


# ---------------------------------------------------------------- exec


def read_command_file(path: Path) -> str:
    """The file verbatim (no stripping); invalid UTF-8 or a NUL byte is bad input."""
    try:
        data = path.read_bytes()
    except OSError as e:
        fail(f"{path}: cannot read: {e.strerror or e}")
    nul = data.find(b"\0")
    if nul >= 0:
        fail(f"{path}: contains a NUL byte at offset {nul}; no shell argument can carry it")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        fail(f"{path}: not valid UTF-8 (byte {e.start}: {data[e.start:e.start + 1]!r})")


@app.command("exec")
def exec_cmd(
    task: str = typer.Option(..., "--task", help="Task id, e.g. file-write/control."),
    transport: str = typer.Option(..., "--transport", help="Transport name (see `transports list`)."),
    command: Optional[str] = typer.Option(None, "--command", help="The command R."),
    command_file: Optional[Path] = typer.Option(None, "--command-file", help="Read R from this file, verbatim."),
    as_json: bool = JSON_OPT,
) -> None:
    """One command through one transport in a fresh sandbox of that task; prints one record."""
    from transports.execute import execute
    from transports.registry import validate_name

    if (command is None) == (command_file is None):
        fail("give exactly one of --command, --command-file")
    if command_file is not None:
        command = read_command_file(command_file)
    t = get_task(task)
    validate_name(transport)
    record = anyio.run(lambda: execute(t, transport, command))
    doc = record.model_dump(mode="json")
    if as_json:
        print_json(doc)
    else:
        out.print(record_table(doc))
    raise typer.Exit(0 if record.verdict.passed else 1)


# ---------------------------------------------------------------- replay


def progress_bar(total: int, label: str):
    """A rich progress bar with an ETA on stderr (stdout stays clean for --json)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=err, transient=False)
    return progress, progress.add_task(label, total=total)


def summarize(records: list[dict]) -> dict:
    """Pass counts per (contract, transport) of freshly written records."""
    cells: dict[str, dict[str, int]] = {}
    for r in records:
        key = f"{r['contract']} x {r['transport']}"
        c = cells.setdefault(key, {"passed": 0, "n": 0, "damaged": 0, "transport_errors": 0})
        c["n"] += 1
        c["passed"] += bool(r["verdict"]["passed"])
        c["damaged"] += bool(r["damaged"])
        c["transport_errors"] += bool(r.get("transport_error"))
    return cells


def print_summary(cells: dict, title: str) -> None:
    from rich.table import Table

    table = Table("contract x transport", "passed", "n", "rate", "damaged", "transport errors", title=title)
    for key, c in sorted(cells.items()):
        table.add_row(key, str(c["passed"]), str(c["n"]), f"{100 * c['passed'] / c['n']:.1f}%" if c["n"] else "-",
                      str(c["damaged"]), str(c["transport_errors"]))
    out.print(table)


@app.command("replay")
def replay_cmd(
    replies: Path = typer.Argument(..., metavar="REPLIES.jsonl", help="Reply store: JSONL with task_id and command or reply."),
    transports: str = typer.Option("raw,nested", "--transports", help="Comma-separated transport names."),
    out_path: Path = typer.Option(..., "--out", help="Results JSONL (appended; a rerun completes what is missing)."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", min=1, help="Parallel executions (default: cores)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Fixed-reply replay: every stored reply through every transport."""
    import time

    from transports.registry import parse_list
    from transports.store import read_jsonl

    from .replay import done_keys, load_replies, replay

    names = parse_list(transports)
    stored = load_replies(replies)
    before = len(done_keys(out_path))
    total = len(stored) * len(names)
    fresh: list[dict] = []
    start = time.perf_counter()
    progress, bar = progress_bar(total, "replay")
    with progress:
        progress.update(bar, completed=min(before, total))
        n = anyio.run(lambda: replay(stored, names, out_path, concurrency=concurrency,
                                     on_record=lambda r: (fresh.append(r.model_dump(mode="json")), progress.advance(bar))))
    seconds = time.perf_counter() - start
    keys = {(r.reply_id, t) for r in stored for t in names}
    recorded = [r for r in read_jsonl(out_path) if (r.get("reply_id"), r.get("transport")) in keys]
    doc = {"replies": len(stored), "transports": names, "executed_now": n, "already_recorded": total - n,
           "seconds": round(seconds, 3), "out": str(out_path), "cells": summarize(recorded)}
    if as_json:
        print_json(doc)
    else:
        print_summary(doc["cells"], f"replay of {len(stored)} replies x {len(names)} transports -> {out_path}")
        err.print(f"executed {n} now, {total - n} were already recorded; {seconds:.2f} s")


# ---------------------------------------------------------------- report


@app.command("report")
def report_cmd(
    results: list[Path] = typer.Argument(..., metavar="RESULTS.jsonl...", help="One or more results files."),
    html: Optional[Path] = typer.Option(None, "--html", help="Also write one self-contained HTML page."),
    as_json: bool = JSON_OPT,
) -> None:
    """The decomposition (damage, compensation, matched gap) and every statistic of SPEC.md."""
    from .report import report_command

    raise typer.Exit(report_command([str(p) for p in results], str(html) if html else None, as_json))


# ---------------------------------------------------------------- entry point

KNOWN_ERRORS = (BadInput, TaskFileError, UnknownTaskError, UnknownTransportError, StoreError, SandboxError)


def _known_errors() -> tuple[type[BaseException], ...]:
    from .report import ReportInputError

    return (*KNOWN_ERRORS, ReportInputError)


def main() -> None:
    try:
        app()
    except _known_errors() as e:
        err.print(f"quotebench: error: {e}", markup=False)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("quotebench: interrupted; everything recorded so far is kept", markup=False)
        sys.exit(130)
