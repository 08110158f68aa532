"""Commands that execute many replies: replay, run (campaigns), demo."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import anyio
import typer

from tasks.load import select, suite
from transports.registry import parse_list

from .cli_app import JSON_OPT, app
from .console import err, fail, out, print_json


# ---------------------------------------------------------------- lists


def contract_list(spec: str) -> list[str]:
    """``--contracts``: each name checked, repeats dropped (first occurrence kept)."""
    from .contracts import check_contract

    names = list(dict.fromkeys(check_contract(c.strip()) for c in spec.split(",") if c.strip()))
    if not names:
        fail("--contracts: no contract given")
    return names


def effort_list(spec: str) -> list[str]:
    """``--effort``: one rung or a comma-separated ladder; an empty or repeated rung is bad input."""
    rungs = [e.strip() for e in spec.split(",")]
    if any(not e for e in rungs):
        fail(f"--effort '{spec}': an empty rung (write e.g. 'low,medium,high'; 'unset' sends no effort)")
    seen: set[str] = set()
    for e in rungs:
        if e in seen:
            fail(f"--effort '{spec}': rung '{e}' is given twice")
        seen.add(e)
    return rungs


def check_out_dir(path: Path) -> None:
    """``run --out``: a directory (made here if missing); an existing file or an unwritable place is bad input."""
    if path.exists() and not path.is_dir():
        fail(f"--out {path}: exists and is not a directory (a campaign writes replies.jsonl, results.jsonl, "
             "errors.jsonl into it)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        fail(f"--out {path}: cannot create the directory: {e.strerror or e}")
    for name in ("replies.jsonl", "results.jsonl", "errors.jsonl"):
        f = path / name
        if f.is_dir():
            fail(f"--out {path}: {name} is a directory")
    if not os.access(path, os.W_OK | os.X_OK):
        fail(f"--out {path}: not writable")


def latest(records: list[dict], error: Callable[[dict], bool]) -> list[dict]:
    """One record per (reply_id, transport): the last without ``error`` if there is one, else the last."""
    kept: dict[tuple, dict] = {}
    for r in records:
        key = (r.get("reply_id"), r.get("transport"))
        if key in kept and error(r) and not error(kept[key]):
            continue
        kept[key] = r
    return list(kept.values())


# ---------------------------------------------------------------- replay


def progress_bar(total: int, label: str):
    """A rich progress bar with an ETA on stderr (stdout stays clean for --json)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=err, transient=False)
    return progress, progress.add_task(label, total=total)


def campaign_progress():
    """Two bars (generate, execute) fed by a campaign's hooks; totals add up over several campaigns
    (effort rungs, the demo's two agents)."""
    from .campaign import Progress

    progress, gen_bar = progress_bar(0, "generate")
    exec_bar = progress.add_task("execute", total=0)
    totals = {gen_bar: 0, exec_bar: 0}

    def add(bar, n: int) -> None:
        totals[bar] += n
        progress.update(bar, total=totals[bar])

    hooks = Progress(on_generation_total=lambda n: add(gen_bar, n), on_generated=lambda: progress.advance(gen_bar),
                     on_execution_total=lambda n: add(exec_bar, n), on_executed=lambda r: progress.advance(exec_bar))
    return progress, hooks


def summarize(records: list[dict]) -> dict:
    """Pass counts per (contract, transport) of freshly written records; records with ``error`` set (the
    execution itself failed) are counted apart, under ``errors``, as the report does."""
    cells: dict[str, dict[str, int]] = {}
    for r in records:
        key = f"{r['contract']} x {r['transport']}"
        c = cells.setdefault(key, {"passed": 0, "n": 0, "damaged": 0, "transport_errors": 0, "errors": 0})
        if r.get("error"):
            c["errors"] += 1
            continue
        c["n"] += 1
        c["passed"] += bool(r["verdict"]["passed"])
        c["damaged"] += bool(r["damaged"])
        c["transport_errors"] += bool(r.get("transport_error"))
    return cells


def print_summary(cells: dict, title: str) -> None:
    from rich.table import Table

    table = Table("contract x transport", "passed", "n", "rate", "damaged", "transport errors", "errors",
                  title=title)
    for key, c in sorted(cells.items()):
        table.add_row(key, str(c["passed"]), str(c["n"]), f"{100 * c['passed'] / c['n']:.1f}%" if c["n"] else "-",
                      str(c["damaged"]), str(c["transport_errors"]), str(c.get("errors", 0)))
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

    from transports.store import read_jsonl

    from .replay import done_keys, is_harness_error, load_replies, replay

    names = parse_list(transports)
    if out_path.is_dir():
        fail(f"--out {out_path}: is a directory (give the results JSONL file)")
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
    recorded = latest([r for r in read_jsonl(out_path) if (r.get("reply_id"), r.get("transport")) in keys],
                      is_harness_error)
    errors = [r for r in recorded if is_harness_error(r)]
    doc = {"replies": len(stored), "transports": names, "executed_now": n, "already_recorded": total - n,
           "errors": len(errors), "seconds": round(seconds, 3), "out": str(out_path), "cells": summarize(recorded)}
    if as_json:
        print_json(doc)
    else:
        print_summary(doc["cells"], f"replay of {len(stored)} replies x {len(names)} transports -> {out_path}")
        err.print(f"executed {n} now, {total - n} were already recorded; {seconds:.2f} s")
    for r in errors[:10]:
        err.print(f"error: {r['task_id']} {r['contract']} x {r['transport']}: {r['error']}", markup=False, style="red")
    if errors:
        err.print(f"{len(errors)} execution(s) failed in the harness (recorded with 'error' in {out_path}); "
                  "rerun the same command to retry them")
    raise typer.Exit(1 if errors else 0)


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
    effort: str = typer.Option("unset", "--effort", help="Effort label sent to the provider ('unset' sends none); a comma-separated ladder runs one config per rung."),
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
    import time

    from transports.store import read_jsonl

    from .campaign import Campaign, Plan
    from .native import NativeExecutor
    from .providers.factory import make_provider
    from .providers.retry import RetryPolicy

    names = parse_list(transports)
    contract_names = contract_list(contracts)
    efforts = effort_list(effort)
    try:
        providers = [make_provider(model, base_url, e, parse_params(params), retry=RetryPolicy(tries=max_tries),
                                   timeout_s=timeout) for e in efforts]
    except ValueError as e:
        fail(str(e))
    plan = Plan(tasks=select(tasks), contracts=contract_names, transports=names, draws=draws,
                api_concurrency=api_concurrency, exec_concurrency=exec_concurrency or os.cpu_count() or 2,
                server_url=server)
    if server and "native" in contract_names:
        anyio.run(NativeExecutor.probe, server)  # unreachable, or without --control: NativeError, exit 2
    check_out_dir(out_dir)
    progress, hooks = campaign_progress()
    start = time.perf_counter()
    outcomes = []
    with progress:
        for provider in providers:  # one config per effort rung, one after the other
            outcomes.append(anyio.run(Campaign(provider, plan, out_dir, hooks).run))
    seconds = time.perf_counter() - start
    labels = [p.config.label for p in providers]
    errors = [e for o in outcomes for e in o.errors]
    results = [r for r in read_jsonl(out_dir / "results.jsonl")
               if "{provider}:{model}@{effort}".format(**{"effort": "unset", **r.get("config", {})}) in labels]
    doc = {"configs": labels, "out": str(out_dir), "generated": sum(o.generated for o in outcomes),
           "reused": sum(o.reused for o in outcomes), "executed": sum(o.executed for o in outcomes),
           "errors": len(errors), "seconds": round(seconds, 3), "cells": summarize(results)}
    if as_json:
        print_json(doc)
    else:
        print_summary(doc["cells"], f"{', '.join(labels)} -> {out_dir}/results.jsonl")
        err.print(f"generated {doc['generated']} replies ({doc['reused']} reused), executed {doc['executed']}; "
                  f"{seconds:.1f} s")
        for e in errors[:10]:
            err.print(f"error: {e}", markup=False, style="red")
        if errors:
            err.print(f"{len(errors)} error(s) recorded in {out_dir}/errors.jsonl; rerun the same command to retry them")
    raise typer.Exit(1 if errors else 0)


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

    from .demo import AGENTS, CONTRACTS, run_demo
    from .report import compute, load_records, render_terminal, write_html

    names = parse_list(transports)
    where = out_dir or Path(tempfile.mkdtemp(prefix="quotebench-demo-"))
    progress, hooks = campaign_progress()
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


