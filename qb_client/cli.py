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


# ---------------------------------------------------------------- run


def parse_params(text: Optional[str]) -> dict:
    import json

    if not text:
        return {}
    try:
        params = json.loads(text)
    except ValueError as e:
        fail(f"--params: not valid JSON ({e})")
    if not isinstance(params, dict):
        fail("--params: must be a JSON object, e.g. '{\"temperature\": 0}'")
    return params


@app.command("run")
def run_cmd(
    model: str = typer.Option(..., "--model", help="anthropic:MODEL, openai:MODEL, openai-chat:MODEL, replay:FILE, reference or habits."),
    out_dir: Path = typer.Option(..., "--out", help="Campaign directory (replies.jsonl, results.jsonl, errors.jsonl)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Another endpoint for the provider."),
    contracts: str = typer.Option("raw,native,disclosed", "--contracts", help="Comma-separated: raw, native, disclosed, disclosed-single."),
    transports: str = typer.Option("raw,nested", "--transports", help="Comma-separated transport names."),
    effort: str = typer.Option("unset", "--effort", help="Effort label sent to the provider; 'unset' sends none."),
    draws: int = typer.Option(1, "--draws", min=1, help="Replies per (task, contract)."),
    tasks: Optional[str] = typer.Option(None, "--tasks", help="Glob(s) of task ids, comma-separated."),
    params: Optional[str] = typer.Option(None, "--params", help="Extra generation parameters as a JSON object."),
    server: Optional[str] = typer.Option(None, "--server", help="Native contract over HTTP to a running `quotebench serve --control`."),
    api_concurrency: int = typer.Option(4, "--api-concurrency", min=1, help="Parallel API calls."),
    max_tries: int = typer.Option(4, "--max-tries", min=1, help="Attempts per API call (429, 5xx, timeouts are retried)."),
    timeout: float = typer.Option(600.0, "--timeout", min=1, help="Seconds to wait for one API response."),
    exec_concurrency: Optional[int] = typer.Option(None, "--exec-concurrency", min=1, help="Parallel executions (default: cores)."),
    as_json: bool = JSON_OPT,
) -> None:
    """A campaign: each reply generated once, then replayed on every transport. Resumable with the same --out."""
    import os
    import time

    from transports.registry import parse_list
    from transports.store import read_jsonl

    from .campaign import Campaign, Plan, Progress
    from .contracts import check_contract
    from .providers.factory import make_provider
    from .providers.retry import RetryPolicy

    names = parse_list(transports)
    contract_list = [check_contract(c.strip()) for c in contracts.split(",") if c.strip()]
    if not contract_list:
        fail("--contracts: no contract given")
    try:
        provider = make_provider(model, base_url, effort, parse_params(params), retry=RetryPolicy(tries=max_tries),
                                 timeout_s=timeout)
    except ValueError as e:
        fail(str(e))
    plan = Plan(tasks=select(tasks), contracts=contract_list, transports=names, draws=draws,
                api_concurrency=api_concurrency, exec_concurrency=exec_concurrency or os.cpu_count() or 2,
                server_url=server)
    progress, gen_bar = progress_bar(0, "generate")
    exec_bar = progress.add_task("execute", total=0)
    hooks = Progress(
        on_generation_total=lambda n: progress.update(gen_bar, total=n),
        on_generated=lambda: progress.advance(gen_bar),
        on_execution_total=lambda n: progress.update(exec_bar, total=n),
        on_executed=lambda r: progress.advance(exec_bar),
    )
    start = time.perf_counter()
    with progress:
        outcome = anyio.run(Campaign(provider, plan, out_dir, hooks).run)
    seconds = time.perf_counter() - start
    label = provider.config.label
    results = [r for r in read_jsonl(out_dir / "results.jsonl") if r.get("config", {}).get("provider") == provider.config.provider]
    doc = {"config": label, "out": str(out_dir), "generated": outcome.generated, "reused": outcome.reused,
           "executed": outcome.executed, "errors": len(outcome.errors), "seconds": round(seconds, 3),
           "cells": summarize(results)}
    if as_json:
        print_json(doc)
    else:
        print_summary(doc["cells"], f"{label} -> {out_dir}/results.jsonl")
        err.print(f"generated {outcome.generated} replies ({outcome.reused} reused), executed {outcome.executed}; "
                  f"{seconds:.1f} s")
        for e in outcome.errors[:10]:
            err.print(f"[red]error[/]: {e}")
        if outcome.errors:
            err.print(f"{len(outcome.errors)} error(s) recorded in {out_dir}/errors.jsonl; rerun the same command to retry them")
    raise typer.Exit(1 if outcome.errors else 0)


# ---------------------------------------------------------------- serve


@app.command("serve")
def serve_cmd(
    transport: str = typer.Option("raw", "--transport", help="Transport every call goes through."),
    task: str = typer.Option("file-write/control", "--task", help="The task whose fixture each session gets."),
    http: Optional[str] = typer.Option(None, "--http", metavar="HOST:PORT", help="Streamable HTTP at http://HOST:PORT/mcp instead of stdio."),
    tool_name: str = typer.Option("bash", "--tool-name", help="Name of the shell tool."),
    control: bool = typer.Option(False, "--control", help="Add the qb_ control tools (for harnesses)."),
    record: Optional[Path] = typer.Option(None, "--record", help="Append one JSON record per call and per session end."),
    allow_remote: bool = typer.Option(False, "--allow-remote", help="Allow a non-loopback --http address (needs --token)."),
    token: Optional[str] = typer.Option(None, "--token", envvar="QB_SERVE_TOKEN", help="Require Authorization: Bearer TOKEN."),
    idle_timeout: float = typer.Option(1800.0, "--idle-timeout", help="End sessions idle this long (seconds)."),
) -> None:
    """The MCP tool server: one shell tool, `bash`, whose calls go through the transport into a sandbox."""
    from qb_server.app import serve

    try:
        serve(transport=transport, task=task, http=http, tool_name=tool_name, control=control,
              record=str(record) if record else None, allow_remote=allow_remote, token=token or None,
              idle_timeout=idle_timeout)
    except ValueError as e:
        fail(str(e))


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


# ---------------------------------------------------------------- demo


@app.command("demo")
def demo_cmd(
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Keep the campaign here (default: a fresh temporary directory)."),
    html: Path = typer.Option(Path("quotebench-report.html"), "--html", help="Where to write the HTML report."),
    transports: str = typer.Option(",".join(["raw", "nested", "ssh", "escaped", "tempscript"]), "--transports",
                                   help="Transports to replay on."),
) -> None:
    """The whole crossed design offline (reference + habits agents), then the report."""
    import tempfile
    import time

    from transports.registry import parse_list

    from .campaign import Progress
    from .demo import AGENTS, CONTRACTS, run_demo
    from .report import compute, load_records, render_terminal, write_html

    names = parse_list(transports)
    where = out_dir or Path(tempfile.mkdtemp(prefix="quotebench-demo-"))
    progress, gen_bar = progress_bar(0, "generate")
    exec_bar = progress.add_task("execute", total=0)
    totals = {"gen": 0, "exec": 0}

    def add(bar: int, key: str, n: int) -> None:
        totals[key] += n
        progress.update(bar, total=totals[key])

    hooks = Progress(on_generation_total=lambda n: add(gen_bar, "gen", n), on_generated=lambda: progress.advance(gen_bar),
                     on_execution_total=lambda n: add(exec_bar, "exec", n), on_executed=lambda r: progress.advance(exec_bar))
    err.print(f"quotebench demo: agents {', '.join(AGENTS)} x contracts {', '.join(CONTRACTS)} x transports "
              f"{', '.join(names)} over {len(suite())} tasks -> {where}")
    start = time.perf_counter()
    with progress:
        errors = anyio.run(lambda: run_demo(where, hooks, names))
    doc = compute(load_records([str(where / "results.jsonl")]))
    render_terminal(doc, out)
    write_html(doc, html)
    err.print(f"{time.perf_counter() - start:.1f} s; results in {where}/results.jsonl; report in {html}")
    for e in errors:
        err.print(f"[red]error[/]: {e}")
    raise typer.Exit(1 if errors else 0)


# ---------------------------------------------------------------- bench


@app.command("bench")
def bench_cmd(
    n: int = typer.Option(30, "-n", min=5, help="Samples per measurement."),
    transports: str = typer.Option(",".join(["raw", "nested", "nested-single", "escaped", "tempscript", "json-naive",
                                             "json-correct", "ssh"]), "--transports", help="Transports to time."),
    replay: bool = typer.Option(True, "--replay/--no-replay", help="Also time the full replay of every reference solution."),
    mcp: bool = typer.Option(True, "--mcp/--no-mcp", help="Also time the MCP call paths."),
    as_json: bool = JSON_OPT,
) -> None:
    """What the harness costs, as ratios to a bare `bash -c true` measured in the same run."""
    from transports.registry import parse_list

    from .bench import mcp_paths, run_bench

    err.print("quotebench bench: measuring (a minute or two)...")
    doc = run_bench(n, parse_list(transports), replay=replay, mcp=mcp_paths if mcp else None)
    if as_json:
        print_json(doc)
        return
    from rich.table import Table

    floor = doc["bash_c_true_ms"]
    t = Table("path", "median ms", "x bash -c true", title=f"bash -c true = {floor:.2f} ms (isolation: {doc['isolation']}, {doc['cores']} cores)")
    for name, v in doc["transports"].items():
        t.add_row(f"{name}: process run", f"{v['exec_ms']:.2f}", f"{v['exec_ratio']:.2f}")
        t.add_row(f"{name}: whole record (sandbox, fixture, run, verdict)", f"{v['record_ms']:.2f}", f"{v['record_ratio']:.2f}")
    for name, v in (doc.get("mcp") or {}).items():
        t.add_row(f"MCP {name}" if "MCP" not in name else name, f"{v['ms']:.2f}", f"{v['ratio']:.2f}")
    out.print(t)
    if "full_replay" in doc:
        r = doc["full_replay"]
        out.print(f"full replay: {r['executions']} executions ({r['passed']} passed) in {r['seconds']:.1f} s "
                  f"with {r['concurrency']} workers")
    out.print(f"peak memory: {doc['peak_memory_mib']:.0f} MiB")


# ---------------------------------------------------------------- entry point

KNOWN_ERRORS = (BadInput, TaskFileError, UnknownTaskError, UnknownTransportError, StoreError, SandboxError)


def _known_errors() -> tuple[type[BaseException], ...]:
    from .contracts import UnknownContractError
    from .report import ReportInputError

    return (*KNOWN_ERRORS, ReportInputError, UnknownContractError)


def main() -> None:
    try:
        app()
    except _known_errors() as e:
        err.print(f"quotebench: error: {e}", markup=False)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("quotebench: interrupted; everything recorded so far is kept", markup=False)
        sys.exit(130)
