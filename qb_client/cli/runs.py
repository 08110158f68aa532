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

from .app import JSON_OPT, app
from .harness_run import HARNESS_OPT, MAX_TOKENS_OPT, MAX_TURNS_OPT, WALL_OPT, run_harness
from .options import (ALLOW_SUITE_MISMATCH_OPT, JOBS_OPT, SUITE_OPT, TIMEOUT_OPT, USERLAND_OPT, apply_jobs, apply_suite,
                      apply_timeout, apply_userland, jobs_alias)
from ..console import OUTPUT_RULE, check_output_file, err, fail, make_dirs, message, out, print_json, safe, safe_text


# ---------------------------------------------------------------- lists


def contract_list(spec: str) -> list[str]:
    """``--contracts``: each name checked, repeats dropped (first occurrence kept)."""
    from ..replies.contracts import check_contract

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
        sent = e.removeprefix("raw:")  # raw:high sends high: the same rung
        if sent in seen:
            fail(f"--effort '{spec}': rung '{sent}' is given twice")
        seen.add(sent)
    return rungs


def check_out_dir(path: Path, option: str = "--out") -> None:
    """``run --out``: a directory, made here with any missing parents (the output rule of the whole CLI);
    an existing file or an unwritable place is bad input."""
    shown = safe(str(path))
    if path.exists() and not path.is_dir():
        fail(f"{option} {shown}: exists and is not a directory (a campaign writes replies.jsonl, results.jsonl, "
             "errors.jsonl into it)")
    make_dirs(option, path)
    for name in ("replies.jsonl", "results.jsonl", "errors.jsonl"):
        f = path / name
        if f.is_dir():
            fail(f"{option} {shown}: {name} is a directory")
    if not os.access(path, os.W_OK | os.X_OK):
        fail(f"{option} {shown}: not writable")


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

    progress = Progress(TextColumn("{task.description}", style="bold", markup=False), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=err, transient=False)
    return progress, progress.add_task(label, total=total)


def campaign_progress(campaigns: int, replies: int, transports: int):
    """Two bars (generate, execute) for ``campaigns`` campaigns of ``replies`` replies (tasks x contracts x
    draws) on ``transports`` transports each, fed by the campaigns' hooks.

    The totals are known before anything runs, so a bar never grows mid-run (a total counted per campaign
    would jump from 556/560 to 560/1120 when the second one began): each campaign reports how much of its
    share is left, and the rest of its share (already done by an earlier run) is counted as done at once."""
    from ..campaign.work import Progress

    progress, gen_bar = progress_bar(campaigns * replies, "generate")
    exec_bar = progress.add_task("execute", total=campaigns * replies * transports)

    hooks = Progress(on_generation_total=lambda n: progress.advance(gen_bar, max(0, replies - n)),
                     on_generated=lambda: progress.advance(gen_bar),
                     on_execution_total=lambda n: progress.advance(exec_bar, max(0, replies * transports - n)),
                     on_executed=lambda r: progress.advance(exec_bar))
    return progress, hooks


def summarize(records: list[dict]) -> list[dict]:
    """One row per config x contract x transport (see :func:`qb_client.campaign.replay.summary_rows`)."""
    from ..campaign.replay import summary_rows

    return summary_rows(records)


def print_summary(rows: list[dict], title: str) -> None:
    from rich.table import Table

    table = Table(title=safe(title))
    table.add_column("config", overflow="fold")  # labels wrap if they must, never get cut
    table.add_column("contract x transport", overflow="fold")
    for name in ("passed/n", "rate", "damaged", "transport\nerrors", "errors"):  # numbers are never cut
        table.add_column(name, justify="right", no_wrap=True)
    for c in rows:
        table.add_row(safe_text(c["config"]), safe_text(f"{c['contract']} x {c['transport']}"), f"{c['passed']}/{c['n']}",
                      f"{100 * c['rate']:.1f}%" if c["rate"] is not None else "-",
                      str(c["damaged"]), str(c["transport_errors"]), str(c["errors"]))
    out.print(table)


@app.command("replay")
def replay_cmd(
    replies: Path = typer.Argument(..., metavar="REPLIES.jsonl", help="Reply store: JSONL with task_id and command or reply. One reply per reply_id, "
                                  "or per (config, task_id, contract, draw): an exact repeat is dropped with a note, a "
                                  "different reply under the same key is refused naming both lines (give each its own "
                                  "draw). Only an unterminated last line that is not JSON counts as torn (skipped); any "
                                  "other bad line is refused before anything runs."),
    transports: str = typer.Option("raw,nested", "--transports", help="Comma-separated transport names."),
    out_path: Path = typer.Option(..., "--out", help=f"Results JSONL (appended; a rerun completes what is missing). {OUTPUT_RULE}"),
    jobs: Optional[int] = JOBS_OPT,
    concurrency: Optional[int] = jobs_alias("--concurrency"),
    timeout: Optional[float] = TIMEOUT_OPT,
    as_json: bool = JSON_OPT,
    suite_opt: str = SUITE_OPT,
    userland: str = USERLAND_OPT,
    allow_mismatch: bool = ALLOW_SUITE_MISMATCH_OPT,
) -> None:
    """Fixed-reply replay: every stored reply through every transport (summary: one row per config)."""
    import time

    from transports.results.store import read_jsonl

    from ..campaign.replay import done_keys, is_harness_error, load_replies, replay, same_axes
    from ..replies.store import allow_suite_mismatch

    apply_suite(suite_opt)
    apply_userland(userland)
    apply_timeout(timeout)
    jobs = apply_jobs(jobs, concurrency, "--concurrency")
    allow_suite_mismatch(allow_mismatch)
    names = parse_list(transports)
    check_output_file("--out", out_path)
    done = done_keys(out_path)  # a bad --out file is refused before the store's notes are printed
    stored = load_replies(replies)
    keys = {(r.reply_id, t) for r in stored for t in names}
    total = len(keys)
    already = len(keys & done)
    start = time.perf_counter()
    if already == total:
        message(f"nothing to do: {total} results already in {out_path}")
        n = 0
    else:
        progress, bar = progress_bar(total, "replay")
        with progress:
            progress.update(bar, completed=already)
            n = anyio.run(lambda: replay(stored, names, out_path, concurrency=jobs,
                                         on_record=lambda r: progress.advance(bar)))
    seconds = time.perf_counter() - start
    recorded = latest([r for r in read_jsonl(out_path)
                       if (r.get("reply_id"), r.get("transport")) in keys and same_axes(r)], is_harness_error)
    errors = [r for r in recorded if is_harness_error(r)]
    doc = {"replies": len(stored), "transports": names, "executed_now": n, "already_recorded": total - n,
           "errors": len(errors), "seconds": round(seconds, 3), "jobs": jobs, "out": str(out_path),
           "cells": summarize(recorded)}
    if as_json:
        print_json(doc)
    else:
        print_summary(doc["cells"], f"replay of {len(stored)} replies x {len(names)} transports -> {out_path}")
        message(f"executed {n} now, {total - n} were already recorded; {seconds:.2f} s with --jobs {jobs}")
    for r in errors[:10]:
        message(f"error: {r['task_id']} {r['contract']} x {r['transport']}: {r['error']}", style="red")
    if errors:
        message(f"{len(errors)} execution(s) failed in the harness (recorded with 'error' in {out_path}); "
                "rerun the same command to retry them")
    raise typer.Exit(1 if errors else 0)


# ---------------------------------------------------------------- run


@app.command("run")
def run_cmd(
    model: str = typer.Option(..., "--model", help="anthropic:MODEL, openai:MODEL, openai-chat:MODEL, replay:FILE, reference or habits."),
    out_dir: Path = typer.Option(..., "--out", help="Campaign directory (replies.jsonl, results.jsonl, errors.jsonl); "
                                 "made with any missing parents."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Another endpoint for the provider."),
    contracts: str = typer.Option("raw,native,disclosed", "--contracts", help="Comma-separated: raw, native, disclosed, disclosed-single."),
    transports: str = typer.Option("raw,nested", "--transports", help="Comma-separated transport names."),
    effort: str = typer.Option("unset", "--effort", help="Effort sent to the provider: one of the values the installed SDK documents for it (e.g. low, "
                                "medium, high; a wrong one is refused, listing them); 'raw:VALUE' sends VALUE unchecked; "
                                "'unset' sends none; a comma-separated ladder runs one config per rung."),
    draws: int = typer.Option(1, "--draws", min=1, help="Replies per (task, contract)."),
    tasks: Optional[str] = typer.Option(None, "--tasks", help="Glob(s) of task ids, comma-separated."),
    params: Optional[str] = typer.Option(None, "--params", help="Extra generation parameters as a JSON object."),
    server: Optional[str] = typer.Option(None, "--server", help="Native contract over HTTP to a running `quotebench serve --control`."),
    api_concurrency: int = typer.Option(4, "--api-concurrency", min=1, help="Parallel API calls."),
    max_tries: int = typer.Option(4, "--max-tries", min=1, help="Attempts per API call (429, 5xx, timeouts are retried)."),
    timeout: float = typer.Option(600.0, "--timeout", min=1, help="Seconds to wait for one API response."),
    exec_timeout: Optional[float] = typer.Option(None, "--exec-timeout", metavar="SECONDS",
                                                 help="Wall clock per command in its sandbox (default 10; "
                                                      "--timeout is the API's)."),
    jobs: Optional[int] = JOBS_OPT,
    exec_concurrency: Optional[int] = jobs_alias("--exec-concurrency"),
    allow_no_isolation: bool = typer.Option(False, "--allow-no-isolation",
                                            help="Run a live model's commands even where no sandbox isolation is available."),
    native_tool: Optional[str] = typer.Option(None, "--native-tool", help="builtin (the provider's own shell tool: "
                                              "anthropic bash_20250124, openai shell; the default there) or function (the "
                                              "MCP function tool bash; the only choice for openai-chat and offline providers)."),
    turns: int = typer.Option(1, "--turns", min=1, help="Actions per chain: 1 is the one-shot design; K > 1 shows the model "
                              "each command's exit code and output and lets it act again, in the same sandbox (on-policy "
                              "per transport: no fixed-reply replay)."),
    as_json: bool = JSON_OPT,
    suite_opt: str = SUITE_OPT,
    userland: str = USERLAND_OPT,
    allow_mismatch: bool = ALLOW_SUITE_MISMATCH_OPT,
    harness: Optional[str] = HARNESS_OPT, max_turns: int = MAX_TURNS_OPT, max_tokens: Optional[int] = MAX_TOKENS_OPT,
    wall: float = WALL_OPT,
) -> None:
    """A campaign: each reply generated once, then replayed on every transport. Resumable with the same --out.
    With --turns K > 1: one chain of up to K actions per task, contract, draw and transport.
    With --harness NAME: the real harness drives the model through each task (docs/harness-runs.md)."""
    import time

    from ..replies.store import allow_suite_mismatch

    suite_id = apply_suite(suite_opt)
    apply_userland(userland)
    apply_timeout(exec_timeout, "--exec-timeout")
    jobs = apply_jobs(jobs, exec_concurrency, "--exec-concurrency")
    if harness is not None:  # the harness as the agent: its own module (cli/harness_run.py)
        run_harness(harness=harness, model=model, base_url=base_url, out_dir=out_dir, tasks=tasks, draws=draws,
                    max_turns=max_turns, max_tokens=max_tokens, wall=wall, concurrency=jobs,
                    allow_no_isolation=allow_no_isolation, timeout=timeout, as_json=as_json)
    allow_suite_mismatch(allow_mismatch)

    from transports.results.store import read_jsonl

    from ..campaign.oneshot import Campaign, check_resume_files
    from ..campaign.work import Plan
    from ..adapters.providers.factory import make_provider
    from ..adapters.providers.retry import RetryPolicy

    names = parse_list(transports)
    contract_names = contract_list(contracts)
    efforts = effort_list(effort)
    from .run_checks import check_offline_effort, check_server, parse_params

    check_server(server, contract_names, names)
    check_offline_effort(model.split(":", 1)[0].strip(), efforts)
    try:
        providers = [make_provider(model, base_url, e, parse_params(params), retry=RetryPolicy(tries=max_tries),
                                   timeout_s=timeout) for e in efforts]
    except ValueError as e:
        fail(str(e))
    from ..campaign.arms import check_turns, resolve_native_tool, variant_for

    try:
        kind = resolve_native_tool(model.split(":", 1)[0].strip(), native_tool)
        check_turns(model.split(":", 1)[0].strip(), turns)
    except ValueError as e:
        fail(str(e))
    from transports.sandbox import isolation_refusal

    live = model.split(":", 1)[0] not in ("reference", "habits", "replay")  # after the input's own checks
    if live and not allow_no_isolation and (why := isolation_refusal("run with a live model")):
        fail(why)
    variant = variant_for(kind if "native" in contract_names else None, turns)
    for p in providers:
        p.config = p.config.model_copy(update={"variant": variant})
    plan = Plan(tasks=select(tasks), contracts=contract_names, transports=names, draws=draws,
                api_concurrency=api_concurrency, exec_concurrency=jobs,
                server_url=server, native_tool=kind, turns=turns)
    if server and "native" in contract_names:
        from ..campaign.native import NativeExecutor  # the MCP SDK: 1.3 s of CPU, for a server alone

        anyio.run(NativeExecutor.probe, server)  # unreachable, or without --control: NativeError, exit 2
    check_out_dir(out_dir)
    check_resume_files(out_dir)  # a bad line: one error before any progress bar
    progress, hooks = campaign_progress(len(providers), len(plan.tasks) * len(plan.contracts) * plan.draws,
                                        len(plan.transports))
    start = time.perf_counter()
    outcomes = []
    with progress:
        for provider in providers:  # one config per effort rung, one after the other
            outcomes.append(anyio.run(Campaign(provider, plan, out_dir, hooks).run))
    seconds = time.perf_counter() - start
    from ..campaign.errors import prune_resolved

    prune_resolved(out_dir)  # errors a rerun resolved are no longer errors
    labels = [p.config.label for p in providers]
    errors = [e for o in outcomes for e in o.errors]
    from ..report.load import config_label

    results = [r for r in read_jsonl(out_dir / "results.jsonl", follow=False)
               if isinstance(r.get("config"), dict) and config_label(r["config"]) in labels
               and (r.get("suite", "public"), r.get("userland", "gnu")) == (suite_id, userland)]
    doc = {"configs": labels, "out": str(out_dir), "generated": sum(o.generated for o in outcomes),
           "reused": sum(o.reused for o in outcomes), "executed": sum(o.executed for o in outcomes),
           "errors": len(errors), "seconds": round(seconds, 3), "jobs": jobs, "cells": summarize(results)}
    if as_json:
        print_json(doc)
    else:
        print_summary(doc["cells"], f"{', '.join(labels)} -> {out_dir}/results.jsonl")
        if not doc["generated"] and not doc["executed"] and not errors:
            message(f"nothing to do: {len(results)} results already in {out_dir}/results.jsonl")
        else:
            message(f"generated {doc['generated']} replies ({doc['reused']} reused), executed {doc['executed']}; "
                    f"{seconds:.1f} s with --jobs {jobs}")
        for e in errors[:10]:
            message(f"error: {e}", style="red")
        if errors:
            message(f"{len(errors)} error(s) recorded in {out_dir}/errors.jsonl; rerun the same command to retry them")
    raise typer.Exit(1 if errors else 0)


# ---------------------------------------------------------------- demo


def demo_html(out_dir: Optional[Path], html: Optional[Path]) -> Path:
    """Where the demo's page goes: --html, else into --out (the campaign and its page stay together),
    else the current directory."""
    if html is not None:
        return html
    return (out_dir / "quotebench-report.html") if out_dir is not None else Path("quotebench-report.html")


@app.command("demo")
def demo_cmd(
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Keep the campaign here (default: a fresh temporary "
                                           "directory); made with any missing parents. The HTML report goes into it too, unless --html says otherwise."),
    html: Optional[Path] = typer.Option(None, "--html", help="Where to write the HTML report (default: "
                                        f"quotebench-report.html in --out, else in the current directory). {OUTPUT_RULE}"),
    transports: Optional[str] = typer.Option(None, "--transports", help="Transports to replay on (default: raw, "
                                             "nested, ssh, escaped, tempscript, raw@dash, docker-sh, shlex-sh)."),
    jobs: Optional[int] = JOBS_OPT,
    suite_opt: str = SUITE_OPT,
    userland: str = USERLAND_OPT,
) -> None:
    """The whole crossed design offline (reference + habits agents), then the report."""
    import tempfile
    import time

    apply_suite(suite_opt)
    apply_userland(userland)
    jobs = apply_jobs(jobs)

    from ..ops.demo import AGENTS, CONTRACTS, TRANSPORTS, run_demo
    from ..report import compute, load_records, render_terminal, write_html

    names = parse_list(transports) if transports else TRANSPORTS
    if out_dir is not None:
        check_out_dir(out_dir)
    html = demo_html(out_dir, html)
    check_output_file("--html", html)
    where = out_dir or Path(tempfile.mkdtemp(prefix="quotebench-demo-"))
    progress, hooks = campaign_progress(len(AGENTS), len(suite()) * len(CONTRACTS), len(names))
    message(f"quotebench demo: agents {', '.join(AGENTS)} x contracts {', '.join(CONTRACTS)} x transports "
              f"{', '.join(names)} over {len(suite())} tasks -> {where}")
    start = time.perf_counter()
    with progress:
        errors = anyio.run(lambda: run_demo(where, hooks, names, jobs=jobs))
    doc = compute(load_records([str(where / "results.jsonl")]))
    render_terminal(doc, out)
    write_html(doc, html)
    message(f"{time.perf_counter() - start:.1f} s with --jobs {jobs}; results in {where}/results.jsonl; "
            f"report in {html}")
    for e in errors:
        message(f"error: {e}", style="red")
    raise typer.Exit(1 if errors else 0)


