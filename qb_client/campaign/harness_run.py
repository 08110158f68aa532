"""A harness run: the real harness drives its model through each task, recorded so that it replays offline.

One run per (task, draw): a fresh sandbox of the task; a :class:`~.harness_proxy.RecordingProxy` in front of
the upstream (a provider, the courier's script, or a replay); the harness started in the sandbox with the
task's instruction as its prompt (:func:`transports.harnesses.agent.run_agent`); the task's validator on the
final state. The record (``results.jsonl``) lists every tool call as a step:

* ``command``: the shell tool call's command, from the recorded model response (the store's bytes);
* ``received`` and ``exit_code``: the final shell's program and exit status, from the kernel's exec trace,
  paired with the commands in order (:func:`pair`): a command for which the harness started no shell is
  *refused* (``transport_error`` says so, ``received`` is null);
* ``passed``: the state is judged once, at the end: the last step carries the verdict, the others ``false``.

A run whose last request to the model failed (the provider's error status, a connection cut) ended on the
provider, not on the model: its record's ``error`` says so (``provider: turn N: ...``), it is left out of every
rate, and a rerun with the same ``--out`` runs it again.

The exchanges go to ``exchanges.jsonl`` (the run's reply store; written whole when the run ends, then its
record, so a run cut short leaves nothing a rerun would trust), each with the run's ``attempt`` id. There is
no ``replies.jsonl``: the run is on-policy (each reply depends on what the harness did with the last), as
in the multi-turn arm; its replay is :class:`~.harness_upstream.ReplayUpstream` answering from the store.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from tasks.schema import Task
from tasks.validate import Verdict
from transports.base import Delivery, HarnessRun
from transports.execute import build_record, verdict_for
from transports.harnesses.agent import Shell, run_agent
from transports.harnesses.harness import HarnessRoute
from transports.registry import get
from transports.results.record import ConfigInfo, Record, Step, Usage, new_id, versions
from transports.results.store import JsonlWriter, read_jsonl
from transports.sandbox import Limits, Sandbox

from .harness_proxy import Budget, RecordingProxy, Upstream
from .harness_upstream import ReplayUpstream
from .harness_wire import parse_reply
from .jobs import memory_jobs, stamped

CONTRACT = "harness"
"""A harness run's contract: the harness's own prompt and tools, the task's instruction as the user's."""
REFUSED = "refused: the harness started no shell for this command"


@dataclass
class HarnessPlan:
    harness: str
    tasks: list[Task]
    draws: int = 1
    max_turns: int = 30
    max_tokens: int | None = None
    wall_s: float = 300.0
    concurrency: int = 1
    """Runs at once (``--jobs``), held to the host's memory (:func:`.jobs.memory_jobs`)."""


@dataclass
class Outcome:
    executed: int = 0
    skipped: int = 0
    records: list[Record] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def route_at(spec: str) -> HarnessRoute:
    """The harness route of ``NAME`` or ``NAME@VERSION``: another release of the same harness, installed on
    first use like the pinned one (a replay through it shows where its requests diverge)."""
    name, _, version = spec.partition("@")
    route = get(name)
    assert isinstance(route, HarnessRoute)
    if not version or version == route.version:
        return route
    other = copy.copy(route)
    other.version = version
    other.package = dataclasses.replace(route.package, version=version)
    return other


def run_key(config: ConfigInfo, harness: str, version: str, task: Task, draw: int) -> str:
    """What makes a run unique: config (with its variant), harness and release, suite version, task, draw."""
    text = json.dumps([config.label, harness, version, versions()["suite"], task.id, draw])
    return "h-" + hashlib.sha256(text.encode()).hexdigest()[:16]


def pair(commands: list[str | None], shells: list[Shell]) -> tuple[list[tuple[str | None, Shell | None]], int]:
    """Each command with the final shell that ran it, in order, and how many shells ran no command.

    First the shells whose ``received`` is exactly a command are matched, in order (anchors); between two
    anchors the commands left take the shells left one by one (they arrived changed); a command with no shell
    left is refused (None), a shell with no command left is counted apart (the harness's own)."""
    anchors: list[tuple[int, int]] = []
    start = 0
    for i, c in enumerate(commands):
        k = next((k for k in range(start, len(shells)) if shells[k].received == c), None)
        if k is not None:
            anchors.append((i, k))
            start = k + 1
    chosen: list[Shell | None] = [None] * len(commands)
    for i, k in anchors:
        chosen[i] = shells[k]
    extra = 0
    bounds = [(-1, -1), *anchors, (len(commands), len(shells))]
    for (i0, k0), (i1, k1) in zip(bounds, bounds[1:]):
        cs, ss = range(i0 + 1, i1), range(k0 + 1, k1)
        for ci, sk in zip(cs, ss):
            chosen[ci] = shells[sk]
        extra += max(0, len(ss) - len(cs))
    return list(zip(commands, chosen)), extra


def steps_of(pairs: list[tuple[str | None, Shell | None]], verdict: Verdict) -> list[Step]:
    steps = []
    for n, (command, shell) in enumerate(pairs):
        last = n == len(pairs) - 1
        if shell is None:
            steps.append(Step(command=command, transport_error=REFUSED, passed=verdict.passed and last))
            continue
        steps.append(Step(command=command, received=shell.received, damaged=shell.received != command,
                          exit_code=shell.exit_code, passed=verdict.passed and last))
    return steps


class HarnessCampaign:
    """The runs of one config and one harness into ``out_dir``; resumable (a recorded run is not run again)."""

    def __init__(self, plan: HarnessPlan, config: ConfigInfo, model: str, out_dir: Path,
                 upstream_for: Callable[[Task, int, str], Upstream | None], secret: str | None = None) -> None:
        self.plan, self.config, self.model, self.out = plan, config, model, out_dir
        self.upstream_for, self.secret = upstream_for, secret
        self.route = route_at(plan.harness)
        self.run_id = new_id()

    def done(self) -> set[str]:
        path = self.out / "results.jsonl"
        if not path.exists():
            return set()
        return {r["reply_id"] for r in read_jsonl(path, follow=False) if isinstance(r.get("reply_id"), str)
                and not r.get("error")}

    async def run(self, on_record: Callable[[Record], None] | None = None) -> Outcome:
        outcome = Outcome()
        done = self.done()
        work = [(t, d) for t in self.plan.tasks for d in range(self.plan.draws)]
        todo = [(t, d) for t, d in work if run_key(self.config, self.route.harness, self.route.version, t, d) not in done]
        outcome.skipped = len(work) - len(todo)
        jobs = memory_jobs(self.plan.concurrency, Limits(timeout_s=self.plan.wall_s))
        limiter = anyio.Semaphore(jobs)
        with JsonlWriter(self.out / "exchanges.jsonl", follow=False) as exchanges, \
                JsonlWriter(self.out / "results.jsonl", follow=False) as results:
            async def one(task: Task, draw: int) -> None:
                async with limiter:
                    record = await self.one(task, draw, exchanges)
                if record is None:
                    return
                record = stamped(record, jobs)
                results.write(record)
                outcome.records.append(record)
                outcome.executed += 1
                if record.error:
                    outcome.errors.append(f"{task.id} draw {draw}: {record.error}")
                if on_record is not None:
                    on_record(record)

            async with anyio.create_task_group() as tg:
                for task, draw in todo:
                    tg.start_soon(one, task, draw)
        return outcome

    async def one(self, task: Task, draw: int, exchanges: JsonlWriter) -> Record | None:
        key = run_key(self.config, self.route.harness, self.route.version, task, draw)
        upstream = self.upstream_for(task, draw, key)
        if upstream is None:  # a replay without this run in its recording
            return None
        attempt = new_id()
        proxy = RecordingProxy(upstream, Budget(self.plan.max_turns, self.plan.max_tokens), self.secret)
        box = await anyio.to_thread.run_sync(lambda: Sandbox.create(task, Limits(timeout_s=self.plan.wall_s)))
        with box:
            async with proxy.serving() as proxy_dir:
                agent = await run_agent(self.route, box, prompt=task.instruction, model=self.model,
                                        proxy_dir=proxy_dir, max_turns=self.plan.max_turns)
            info = HarnessRun(self.route.harness, self.route.version)
            delivery = Delivery(received=None, execution=agent.execution, harness_error=agent.harness_error,
                                received_note=agent.note, harness=info)
            verdict = await anyio.to_thread.run_sync(verdict_for, task, box.workdir, delivery)
        if (close := getattr(upstream, "aclose", None)) is not None:
            await close()  # a provider's connection pool
        exs = sorted(proxy.exchanges, key=lambda e: (e.kind != "loop", e.index))
        for e in exs:  # a request that did not come through the launcher's relay is no turn of the harness
            e.foreign = e.peer_pid is None or e.peer_pid != agent.relay_pid
        loop = [e for e in exs if e.kind == "loop" and e.status == 200 and not e.foreign]
        replies = [parse_reply(e.fmt or "chat", e.response.encode("utf-8")) for e in loop]
        commands = [c for r in replies for c in r.commands]
        pairs, extra = pair(commands, agent.shells)
        steps = steps_of(pairs, verdict)
        usage = Usage(input_tokens=sum(r.input_tokens or 0 for r in replies),
                      output_tokens=sum(r.output_tokens or 0 for r in replies))
        for e in exs:
            exchanges.write({"attempt": attempt, "reply_id": key, "task_id": task.id, "draw": draw,
                             "harness": self.route.harness, "harness_version": self.route.version,
                             "config": self.config.model_dump(mode="json"), **e.dump()})
        ex = agent.execution
        stop = proxy.stop or ("time" if ex is not None and ex.timed_out else
                              "error" if agent.harness_error or any(e.error for e in exs) else "end")
        meta: dict[str, Any] = {
            "attempt": attempt, "turns": len(loop), "requests": len(exs), "stop": stop,
            "budget": {"max_turns": self.plan.max_turns, "max_tokens": self.plan.max_tokens, "wall_s": self.plan.wall_s},
            "tool_calls": len(commands), "shells": len(agent.shells), "unmatched_shells": extra,
            "refused": sum(1 for _, s in pairs if s is None), "foreign_requests": sum(1 for e in exs if e.foreign),
            "other_tools": sorted({t for r in replies for t in r.other_tools}),
            "upstream_errors": [e.error for e in exs if e.error][:5],
        }
        if isinstance(upstream, ReplayUpstream):
            meta["replayed_from"] = upstream.attempt
            meta["divergences"] = upstream.divergences
        last = steps[-1] if steps else None
        asked = [e for e in exs if e.kind == "loop" and not e.foreign and e.synthetic is None]
        failed = asked[-1] if asked and (asked[-1].error or asked[-1].status >= 400) else None
        provider_error = (f"provider: turn {failed.turn}: {failed.error or f'HTTP {failed.status}'}"
                          if failed is not None and agent.harness_error is None else None)
        top = Delivery(received=last.received if last else None, execution=ex, harness_error=agent.harness_error,
                       received_note=agent.note, harness=info)
        record = build_record(task, self.route.harness, last.command if last else None, top, verdict,
                              reply=replies[-1].text if replies else "", run_id=self.run_id, reply_id=key,
                              config=self.config, contract=CONTRACT, draw=draw, usage=usage,
                              generate_ms=round(sum(e.ms for e in loop), 3), userland=box.userland,
                              error=provider_error)
        if last is not None and last.transport_error:
            record.damaged = False
        return record.model_copy(update={"steps": steps, "agent": meta})


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """What must be identical between a recorded run and its replay: the task, the steps (command, received,
    exit code), the verdict, the turns and how the run stopped. The harness's release is left out, so a
    replay through another release says whether it did the same (its requests' divergences are apart)."""
    agent = record.get("agent") or {}
    return {"task_id": record.get("task_id"), "draw": record.get("draw"), "harness": record.get("harness"),
            "config": record.get("config"),
            "command": record.get("command"), "received": record.get("received"),
            "steps": [{k: s.get(k) for k in ("command", "received", "damaged", "exit_code", "transport_error", "passed")}
                      for s in record.get("steps") or []],
            "verdict": record.get("verdict"), "turns": agent.get("turns"), "stop": agent.get("stop"),
            "tool_calls": agent.get("tool_calls"), "refused": agent.get("refused")}
