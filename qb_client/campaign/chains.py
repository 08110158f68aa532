"""The multi-turn arm of a campaign (``run --turns K``, K > 1): one chain per (task, contract, draw,
transport), each in its own sandbox, each written whole as one record when it ends.

Why apart from the one-shot campaign: a reply after turn 1 depends on what the transport did to the
previous command, so nothing is generated once and replayed; ``replies.jsonl`` is not written (every
reply is in its record's ``turns``). Resume: a chain's id (``c-...``) is derived from the config (its
label names ``turns=K``), prompt and suite versions, task, contract, draw and transport; a rerun with the
same ``--out`` skips every chain already in ``results.jsonl`` and runs every other one from turn 1 (a chain
cut short by a kill left no record, and its sandbox died with the process). Errors (a provider error in
any turn, the MCP path failing) are ``errors.jsonl`` lines with ``stage: "chain"``, never verdicts.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import anyio

from tasks.schema import Task
from transports.execute import chain, no_command_record
from transports.results.record import Record, Usage, versions
from transports.registry import get
from transports.results.store import JsonlWriter, read_jsonl

from ..adapters.providers.base import GenerationRequest, ProviderError
from ..replies.contracts import LOOP_PROMPT_VERSION, PROMPT_VERSION
from .jobs import stamped
from .limits import command_limits
from .loop import chain_record, run_chain
from .work import CampaignRun, config_key, describe, native_record, reply_text, same_axes, stored_label, task_key

if TYPE_CHECKING:
    from .native import NativeExecutor


def chain_id(config_key: str, task_key: str, contract: str, draw: int, transport: str) -> str:
    digest = hashlib.sha256(f"{config_key}\0{task_key}\0{contract}\0{draw}\0{transport}".encode()).hexdigest()[:16]
    return f"c-{digest}"


def prompt_version() -> str:
    """What the records' ``versions.prompt`` says for a chain: the one-shot texts plus the loop's."""
    return f"{PROMPT_VERSION}+{LOOP_PROMPT_VERSION}"


async def run_chains(c: CampaignRun) -> None:
    plan, label = c.plan, c.provider.config.label
    results = c.out / "results.jsonl"
    done = {(r.get("reply_id"), r.get("transport")) for r in read_jsonl(results, warn=None, follow=False)
            if same_axes(r, plan) and stored_label(r.get("config")) == label} if results.exists() else set()
    key = config_key(c.provider)
    work = [(t, con, d, tr, chain_id(key, task_key(t), con, d, tr))
            for t in plan.tasks for con in plan.contracts for d in range(plan.draws) for tr in plan.transports]
    todo = [w for w in work if (w[4], w[3]) not in done]
    c.outcome.reused = len(work) - len(todo)
    c.progress.on_generation_total(0)
    c.progress.on_execution_total(len(todo))
    api = anyio.CapacityLimiter(plan.api_concurrency)
    ex = anyio.CapacityLimiter(plan.exec_concurrency)
    open_chains = anyio.CapacityLimiter(max(plan.api_concurrency, plan.exec_concurrency))
    native = None
    if "native" in plan.contracts:
        from .native import NativeExecutor  # the MCP SDK, only for the native contract (about a second)
        native = await NativeExecutor(plan.transports, plan.server_url).__aenter__()
    try:
        tools = await native.tools() if native else []
        with JsonlWriter(results, follow=False) as res, JsonlWriter(c.out / "errors.jsonl", follow=False) as errw:
            async def one(task: Task, contract: str, draw: int, transport: str, cid: str) -> None:
                where = {"stage": "chain", "task_id": task.id, "contract": contract, "transport": transport,
                         "draw": draw, "reply_id": cid}
                try:
                    async with open_chains:
                        record = await _chain(c, task, contract, draw, transport, cid, tools, native, api, ex)
                except ProviderError as e:
                    c.write_error(errw, {**where, "error": str(e), "status": e.status, "attempts": e.attempts})
                    return
                except Exception as e:  # noqa: BLE001 - one broken chain must not abort the campaign
                    c.write_error(errw, {**where, "error": describe(e)})
                    return
                await anyio.to_thread.run_sync(res.write, record)  # the whole chain, in one line; fsynced off the loop
                c.outcome.generated += len(record.turns or [])
                c.outcome.executed += 1
                c.progress.on_executed(record)

            async with anyio.create_task_group() as tg:
                for w in todo:
                    tg.start_soon(one, *w)
    finally:
        if native:
            await native.__aexit__(None, None, None)
        aclose = getattr(c.provider, "aclose", None)
        if aclose:
            await aclose()


async def _chain(c: CampaignRun, task: Task, contract: str, draw: int, transport: str, cid: str, tools: list,
                 native: NativeExecutor | None, api: anyio.CapacityLimiter, ex: anyio.CapacityLimiter) -> Record:
    config = c.provider.config
    request = GenerationRequest.for_task(task, contract, config, draw, native_tool=c.plan.native_tool,
                                         turns=c.plan.turns)
    if contract == "native" and tools:
        request = request.model_copy(update={"tools": tools})
    extra_versions = {**versions(), "prompt": prompt_version()}
    fields: dict[str, Any] = dict(reply="", run_id=c.run_id, reply_id=cid, config=config, contract=contract,
                                  draw=draw, usage=Usage(), generate_ms=None, extra_versions=extra_versions)
    if contract == "native" and native is not None:
        async with native.session(task.id, transport) as run_doc:
            async def run(command: str) -> Record:
                return native_record(await run_doc(command), fields)

            result = await run_chain(c.provider, request, run, api=api, ex=ex, reply_text=reply_text)
    else:
        async with chain(task, transport, limits=command_limits(), **fields) as run:
            result = await run_chain(c.provider, request, run, api=api, ex=ex, reply_text=reply_text)
    record = chain_record(result, lambda reason: no_command_record(task, get(transport).name, reason, **fields),
                          {"run_id": c.run_id, "reply_id": cid, "config": config, "contract": contract, "draw": draw})
    if contract == "native":
        record = record.model_copy(update={"native_tool": c.plan.native_tool})
    return stamped(record, c.plan.exec_concurrency)
