"""The crossed design as an Inspect scorer: each reply, generated once, replayed on every transport.

R is read by our contract code (:mod:`.reply`) and each execution is made by
``quotebench replay``'s own :func:`~qb_client.campaign.replay.replay_one` (a fresh
sandbox per transport, our validator on the final state), so a record here and
a record of our driver for the same reply cannot differ in anything but timing.

The score:

* ``value``: ``{transport: 1.0 | 0.0}``, one verdict per requested transport;
  the metrics (``{"*": [mean(), stderr()]}``) make ``inspect eval`` print each
  transport's pass rate;
* ``answer``: R (empty when the reply has none);
* ``explanation``: per transport, PASS or FAIL and one line per check;
* ``metadata``: the contract, the reply id, R, how it was extracted, and the
  full records (``records``), which ``quotebench import-inspect`` reads back.

An exception in one execution never fails the sample: it becomes a harness-error
record, as in ``quotebench replay`` (left out of every rate by the report, and
scored 0 here).
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from inspect_ai.model import get_model
from inspect_ai.scorer import Score, Scorer, Target, mean, scorer, stderr
from inspect_ai.solver import TaskState

from transports.results.record import Usage

from ...replies.contracts import PROMPT_VERSION
from ...campaign.replay import StoredReply, error_record, replay_one
from .identity import config_for, draw_of, reply_id_of
from .reply import Reply, read_reply

RECORDS = "records"


def extra_versions() -> dict[str, str]:
    """What the records add to ``versions``: the prompt wording and the Inspect release that ran them."""
    return {"prompt": PROMPT_VERSION, "inspect_ai": version("inspect_ai")}


def stored_reply(state: TaskState, reply: Reply, contract: str) -> StoredReply:
    output = state.output
    usage = output.usage
    return StoredReply(
        reply_id=reply_id_of(state.uuid), task_id=state.metadata["task_id"], contract=contract,
        draw=draw_of(state.epoch), config=config_for(str(state.model), get_model().config),
        reply=reply.stored_text(contract), command=reply.extraction.command, reason=reply.extraction.error,
        usage=Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                    reasoning_tokens=usage.reasoning_tokens) if usage else Usage(),
        generate_ms=round(output.time * 1000, 3) if output.time is not None else None)


def explain(records: list[dict[str, Any]]) -> str:
    lines = []
    for rec in records:
        verdict = rec["verdict"]
        lines.append(f"{rec['transport']}: {'PASS' if verdict['passed'] else 'FAIL'}")
        lines.extend(f"  {'ok  ' if c['ok'] else 'FAIL'} {c['check']}: {c['detail']}" for c in verdict["checks"])
    return "\n".join(lines)


@scorer(metrics={"*": [mean(), stderr()]})
def verdicts(contract: str, transports: list[str]) -> Scorer:
    """Our validator's verdict on every transport in ``transports`` for the one reply of each sample."""

    async def score(state: TaskState, target: Target) -> Score:
        reply = read_reply(state.output, contract)
        stored = stored_reply(state, reply, contract)
        extra = extra_versions()
        records = []
        for transport in transports:
            try:
                record = await replay_one(stored, transport, stored.reply_id, extra)
            except Exception as e:  # noqa: BLE001 - one execution must never fail the sample
                record = error_record(stored, transport, stored.reply_id, extra, e)
            records.append(record.model_dump(mode="json"))
        value = {r["transport"]: 1.0 if r["verdict"]["passed"] else 0.0 for r in records}
        return Score(value=value, answer=stored.command or "", explanation=explain(records),
                     metadata={"contract": contract, "reply_id": stored.reply_id, "command": stored.command,
                               "extraction": {"method": reply.extraction.method, "error": reply.extraction.error},
                               RECORDS: records})

    return score
