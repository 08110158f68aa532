"""The two offline providers: ``reference`` (each task's own solutions) and ``replay:FILE`` (stored replies).

Both return replies shaped as a live model's would be, so the whole pipeline -
extraction included - runs unchanged: text contracts get a fenced ```bash block,
native gets a tool call.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from transports.results.record import ConfigInfo, Usage

from ...replies.contracts import NATIVE_TOOL, STOP_WORD, ToolCall, check_contract, fence, reference_reply
from .base import Generation, GenerationRequest, ProviderError


_WARNED: set[str] = set()


def _need_task(provider: str, request: GenerationRequest) -> tuple[str, str]:
    if request.task is None or request.contract is None:
        raise ProviderError(f"{provider}: the request carries no task and contract (use GenerationRequest.for_task)")
    return request.task.id, request.contract


class ReferenceProvider:
    """Replies with the task's reference solution under each contract: the offline pipeline check and ``demo``."""

    def __init__(self, effort: str = "unset", params: dict[str, Any] | None = None) -> None:
        self.config = ConfigInfo(provider="reference", model="reference", effort=effort or "unset",
                                 params=dict(params or {}))

    def __repr__(self) -> str:
        return f"ReferenceProvider({self.config.label!r})"

    async def generate(self, request: GenerationRequest) -> Generation:
        _need_task("reference", request)
        assert request.task is not None and request.contract is not None
        if request.history:  # a chain: the reference solution needs one action, then it is done
            return Generation(text="" if request.contract == "native" else STOP_WORD, stop_reason="reference")
        ref = reference_reply(request.task, request.contract)
        return Generation(text=ref.text, tool_calls=ref.tool_calls, stop_reason="reference")


class StoredReply(BaseModel):
    """One reply-store line (SPEC, "Record": task_id and command or reply; the rest optional)."""

    model_config = ConfigDict(extra="ignore")

    task_id: str
    command: str | None = None
    reply: str | None = None
    tool_calls: list[ToolCall] | None = None
    reply_id: str | None = None
    contract: str = "raw"
    config: ConfigInfo | None = None
    draw: int = 0
    usage: Usage | None = None
    timing: dict[str, Any] | None = None


class ReplayProvider:
    """Serves stored replies keyed by (task_id, contract, draw).

    Conventions shared with ``quotebench replay``: a line without ``contract`` is a
    ``raw`` reply, without ``draw`` draw 0. A stored ``command`` is R (the
    generation carries it in ``command`` and :meth:`Generation.extract` returns
    it); the stored ``reply`` is the reply text, and where there is none the
    command is wrapped as a live reply would be (a fence, or a ``bash`` tool call
    for native). Without a command R is extracted from ``reply`` and
    ``tool_calls`` (a list of {name, arguments}) as for a live reply. Lines and
    duplicates follow :mod:`qb_client.replies.store` (a torn last line is skipped
    with a note; any other bad line, or a second, different reply for the same
    key, is refused naming the file and line; an exact repeat is dropped with a
    note). Two lines for one (task, contract, draw) from different configs are
    refused as ambiguous. When every line carries the same
    ``config``, that is this provider's config, so replayed records group with
    the original campaign; otherwise the config is ``replay:<file name>``.
    """

    def __init__(self, path: str | Path, effort: str = "unset", params: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self._replies: dict[tuple[str, str, int], tuple[int, StoredReply]] = {}
        configs: set[str] = set()
        first_config: ConfigInfo | None = None
        for n, entry in self._read():
            key = (entry.task_id, entry.contract, entry.draw)
            label = entry.config.model_dump_json() if entry.config else ""
            configs.add(label)
            if first_config is None and entry.config is not None:
                first_config = entry.config
            if key in self._replies:  # the same config's repeats were settled in _read
                prev_n, prev = self._replies[key]
                raise ValueError(f"{self.path}: line {n}: a second reply for {key[0]} {key[1]} draw {key[2]} "
                                 f"from another config than line {prev_n} (split the store per config)")
            self._replies[key] = (n, entry)
        if not self._replies:
            raise ValueError(f"{self.path}: holds no replies")
        if len(configs) == 1 and first_config is not None:
            self.config = first_config
        else:
            self.config = ConfigInfo(provider="replay", model=self.path.name, effort=effort or "unset",
                                     params=dict(params or {}))

    def __repr__(self) -> str:
        return f"ReplayProvider({str(self.path)!r})"

    def _read(self) -> list[tuple[int, StoredReply]]:
        from ...replies.store import Duplicates, SuiteCheck, no_replies, store_lines, torn_warning

        entries: list[tuple[int, StoredReply]] = []
        torn: list[int] = []
        dups = Duplicates(self.path)
        suites = SuiteCheck(self.path)
        default_label = ConfigInfo(provider="replay", model=self.path.name).label
        for n, obj in store_lines(self.path, torn):
            where = f"{self.path}: line {n}"
            if not isinstance(obj, dict):
                raise ValueError(f"{where}: not a JSON object")
            suites.check(n, obj)
            try:
                entry = StoredReply.model_validate(obj)
            except ValidationError as e:
                err = e.errors()[0]
                loc = ".".join(str(p) for p in err["loc"]) or "(line)"
                raise ValueError(f"{where}: field '{loc}': {err['msg']}") from None
            if entry.command is None and entry.reply is None and entry.tool_calls is None:
                raise ValueError(f"{where}: needs a 'command' or a 'reply' field")
            try:
                check_contract(entry.contract)
            except ValueError as e:
                raise ValueError(f"{where}: field 'contract': {e}") from None
            label = entry.config.label if entry.config else default_label
            if dups.keep(n, obj, entry.reply_id or None, (label, entry.task_id, entry.contract, entry.draw)):
                entries.append((n, entry))
        if not entries:
            raise ValueError(no_replies(self.path, torn))
        for message in ([torn_warning(self.path, torn)] if torn else []) + ([dups.note()] if dups.note() else []) \
                + suites.notes():
            if message not in _WARNED:  # once per process, though an effort ladder reads the store per rung
                _WARNED.add(message)
                print(f"quotebench: warning: {message}", file=sys.stderr)
        return entries

    def keys(self) -> set[tuple[str, str, int]]:
        return set(self._replies)

    async def generate(self, request: GenerationRequest) -> Generation:
        task_id, contract = _need_task(f"replay:{self.path}", request)
        found = self._replies.get((task_id, contract, request.draw))
        if found is None:
            raise ProviderError(f"replay: no reply for task {task_id}, contract {contract}, draw {request.draw} "
                                f"in {self.path}")
        _, entry = found
        calls = list(entry.tool_calls or [])
        if entry.command is not None:
            # The store fixes R (as `quotebench replay` reads it): the reply is kept for the record and
            # shaped so that extraction agrees wherever the store gave no reply of its own.
            if contract == "native":
                text = entry.reply or ""
                if not calls:
                    args = json.dumps({"command": entry.command}, ensure_ascii=False)
                    calls = [ToolCall(name=NATIVE_TOOL.name, arguments=args)]
            else:
                text = entry.reply if entry.reply is not None else fence(entry.command)
        else:
            text = entry.reply or ""
        ms = (entry.timing or {}).get("generate_ms")
        return Generation(text=text, tool_calls=calls, usage=entry.usage or Usage(),
                          generate_ms=float(ms) if isinstance(ms, (int, float)) else 0.0,
                          stop_reason="replay", reply_id=entry.reply_id, command=entry.command)
