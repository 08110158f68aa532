"""``quotebench import-inspect LOG... --out DIR``: Inspect eval logs into our reply store and records.

Each scored sample of a ``quotebench/quotebench`` log gives one line of
``DIR/replies.jsonl`` (the reply, its tool calls, R as the scorer executed it,
usage, timing: a reply store that ``quotebench replay`` and ``run --model
replay:`` read) and one record per transport in ``DIR/results.jsonl`` (the
records the scorer made, read back from the score's metadata), so ``quotebench
report DIR/results.jsonl`` gives the decomposition of a model run through Inspect.

Identity comes from the log (:mod:`.identity`): the config from the eval's
model and generation config, ``run_id`` from the eval's run, the reply id from
the sample's uuid, the draw from the epoch.

Every log is read and checked before anything is written, so a bad log (not a
log, not a QuoteBench log, a sample without its task or contract, a record that
is not a record) is one line naming the file, exit 2, and writes nothing.
Importing the same log again adds nothing. Samples that errored or were never
scored are left out with a note (an error is not a model failure). A second,
different reply for a (config, task, contract, draw) already held, as from two
evals of one model, is refused like a reply store refuses it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from transports.results.record import ConfigInfo, Record
from transports.results.store import JsonlWriter, StoreError, read_jsonl

from ...console import BadInput, one_line
from .identity import config_for, draw_of, reply_id_of
from .reply import read_reply
from .scorer import RECORDS
from .task import NAME


@dataclass
class Imported:
    """What the logs hold, checked; nothing written yet."""

    replies: list[dict[str, Any]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Written:
    replies: int = 0
    records: int = 0
    already: int = 0
    notes: list[str] = field(default_factory=list)


def read_log(path: Path) -> Any:
    """The whole log, by Inspect's own reader; anything it cannot read is bad input naming the file."""
    from inspect_ai.log import read_eval_log

    from .logcheck import LogTooLarge, check_log

    try:
        check_log(path)  # a FIFO, a device, a zip bomb: refused before Inspect inflates anything
    except FileNotFoundError:
        raise BadInput(f"{path}: no such log file") from None
    except (LogTooLarge, OSError) as e:
        raise BadInput(one_line(str(e))) from None
    try:
        log = read_eval_log(str(path), resolve_attachments=True)
    except Exception as e:  # noqa: BLE001 - a zip error, JSON, validation: all say the file is not a log
        raise BadInput(f"{path}: not an Inspect eval log ({one_line(f'{type(e).__name__}: {e}')})") from None
    names = {log.eval.task, log.eval.task_registry_name}
    if NAME not in names:
        raise BadInput(f"{path}: a log of task '{log.eval.task}', not of {NAME}")
    if not log.samples:
        raise BadInput(f"{path}: holds no samples (status {log.status})")
    return log


def _verdict_score(sample: Any) -> Any | None:
    for score in (sample.scores or {}).values():
        if isinstance(score.metadata, dict) and RECORDS in score.metadata:
            return score
    return None


def _record(path: Path, where: str, k: int, doc: Any, identity: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise BadInput(f"{path}: {where}: records[{k}] is not an object")
    try:
        rec = Record.model_validate({**doc, **identity})
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise BadInput(f"{path}: {where}: records[{k}]: field '{loc}': {err['msg']}") from None
    return rec.model_dump(mode="json")


def from_log(path: Path, log: Any) -> Imported:
    config: ConfigInfo = config_for(log.eval.model, log.eval.model_generate_config)
    got = Imported()
    for sample in log.samples:
        where = f"sample {sample.id} epoch {sample.epoch}"
        meta = sample.metadata or {}
        for name in ("task_id", "contract"):
            if not isinstance(meta.get(name), str):
                raise BadInput(f"{path}: {where}: metadata field '{name}' is missing or not a string")
        score = _verdict_score(sample)
        if sample.error is not None or score is None:
            why = "errored" if sample.error is not None else "has no QuoteBench score"
            got.notes.append(f"{path}: {where} {why}; left out")
            continue
        contract = meta["contract"]
        rid = reply_id_of(sample.uuid or f"{log.eval.eval_id}\0{sample.id}\0{sample.epoch}")
        draw = draw_of(sample.epoch)
        identity = {"run_id": log.eval.run_id, "reply_id": rid, "config": config.model_dump(mode="json"),
                    "draw": draw, "contract": contract, "task_id": meta["task_id"]}
        docs = score.metadata[RECORDS]
        if not isinstance(docs, list) or not docs:
            raise BadInput(f"{path}: {where}: score metadata field '{RECORDS}' is not a non-empty list")
        records = [_record(path, where, k, d, identity) for k, d in enumerate(docs)]
        reply = read_reply(sample.output, contract)
        extraction = score.metadata.get("extraction") or {"method": reply.extraction.method,
                                                           "error": reply.extraction.error}
        usage = records[0]["usage"]
        got.replies.append({
            "reply_id": rid, "task_id": meta["task_id"], "contract": contract, "draw": draw,
            "suite": records[0].get("suite", "public"), "userland": records[0].get("userland", "gnu"),
            "config": identity["config"], "reply": reply.stored_text(contract),
            "tool_calls": [c.model_dump(mode="json") for c in reply.tool_calls],
            "command": score.metadata.get("command", reply.extraction.command), "extraction": extraction,
            "usage": usage, "timing": {"generate_ms": records[0]["timing"]["generate_ms"]},
            "stop_reason": sample.output.stop_reason if sample.output.choices else None,
            "versions": records[0]["versions"],
            "source": {"harness": "inspect_ai", "log": str(path), "eval_id": log.eval.eval_id,
                       "sample_id": sample.id, "epoch": sample.epoch},
        })
        got.records.extend(records)
    return got


def _key(line: dict[str, Any]) -> tuple[str, str, str, int]:
    return (ConfigInfo.model_validate(line["config"]).label, line["task_id"], line["contract"], line["draw"])


def _existing(path: Path) -> list[dict[str, Any]]:
    try:
        return [o for o in read_jsonl(path, warn=None, follow=False) if isinstance(o, dict)] \
            if os.path.lexists(path) else []
    except StoreError as e:
        raise BadInput(str(e)) from None


def import_logs(paths: list[Path], out: Path) -> Written:
    """Read and check every log, then append what ``out`` does not hold yet."""
    got = Imported()
    origin: dict[tuple[str, str, str, int], tuple[str, str]] = {}
    for path in paths:
        one = from_log(path, read_log(path))
        for line in one.replies:
            key = _key(line)
            seen = origin.get(key)
            if seen is not None and seen[0] != line["reply_id"]:
                raise BadInput(f"{path}: a second reply for task {key[1]}, contract {key[2]}, draw {key[3]} of "
                               f"config {key[0]} (the other is in {seen[1]}); import separate evals of one model "
                               "into separate --out directories")
            origin[key] = (line["reply_id"], str(path))
        got.replies += one.replies
        got.records += one.records
        got.notes += one.notes
    stored = _existing(out / "replies.jsonl")
    have_ids = {o.get("reply_id") for o in stored}
    for o in stored:
        try:
            key = _key(o)
        except (KeyError, TypeError, ValueError):
            continue
        if key in origin and o.get("reply_id") != origin[key][0]:
            raise BadInput(f"{out / 'replies.jsonl'}: already holds another reply for task {key[1]}, contract "
                           f"{key[2]}, draw {key[3]} of config {key[0]}; import into a new --out directory")
    done = {(o.get("reply_id"), o.get("transport")) for o in _existing(out / "results.jsonl")}
    written = Written(notes=got.notes)
    with JsonlWriter(out / "replies.jsonl", follow=False) as rw, \
            JsonlWriter(out / "results.jsonl", follow=False) as res:
        seen_ids: set[str] = set()
        for line in got.replies:
            if line["reply_id"] in have_ids or line["reply_id"] in seen_ids:
                written.already += 1
                continue
            seen_ids.add(line["reply_id"])
            rw.write(line)
            written.replies += 1
        for rec in got.records:
            key = (rec["reply_id"], rec["transport"])
            if key not in done:
                done.add(key)
                res.write(rec)
                written.records += 1
    return written


def summary(w: Written, out: Path) -> str:
    text = f"imported {w.replies} replies and {w.records} records into {out}"
    if w.already:
        text += f" ({w.already} replies were there already)"
    return text + f"; next: quotebench report {out / 'results.jsonl'}"
