"""The agent loop: several commands in one sandbox, and what the model is shown between them.

Two uses share it:

* **a shell call with several commands** (OpenAI's built-in ``shell`` tool sends ``action.commands``, a
  list): each runs in order in the one sandbox, as a local shell environment would; :func:`combine` makes
  the one record (top-level fields: the first command, R; verdict: the state after the last; ``steps``:
  all of them);
* **the multi-turn arm** (``run --turns K``, K > 1): :func:`run_chain` asks the model, runs its command
  through the transport in the chain's sandbox, shows it the exit code, stdout and stderr (the MCP shell
  tool's own rendering, never the verdict) as a tool result for native or a user message for the text
  contracts, and asks again, until the model stops (a native reply without a tool call; a text reply
  that is ``DONE`` alone, or empty) or K actions have run. The final verdict is on the state after the
  last action.

The multi-turn arm is on-policy per transport: a reply after turn 1 depends on what the transport did, so
there is no fixed-reply replay; each (task, contract, draw, transport) is its own chain, stored whole in
one record (``turns``), written only when the chain has ended. Its sandbox dies with the process, so a
chain cut short by a kill is run again from turn 1 on resume; a written chain is never run again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from qb_server.observation import render
from tasks.schema import Task
from tasks.validate import CheckResult, Verdict
from transports.results.record import Record, Step, Turn, Usage

from ..replies.contracts import is_stop, loop_observation
from ..adapters.providers.base import Exchange, Generation, GenerationRequest, Observation, Provider

Runner = Callable[[str], Awaitable[Record]]
"""Runs one command in the chain's sandbox and returns its record (judged on the state after it)."""


def step_of(rec: Record) -> Step:
    return Step(command=rec.command, received=rec.received, damaged=rec.damaged, exit_code=rec.exit_code,
                stdout=rec.stdout, stderr=rec.stderr, timed_out=rec.timed_out, transport_error=rec.transport_error,
                passed=rec.verdict.passed)


def observation_of(rec: Record) -> Observation:
    """What the model is shown of one command: the MCP shell tool's text, and its parts for structured
    results (a transport error is shown on stderr, without an exit code)."""
    text, _, is_error = render(rec)
    stderr = rec.stderr.text
    if rec.exit_code is None and not rec.timed_out:
        stderr = text.removeprefix("error: ")
    return Observation(text=text, is_error=is_error, stdout=rec.stdout.text, stderr=stderr,
                       exit_code=rec.exit_code, timed_out=rec.timed_out)


def combine(records: list[Record]) -> Record:
    """The record of one reply whose call ran several commands: the first's fields (it is R), the verdict
    after the last, every command in ``steps``, exec time summed."""
    first, last = records[0], records[-1]
    if len(records) == 1:
        return first
    exec_ms = [r.timing.exec_ms for r in records if r.timing.exec_ms is not None]
    timing = first.timing.model_copy(update={"exec_ms": round(sum(exec_ms), 3) if exec_ms else None})
    return first.model_copy(update={"verdict": last.verdict, "steps": [step_of(r) for r in records],
                                    "timing": timing})


async def run_commands(run: Runner, commands: list[str], ex: anyio.CapacityLimiter) -> list[Record]:
    records = []
    for c in commands:
        async with ex:
            records.append(await run(c))
    return records


@dataclass
class ChainResult:
    turns: list[Turn]
    last: Record | None
    """The record of the final turn's first command (None when no turn ran a command)."""
    verdict: Verdict
    usage: Usage
    generate_ms: float


def _add(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else a + b


async def run_chain(provider: Provider, request: GenerationRequest, run: Runner, *, api: anyio.CapacityLimiter,
                    ex: anyio.CapacityLimiter, reply_text: Callable[[Generation, str], str]) -> ChainResult:
    """One chain of up to ``request.turns`` actions (see the module docstring). A provider error raises
    (the campaign records it as an error and the chain runs again on resume); a model that sends nothing
    runnable is recorded as such."""
    contract = request.contract or "raw"
    history: list[Exchange] = []
    turns: list[Turn] = []
    last: Record | None = None
    verdict = Verdict(passed=False, checks=[CheckResult(check="command", ok=False, detail="no command ran")])
    usage = Usage()
    generate_ms = 0.0
    for t in range(1, request.turns + 1):
        async with api:
            gen = await provider.generate(request.model_copy(update={"history": list(history)}))
        usage = Usage(input_tokens=_add(usage.input_tokens, gen.usage.input_tokens),
                      output_tokens=_add(usage.output_tokens, gen.usage.output_tokens),
                      reasoning_tokens=_add(usage.reasoning_tokens, gen.usage.reasoning_tokens))
        generate_ms += gen.generate_ms
        reply = reply_text(gen, contract)
        base: dict[str, Any] = dict(turn=t, reply=reply, usage=gen.usage, generate_ms=round(gen.generate_ms, 3),
                                    passed=verdict.passed)
        ext = gen.extract(contract)
        if contract == "native" and not gen.tool_calls:
            turns.append(Turn(command=None, stop="no-tool-call", **base))
            break
        if contract != "native" and is_stop(gen.text):
            turns.append(Turn(command=None, stop="done" if gen.text.strip() else "empty", **base))
            break
        if ext.command is None:  # a native call without a runnable command (bad arguments, a restart)
            detail = ext.error or "no command"
            turns.append(Turn(command=None, transport_error=detail, **base))
            history.append(Exchange(text=gen.text, tool_calls=gen.tool_calls, echo=gen.echo,
                                    observations=[Observation(text=f"error: {detail}", is_error=True, stderr=detail)]))
            continue
        records = await run_commands(run, ext.commands or [ext.command], ex)
        observations = [observation_of(r) for r in records]
        rec = combine(records)
        last, verdict = rec, rec.verdict
        turns.append(Turn(**{**step_of(rec).model_dump(), "passed": verdict.passed}, turn=t, reply=reply,
                          steps=rec.steps, usage=gen.usage, generate_ms=round(gen.generate_ms, 3)))
        history.append(Exchange(text=gen.text, tool_calls=gen.tool_calls, echo=gen.echo, observations=observations,
                                message=loop_observation("\n\n".join(o.text for o in observations))))
    return ChainResult(turns=turns, last=last, verdict=verdict, usage=usage, generate_ms=round(generate_ms, 3))


def chain_record(result: ChainResult, none_ran: Callable[[str], Record], fields: dict[str, Any]) -> Record:
    """The chain's one record: the final turn that ran a command at the top level (its reply, command,
    received, output), the final verdict, the whole chain in ``turns``, usage and generation time summed.
    ``none_ran`` makes the record of a chain in which no turn ran a command."""
    if result.last is None:
        reason = result.turns[-1].transport_error if result.turns and result.turns[-1].transport_error \
            else "the model ran no command"
        rec = none_ran(reason)
        reply = result.turns[-1].reply if result.turns else ""
    else:
        rec = result.last
        reply = next(t.reply for t in reversed(result.turns) if t.command is not None)
    timing = rec.timing.model_copy(update={"generate_ms": result.generate_ms})
    return rec.model_copy(update={**fields, "reply": reply, "verdict": result.verdict, "turns": result.turns,
                                  "usage": result.usage, "timing": timing})

