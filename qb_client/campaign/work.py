"""What both arms of a campaign share (:mod:`.oneshot`, :mod:`.chains`): the plan, the progress callbacks,
the outcome, the keys that name each unit of work (resume), the errors it writes, and how a stored line or a
native record is read back.

A campaign run is a :class:`CampaignRun`: the one-shot :class:`~qb_client.campaign.oneshot.Campaign` is one,
and hands itself to :func:`~qb_client.campaign.chains.run_chains` for the multi-turn arm, which needs nothing
of it beyond what is here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.schema import Task
from transports.results.record import Record, new_id, versions
from transports.results.store import JsonlWriter

from ..adapters.providers.base import Generation, Provider
from ..replies.contracts import PROMPT_VERSION, check_contract
from .jobs import cpu_count
from .workers import error_name


@dataclass
class Plan:
    tasks: list[Task]
    contracts: list[str]
    transports: list[str]
    draws: int = 1
    api_concurrency: int = 4
    exec_concurrency: int = field(default_factory=cpu_count)
    """Executions at once (``--jobs``); every record says it (:mod:`.jobs`)."""
    server_url: str | None = None
    native_tool: str = "function"
    """``builtin``: the native contract offers the provider's own shell tool (``run --native-tool``)."""
    turns: int = 1
    """K > 1: the multi-turn arm (:mod:`qb_client.campaign.loop`, :mod:`qb_client.campaign.chains`); 1 = one-shot."""

    def __post_init__(self) -> None:
        # a name given twice would generate and execute the same work twice
        self.contracts = list(dict.fromkeys(self.contracts))
        self.transports = list(dict.fromkeys(self.transports))


@dataclass
class Progress:
    """Callbacks for the CLI's progress bars; all optional."""

    on_generation_total: Callable[[int], None] = lambda n: None
    on_generated: Callable[[], None] = lambda: None
    on_execution_total: Callable[[int], None] = lambda n: None
    on_executed: Callable[[Record], None] = lambda r: None


@dataclass
class Outcome:
    generated: int = 0
    reused: int = 0
    executed: int = 0
    errors: list[str] = field(default_factory=list)


def config_key(provider: Provider) -> str:
    """What makes two replies interchangeable: config, params, prompt version and suite version."""
    c = provider.config
    return f"{c.label}\0{json.dumps(c.params, sort_keys=True)}\0{PROMPT_VERSION}\0{versions()['suite']}"


def task_key(task: Task) -> str:
    """What names a task in a reply key: its id, prefixed by its suite unless that is the public one (so the
    keys of public campaigns stay as they were, and a generated suite's replies are never reused for another)."""
    return task.id if task.suite == "public" else f"{task.suite}/{task.id}"


def same_axes(record: dict[str, Any], plan: Plan) -> bool:
    """Whether a results line was made in this run's suite and userland (only those settle its work: the same
    reply is executed again under another userland)."""
    from transports.sandbox import default_userland

    suite = plan.tasks[0].suite if plan.tasks else "public"
    return (record.get("suite", "public"), record.get("userland", "gnu")) == (suite, default_userland())


def describe(e: BaseException) -> str:
    """``Type: message`` on one line (the type it was raised as, in a worker process too)."""
    text = " ".join(str(e).split())
    return f"{error_name(e)}: {text}" if text else error_name(e)


def stored_label(config: Any) -> str:
    """The label of a stored line's config (``provider:model@effort``, ``+variant`` for another design), as
    :attr:`transports.results.record.ConfigInfo.label` makes it; a line without a config object gets a label no
    provider has, so it never settles a provider's work."""
    c = config if isinstance(config, dict) else {}
    label = "{}:{}@{}".format(c.get("provider"), c.get("model"), c.get("effort") or "unset")
    return f"{label}+{c['variant']}" if c.get("variant") else label  # another design (ConfigInfo.variant)


def native_record(doc: dict[str, Any], fields: dict[str, Any]) -> Record:
    """The server's record with the campaign's identity (reply, config, draw, usage) put back on it."""
    rec = Record.model_validate(doc)
    timing = rec.timing.model_copy(update={"generate_ms": fields["generate_ms"]})
    return rec.model_copy(update={
        "reply": fields["reply"], "run_id": fields["run_id"], "reply_id": fields["reply_id"],
        "config": fields["config"], "contract": "native", "draw": fields["draw"], "usage": fields["usage"],
        "timing": timing, "versions": {**rec.versions, **fields["extra_versions"]},
    })


def reply_text(gen: Generation, contract: str) -> str:
    """The full reply as text: for native, the text plus the tool calls as the provider returned them."""
    if contract != "native":
        return gen.text
    return json.dumps({"text": gen.text, "tool_calls": [c.model_dump(mode="json") for c in gen.tool_calls]},
                      ensure_ascii=False)


class CampaignRun:
    """One run of a campaign: its provider, plan, output directory, progress and outcome, and its errors file."""

    def __init__(self, provider: Provider, plan: Plan, out: Path, progress: Progress | None = None) -> None:
        for c in plan.contracts:
            check_contract(c)
        self.provider = provider
        self.plan = plan
        self.out = out
        self.progress = progress or Progress()
        self.run_id = new_id()
        self.outcome = Outcome()

    def write_error(self, errw: JsonlWriter, line: dict[str, Any]) -> None:
        """One ``errors.jsonl`` line (never a verdict: a rerun tries the work again), also kept in the outcome."""
        line = {"run_id": self.run_id, "config": self.provider.config.model_dump(mode="json"),
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **line}
        errw.write(line)
        self.outcome.errors.append(f"{line.get('task_id')} {line.get('contract')}: {line['error']}")
