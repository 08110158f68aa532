"""Campaigns: generate each reply once, then replay it on every transport.

Layout of ``--out DIR``:

* ``replies.jsonl``: one line per (config, task, contract, draw), written before
  any execution of that reply. It is a reply store: ``--model replay:DIR/replies.jsonl``
  and ``quotebench replay`` read it back.
* ``results.jsonl``: one record per (reply, transport).
* ``errors.jsonl``: generations that failed after the provider's last retry
  (HTTP errors, timeouts), executions whose MCP path failed or whose path lacks a
  component of this machine (``harness: ...``), and any unexpected
  exception in one generation or execution (one line each: ``stage``,
  ``task_id``, ``contract``, ``transport``, ``reply_id``, ``error`` =
  ``"Type: message"``). They are errors, never model failures; one of them never
  stops the rest of the campaign, and a rerun tries them again.

Resume: each unit of work has a ``key`` derived from what identifies it (config,
params, prompt version, suite version, task, contract, draw), so a rerun with
the same ``--out`` skips every reply already stored under its key and every
(config, reply, transport) already recorded: a campaign killed at any point
loses nothing it had written and duplicates nothing. A torn last line of
``replies.jsonl`` or ``results.jsonl`` (the kill cut a write short) is removed
when the campaign reopens the file, with a note on stderr, and its work is done
again; any other bad line stops the campaign before it starts (exit 2, naming
the file and line). A reply made under another
prompt or suite version has another key and is never reused. The reply's
``reply_id`` is the key, except for a reply store (``replay:FILE``) line that
has its own ``reply_id``: that one is kept, so ``run --model replay:`` and
``quotebench replay`` give the same ids. Records carry the ``versions`` stored
with their reply (what it was generated under), not the current ones.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from tasks.schema import Task
from transports.execute import no_command_record
from transports.results.record import Record, Usage, versions
from transports.registry import get
from transports.results.store import JsonlWriter, read_jsonl

from ..adapters.providers.base import Generation, GenerationRequest, Provider, ProviderError
from ..replies.contracts import PROMPT_VERSION
from .jobs import stamped
from .limits import command_limits
from .loop import combine
from .workers import Workers, execute_with, maybe_workers
from .work import CampaignRun, Outcome, config_key, describe, native_record, reply_text, same_axes, stored_label, task_key

if TYPE_CHECKING:
    from .native import NativeExecutor


def reply_id_for(config_key: str, task_id: str, contract: str, draw: int) -> str:
    digest = hashlib.sha256(f"{config_key}\0{task_id}\0{contract}\0{draw}".encode()).hexdigest()[:16]
    return f"r-{digest}"


def reply_line(key: str, task: Task, contract: str, draw: int, provider: Provider, gen: Generation) -> dict[str, Any]:
    """The replies.jsonl line: ``key`` identifies the work (resume), ``reply_id`` the reply (the store's own
    id for a replayed reply, else the key)."""
    from transports.sandbox import default_userland

    ext = gen.extract(contract)
    return {
        "reply_id": gen.reply_id or key, "key": key, "task_id": task.id, "contract": contract, "draw": draw,
        "suite": task.suite, "userland": default_userland(),  # replayed on another suite: refused (replies.store)
        "config": provider.config.model_dump(mode="json"),
        "reply": reply_text(gen, contract),
        "tool_calls": [c.model_dump(mode="json") for c in gen.tool_calls],
        "command": ext.command, "extraction": {"method": ext.method, "error": ext.error},
        **({"commands": ext.commands} if ext.commands else {}),
        "usage": gen.usage.model_dump(mode="json"), "timing": {"generate_ms": round(gen.generate_ms, 3)},
        "stop_reason": gen.stop_reason, "attempts": gen.attempts,
        "versions": {**versions(), "prompt": PROMPT_VERSION},
    }


def _load_replies(path: Path) -> dict[str, dict[str, Any]]:
    """Stored replies by work key (lines written before keys existed are keyed by their reply_id)."""
    replies: dict[str, dict[str, Any]] = {}
    if path.exists():
        for obj in read_jsonl(path, warn=None, follow=False):  # a torn last line: the writer removes it, saying so
            rid = obj.get("reply_id")
            key = obj.get("key", rid)
            if isinstance(rid, str) and isinstance(key, str) and key not in replies \
                    and isinstance(obj.get("task_id"), str):
                replies[key] = obj
    return replies


CAMPAIGN_FILES = ("replies.jsonl", "results.jsonl", "errors.jsonl")


def check_resume_files(out: Path) -> None:
    """Read the files a rerun resumes from, so that a bad line in them is refused (:class:`StoreError`, one
    line naming the file and line) before anything starts; a torn last line is left to the writer.

    A campaign directory may come from elsewhere: each of its files must be a regular file in it, never a
    symlink (appending through one would write outside the directory) nor a FIFO or device."""
    for name in CAMPAIGN_FILES:
        if os.path.lexists(out / name):
            for _ in read_jsonl(out / name, warn=None, follow=False):
                pass


def _done_key(label: str, rec: dict[str, Any], transport: Any) -> tuple[Any, ...]:
    """What a results line settles: this config's execution of this reply (for this task, contract and draw)
    on this transport. ``rec`` is a record or a stored reply."""
    return (label, rec.get("reply_id"), rec.get("task_id"), rec.get("contract"), rec.get("draw", 0), transport)


class Campaign(CampaignRun):
    """A campaign: the one-shot design here, each reply generated once and replayed on every transport; with
    ``plan.turns`` > 1 the multi-turn arm (:func:`qb_client.campaign.chains.run_chains`) instead."""

    _workers: Workers | None = None  # where its executions run (qb_client.campaign.workers), while it runs

    async def run(self) -> Outcome:
        self.out.mkdir(parents=True, exist_ok=True)
        if self.plan.turns > 1:
            from .chains import run_chains

            await run_chains(self)
            return self.outcome
        replies = _load_replies(self.out / "replies.jsonl")
        label = self.provider.config.label
        done = {_done_key(stored_label(r.get("config")), r, r.get("transport"))
                for r in read_jsonl(self.out / "results.jsonl", warn=None, follow=False)
                if same_axes(r, self.plan)} if (self.out / "results.jsonl").exists() else set()
        key = config_key(self.provider)
        work = [(t, c, d, reply_id_for(key, task_key(t), c, d))
                for t in self.plan.tasks for c in self.plan.contracts for d in range(self.plan.draws)]
        to_generate = [w for w in work if w[3] not in replies]
        self.outcome.reused = len(work) - len(to_generate)
        self.progress.on_generation_total(len(to_generate))
        executions = sum(1 for w in work for tr in self.plan.transports
                         if w[3] not in replies or _done_key(label, replies[w[3]], tr) not in done)
        self.progress.on_execution_total(executions)
        api = anyio.CapacityLimiter(self.plan.api_concurrency)
        ex = anyio.CapacityLimiter(self.plan.exec_concurrency)
        native = None
        if "native" in self.plan.contracts:
            from .native import NativeExecutor  # the MCP SDK, only for the native contract (about a second)
            native = await NativeExecutor(self.plan.transports, self.plan.server_url).__aenter__()
        try:
            tools = await native.tools() if native else []
            async with maybe_workers(self.plan.exec_concurrency, self.plan.transports, executions) as workers:
                self._workers = workers
                with JsonlWriter(self.out / "replies.jsonl", follow=False) as rw, \
                        JsonlWriter(self.out / "results.jsonl", follow=False) as res, \
                        JsonlWriter(self.out / "errors.jsonl", follow=False) as errw:
                    async def one(task: Task, contract: str, draw: int, rid: str) -> None:
                        stored = replies.get(rid)
                        if stored is None:
                            async with api:
                                stored = await self._generate(task, contract, draw, rid, tools, errw)
                            if stored is None:
                                return
                            rw.write(stored)  # durable before anything of it runs
                            self.progress.on_generated()
                        async with anyio.create_task_group() as tg:
                            for tr in self.plan.transports:
                                if _done_key(label, stored, tr) not in done:
                                    tg.start_soon(self._execute, task, stored, tr, ex, res, errw, native)

                    async with anyio.create_task_group() as tg:
                        for w in work:
                            tg.start_soon(one, *w)
        finally:
            if native:
                await native.__aexit__(None, None, None)
            aclose = getattr(self.provider, "aclose", None)
            if aclose:
                await aclose()
        return self.outcome

    async def _generate(self, task: Task, contract: str, draw: int, rid: str, tools: list,
                        errw: JsonlWriter) -> dict[str, Any] | None:
        where = {"stage": "generate", "task_id": task.id, "contract": contract, "transport": None, "draw": draw,
                 "reply_id": rid}
        try:
            request = GenerationRequest.for_task(task, contract, self.provider.config, draw,
                                                 native_tool=self.plan.native_tool)
            if contract == "native" and tools:
                request = request.model_copy(update={"tools": tools})
            gen = await self.provider.generate(request)
            line = reply_line(rid, task, contract, draw, self.provider, gen)
        except ProviderError as e:
            self.write_error(errw, {**where, "error": str(e), "status": e.status, "attempts": e.attempts})
            return None
        except Exception as e:  # noqa: BLE001 - one broken generation must not abort the campaign
            self.write_error(errw, {**where, "error": describe(e)})
            return None
        self.outcome.generated += 1
        return line

    async def _execute(self, task: Task, stored: dict[str, Any], transport: str, ex: anyio.CapacityLimiter,
                       res: JsonlWriter, errw: JsonlWriter, native: NativeExecutor | None) -> None:
        """One (reply, transport) into results.jsonl; any exception becomes an errors.jsonl line instead
        (a rerun tries it again), so one execution never aborts the campaign."""
        try:
            record = await self._record(task, stored, transport, ex, native)
            if record.contract == "native":
                record = record.model_copy(update={"native_tool": self.plan.native_tool})
            record = stamped(record, self.plan.exec_concurrency)
        except Exception as e:  # noqa: BLE001 - the MCP path failing, E2BIG, a bug: an error, not a verdict
            self.write_error(errw, {"stage": "execute", "task_id": task.id, "contract": stored.get("contract"),
                               "transport": transport, "draw": stored.get("draw", 0),
                               "reply_id": stored.get("reply_id"), "error": describe(e)})
            return
        if record.error:  # a component the path needs is missing: the harness's failure, retried on a rerun
            self.write_error(errw, {"stage": "execute", "task_id": task.id, "contract": stored.get("contract"),
                               "transport": transport, "draw": stored.get("draw", 0),
                               "reply_id": stored.get("reply_id"), "error": record.error})
            return
        await anyio.to_thread.run_sync(res.write, record)  # fsynced: never on the loop timing the runs
        self.outcome.executed += 1
        self.progress.on_executed(record)

    async def _record(self, task: Task, stored: dict[str, Any], transport: str, ex: anyio.CapacityLimiter,
                      native: NativeExecutor | None) -> Record:
        contract = stored["contract"]
        stored_versions = stored.get("versions")
        if not isinstance(stored_versions, dict):
            stored_versions = {"prompt": PROMPT_VERSION}
        fields = dict(reply=stored.get("reply") or "", run_id=self.run_id, reply_id=stored["reply_id"],
                      config=self.provider.config, contract=contract, draw=stored.get("draw", 0),
                      usage=Usage.model_validate(stored.get("usage") or {}),
                      generate_ms=(stored.get("timing") or {}).get("generate_ms"),
                      extra_versions={str(k): str(v) for k, v in stored_versions.items()})
        command = stored.get("command")
        async with ex:
            if command is None:
                reason = (stored.get("extraction") or {}).get("error") or "no command in the reply"
                return no_command_record(task, get(transport).name, reason, **fields)
            if contract == "native" and native is not None:
                commands = stored.get("commands") or [command]  # a shell call's commands, in one sandbox
                async with native.session(task.id, transport) as run:
                    docs = [await run(c) for c in commands]
                return combine([native_record(doc, fields) for doc in docs])
            return await execute_with(self._workers, task, transport, command, limits=command_limits(), **fields)
