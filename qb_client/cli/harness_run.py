"""``quotebench run --harness NAME``: the real harness as the agent (docs/harness-runs.md).

``run`` takes the options declared here and hands over to :func:`run_harness` when ``--harness`` is given, so
the one-shot and multi-turn campaigns stay as they were. The model is one of:

* ``courier``: the scripted courier behind the recording proxy (the dry run: offline, free);
* ``replay:DIR``: a recorded harness run's exchanges, answered by turn (offline; reports divergences);
* ``anthropic:MODEL`` (Claude Code), ``openai:MODEL`` or ``openai-chat:MODEL`` (mini-swe-agent; with
  ``--base-url`` any OpenAI-compatible server such as vLLM or Ollama): a provider, the key read from the
  environment by the host and added by the proxy.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Optional

import anyio
import typer

from .app import JSON_OPT, app
from ..console import fail, make_dirs, message, out, print_json, safe, safe_text

HARNESS_OPT = typer.Option(None, "--harness", help="Run the real harness as the agent (claude-code, mini-swe-agent): "
                           "each task's instruction is its prompt; --model courier is the offline dry run, "
                           "replay:DIR replays a recorded harness run. See docs/harness-runs.md.")
MAX_TURNS_OPT = typer.Option(30, "--max-turns", min=1, help="With --harness: model turns per task (then the proxy ends the run).")
MAX_TOKENS_OPT = typer.Option(None, "--max-tokens", min=1, help="With --harness: input+output tokens per task, as the "
                              "provider reports them (then the proxy ends the run).")
WALL_OPT = typer.Option(300.0, "--wall", min=1, help="With --harness: wall-clock seconds per task (the sandbox's limit).")

WIRE = {"claude-code": ("anthropic",), "mini-swe-agent": ("openai", "openai-chat")}
"""Which providers each harness can talk to: Claude Code speaks Anthropic Messages, mini-swe-agent (litellm
``openai/MODEL``) Chat Completions."""
KEY_VAR = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY", "openai-chat": "OPENAI_API_KEY"}


def _recording(src: Path) -> tuple[dict[tuple[str, int], dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """A recorded harness run: its latest record per (task, draw) and its exchanges by attempt."""
    from transports.results.store import read_jsonl

    results, exchanges = src / "results.jsonl", src / "exchanges.jsonl"
    for f in (results, exchanges):
        if not f.is_file():
            fail(f"--model replay:{safe(str(src))}: {f.name} is missing (a directory written by run --harness)")
    records: dict[tuple[str, int], dict[str, Any]] = {}
    for r in read_jsonl(results, follow=False):
        agent = r.get("agent")
        draw = r.get("draw", 0)
        if isinstance(agent, dict) and isinstance(agent.get("attempt"), str) and not r.get("error") \
                and isinstance(draw, int) and isinstance(r.get("task_id"), str):
            records[(r["task_id"], draw)] = r
    by_attempt: dict[str, list[dict[str, Any]]] = {}
    for e in read_jsonl(exchanges, follow=False):
        if isinstance(e.get("attempt"), str):
            by_attempt.setdefault(e["attempt"], []).append(e)
    if not records:
        fail(f"--model replay:{safe(str(src))}: results.jsonl holds no harness run")
    return records, by_attempt


def run_harness(*, harness: str, model: str, base_url: Optional[str], out_dir: Path, tasks: Optional[str], draws: int,
                max_turns: int, max_tokens: Optional[int], wall: float, concurrency: Optional[int],
                allow_no_isolation: bool, timeout: float, as_json: bool) -> None:
    from tasks.load import select
    from transports.harnesses.agent import SPECS
    from transports.results.record import ConfigInfo
    from transports.sandbox import isolation_refusal

    from ..campaign.harness_run import HarnessCampaign, HarnessPlan, comparable
    from ..campaign.harness_script import courier_script
    from ..campaign.harness_upstream import ProviderUpstream, ReplayUpstream, ScriptUpstream
    from ..report.harness_runs import harness_rows

    name_part, _, version = harness.partition("@")
    if name_part not in SPECS:
        fail(f"--harness {safe(harness)}: unknown; one of {', '.join(SPECS)} (NAME@VERSION for another release)")
    if version and not all(c.isalnum() or c in ".-+" for c in version):
        fail(f"--harness {safe(harness)}: the version must be a release number such as 2.1.197")
    provider, _, name = model.partition(":")
    provider = provider.strip()
    secret: Optional[str] = None
    recorded: dict[tuple[str, int], dict[str, Any]] = {}
    if provider == "courier":
        config, wire_model = ConfigInfo(provider="courier", model="script-v1"), "courier"
        upstream_for = lambda task, draw, key: ScriptUpstream(courier_script(task))  # noqa: E731
    elif provider == "replay":
        src = Path(name)
        recorded, by_attempt = _recording(src)
        first = next(iter(recorded.values()))
        config = ConfigInfo.model_validate(first.get("config") or {})
        wire_model = config.model if config.provider != "courier" else "courier"

        def upstream_for(task, draw, key):  # type: ignore[no-untyped-def]
            r = recorded.get((task.id, draw))
            if r is None:
                return None
            attempt = r["agent"]["attempt"]
            return ReplayUpstream(by_attempt.get(attempt, []), model=wire_model, attempt=attempt)
    elif provider in KEY_VAR and name:
        if provider not in WIRE[name_part]:
            fail(f"--model {safe(model)}: {name_part} speaks {'Anthropic Messages' if name_part == 'claude-code' else 'Chat Completions'}; "
                 f"use {' or '.join(p + ':MODEL' for p in WIRE[name_part])} (with --base-url for a compatible server)")
        secret = os.environ.get(KEY_VAR[provider]) or None
        if secret is None and base_url is None:
            fail(f"--model {safe(model)}: no key: set {KEY_VAR[provider]} (or give --base-url of a server that needs none)")
        if not allow_no_isolation and (why := isolation_refusal("run a harness with a live model")):
            fail(why)
        config, wire_model = ConfigInfo(provider=provider, model=name), name
        kind = "anthropic" if provider == "anthropic" else "openai"
        upstream_for = lambda task, draw, key: ProviderUpstream(kind, name, secret, base_url, timeout)  # noqa: E731
    else:
        fail(f"--model {safe(model)}: with --harness, one of courier, replay:DIR, anthropic:MODEL, openai:MODEL, "
             "openai-chat:MODEL")
    config = config.model_copy(update={"variant": f"harness={name_part}"})
    selected = select(tasks)
    if provider == "replay":
        selected = [t for t in selected if any((t.id, d) in recorded for d in range(draws))]
    plan = HarnessPlan(harness, selected, draws=draws, max_turns=max_turns, max_tokens=max_tokens, wall_s=wall,
                       concurrency=concurrency or 1)
    if out_dir.exists() and not out_dir.is_dir():
        fail(f"--out {safe(str(out_dir))}: exists and is not a directory (a harness run writes results.jsonl and "
             "exchanges.jsonl into it)")
    make_dirs("--out", out_dir)
    campaign = HarnessCampaign(plan, config, wire_model, out_dir, upstream_for, secret)
    start = time.perf_counter()
    outcome = anyio.run(lambda: campaign.run(on_record=lambda r: message(
        f"{r.task_id} draw {r.draw}: {'pass' if r.verdict.passed else 'fail'}, {len(r.steps or [])} steps, "
        f"{(r.agent or {}).get('turns')} turns, {r.timing.exec_ms or 0:.0f} ms")))
    seconds = time.perf_counter() - start
    records = [r.model_dump(mode="json") for r in outcome.records]
    doc: dict[str, Any] = {"harness": harness, "config": config.label, "out": str(out_dir), "executed": outcome.executed,
                           "already_recorded": outcome.skipped, "errors": len(outcome.errors),
                           "seconds": round(seconds, 3), "rows": harness_rows(records)}
    if provider == "replay":
        same = [r for r in records if comparable(r) == comparable(recorded[(r["task_id"], r["draw"])])]
        versions = sorted({str(recorded[(r["task_id"], r["draw"])].get("harness_version")) for r in records})
        diverged = [{"task_id": r["task_id"], "draw": r["draw"], "divergences": r["agent"]["divergences"]}
                    for r in records if r["agent"].get("divergences")]
        doc["replay"] = {"identical": len(same), "different": len(records) - len(same), "diverged": diverged,
                         "recorded_with": versions, "replayed_with": campaign.route.version}
    if as_json:
        print_json(doc)
    else:
        for row in doc["rows"]:
            out.print(safe_text(f"{row['harness']} x {row['config']}: {row['passed']}/{row['n']} passed "
                                f"[{row['ci95'][0]:.2f}, {row['ci95'][1]:.2f}]; {row['steps']} steps, "
                                f"{row['changed']} changed, {row['refused']} refused, {row['exit_zero_wrong']} exit-zero-wrong"))
        if "replay" in doc:
            rp = doc["replay"]
            message(f"replay through {name_part} {rp['replayed_with']} of a recording made with {', '.join(rp['recorded_with'])}: "
                    f"{rp['identical']} records identical to the recording, {rp['different']} different, "
                    f"{len(rp['diverged'])} with diverging requests")
            for d in rp["diverged"][:10]:
                first = d["divergences"][0]
                message(f"  {d['task_id']} draw {d['draw']}: turn {first['turn']}, element {first['at']} ({first['what']}): "
                        f"recorded {safe(str(first['recorded'])[:120])!r}, now {safe(str(first['now'])[:120])!r}")
        message(f"executed {outcome.executed}, {outcome.skipped} already recorded; {seconds:.1f} s")
        for e in outcome.errors[:10]:
            message(f"error: {e}", style="red")
    raise typer.Exit(1 if outcome.errors or (doc.get("replay") or {}).get("different") else 0)


@app.command("harness-report")
def harness_report_cmd(
    results: list[Path] = typer.Argument(..., metavar="RESULTS.jsonl...", help="results.jsonl of harness runs."),
    as_json: bool = JSON_OPT,
) -> None:
    """The harness x model table of harness runs: pass rate with its interval, what each harness changed
    (commands whose received differs, refused commands, exit-zero-wrong), cost per task."""
    from transports.results.store import read_jsonl

    from ..report.harness_runs import harness_rows, render_rows

    records = [r for f in results for r in read_jsonl(f)]
    rows = harness_rows(records)
    if not rows:
        fail(f"{', '.join(safe(str(f)) for f in results)}: no harness run (records of run --harness)")
    if as_json:
        print_json({"rows": rows})
    else:
        render_rows(rows, out)
