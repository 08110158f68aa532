"""The record: one JSON object per execution, append-only (SPEC.md, "Record").

Everything downstream (reports, resume, replay) reads only these records, so a
record carries what it needs to be understood alone: the reply, the command R
extracted from it, what the final shell received, the raw execution outcome and
the verdict, which never derives from the exit code.
"""

from __future__ import annotations

import hashlib
import uuid
from functools import lru_cache
from importlib import metadata
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tasks.load import FAMILIES_DIR, TOOLS_DIR
from tasks.validate import Verdict

SUITE_VERSION = "v1"


class ConfigInfo(BaseModel):
    provider: str = "manual"
    model: str = "manual"
    effort: str = "unset"
    params: dict[str, Any] = Field(default_factory=dict)
    variant: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The design beyond the generation parameters, so that it is never pooled: ``builtin`` (the native
    contract offered the provider's own shell tool) and/or ``turns=K`` (the multi-turn arm), joined by
    ``+``. None (and absent from the JSON) for the one-shot design with the function tool."""

    @property
    def label(self) -> str:
        base = f"{self.provider}:{self.model}@{self.effort}"
        return f"{base}+{self.variant}" if self.variant else base


class Output(BaseModel):
    text: str = ""
    truncated: bool = False


class Usage(BaseModel):
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None


class Timing(BaseModel):
    generate_ms: float | None = None
    exec_ms: float | None = None


class Step(BaseModel):
    """One command run in a sandbox that others ran or will run in: what it received, how it exited, and
    whether the state after it passes (``passed``, never shown to the model)."""

    command: str | None
    received: str | None = None
    damaged: bool = False
    exit_code: int | None = None
    stdout: Output = Field(default_factory=Output)
    stderr: Output = Field(default_factory=Output)
    timed_out: bool = False
    transport_error: str | None = None
    passed: bool = False


class Turn(Step):
    """One turn of a multi-turn chain (``turn`` counts from 1): the reply, its command (None when the model
    stopped: ``stop`` says how) and what running it gave. ``steps``: every command of a call that carried
    several (the OpenAI shell tool), in the order they ran; the turn's own fields are the first's."""

    turn: int
    reply: str
    stop: str | None = None
    steps: list[Step] | None = None
    usage: Usage = Field(default_factory=Usage)
    generate_ms: float | None = None


class Guard(BaseModel):
    """The guarded shell tool's decision (docs/lint.md): ``action`` is ``as-is`` (the lint predicted R
    intact), ``escaped`` (``delivered`` was sent instead of R), ``twin`` (R went through ``via``, the route's
    ``-safe`` twin) or ``unguarded`` (damage unknown and no safe encoding known: R as it is).
    ``predicted_received`` is what the lint said the route would deliver of R itself (None: nothing, or
    unknown when ``predicted_known`` is false)."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["as-is", "escaped", "twin", "unguarded"]
    predicted_damaged: bool | None
    predicted_known: bool
    predicted_received: str | None = None
    delivered: str | None = None
    via: str | None = None


class Record(BaseModel):
    run_id: str
    reply_id: str
    config: ConfigInfo
    contract: str
    transport: str
    shell: str = "bash"
    suite: str = "public"  # the task suite: "public" or a generated suite's id (tasks.suiteid)
    userland: str = "gnu"  # whose coreutils, sed, grep, find ... the command got (transports.sandbox.userland)
    task_id: str
    family: str
    tier: str
    draw: int = 0
    reply: str
    command: str | None
    received: str | None
    received_note: str | None = None
    damaged: bool
    exit_code: int | None
    stdout: Output
    stderr: Output
    timed_out: bool
    transport_error: str | None
    verdict: Verdict
    usage: Usage = Field(default_factory=Usage)
    timing: Timing = Field(default_factory=Timing)
    versions: dict[str, str] = Field(default_factory=dict)
    isolation: Literal["bwrap", "none"] | None = None
    limit_hit: str | None = None
    limits_applied: dict[str, str] | None = None
    error: str | None = None
    native_tool: Literal["builtin", "function"] | None = Field(default=None, exclude_if=lambda v: v is None)
    """Where the contract is native: the provider's own shell tool, or the function tool ``bash``."""
    steps: list[Step] | None = Field(default=None, exclude_if=lambda v: v is None)
    """When the reply's call carried several commands (OpenAI's shell tool): each, in the order they ran in
    the one sandbox. The top-level fields are the first's (R); the verdict is on the state after the last."""
    turns: list[Turn] | None = Field(default=None, exclude_if=lambda v: v is None)
    """The multi-turn arm (``run --turns K``, K > 1): the whole chain. The top-level fields describe the last
    turn that ran a command, and the verdict the final state."""
    harness: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """On a real agent harness route (``claude-code``): the harness that ran R (docs/harnesses.md)."""
    harness_version: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The harness's exact release, as pinned and installed."""
    wrapper: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The final shell's whole program text as the harness built it (from the kernel's exec trace);
    ``received`` is the part of it that carries R."""
    harness_log: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The courier's request/answer log, capped at 64 KiB: for debugging only (the command can rewrite it),
    never used for ``received`` or the verdict."""
    agent: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)
    """Only in a harness run (``quotebench run --harness``): the run's turns, requests, stop, budgets, token
    use, the attempt id its exchanges are stored under, and, in a replay, where the harness's requests
    diverged from the recording (docs/harness-runs.md)."""
    guard: Guard | None = Field(default=None, exclude_if=lambda v: v is None)
    """Only from ``quotebench serve --guard``: what the lint predicted for the command and what was delivered
    in its place (``command`` stays the client's R; ``received`` is what the final shell got)."""
    jobs: int | None = Field(default=None, exclude_if=lambda v: v is None)
    """Only from ``replay``, ``run``, ``demo`` and harness runs: how many executions the invocation allowed at once
    (``--jobs``). It explains ``timing.exec_ms`` (runs at once share the CPUs), never what was received or the
    verdict; the report neither pools nor splits by it."""
    cpus: int | None = Field(default=None, exclude_if=lambda v: v is None)
    """Beside ``jobs``: the CPUs the invocation could use (its affinity mask)."""
    truncated: list[str] | None = Field(default=None, exclude_if=lambda v: v is None)
    """The fields :func:`capped` cut to their cap, in record order (``reply``, ``command``, ``received``,
    ``received_note``, ``stdout``, ``stderr``, ``transport_error``, ``error``, ``wrapper``, ``harness_log``);
    absent when none was."""


FIELD_CAP = 64 * 1024
"""The most characters a stored text field keeps where records are capped (:func:`capped`): ``reply``,
``command``, ``received``, ``stdout``, ``stderr``. The same as the sandbox's output cap, so the output of
a run is never cut again."""
NOTE_CAP = 2000
"""The most characters of a one-line note kept: ``received_note``, ``transport_error``, ``error``."""
_CAPS = (("reply", FIELD_CAP), ("command", FIELD_CAP), ("received", FIELD_CAP), ("received_note", NOTE_CAP),
         ("stdout", FIELD_CAP), ("stderr", FIELD_CAP), ("transport_error", NOTE_CAP), ("error", NOTE_CAP),
         ("wrapper", FIELD_CAP), ("harness_log", FIELD_CAP))


def capped(record: Record) -> Record:
    """``record`` with every stored text field cut to its cap, the cut ones named in ``truncated``.

    Why: ``quotebench serve`` appends a record per call, and a client sends what it likes: a 3 MiB command,
    uncapped, would be stored twice (reply and command) on every call, 6 MB of record file each. Judge first, cap after:
    ``damaged`` and the verdict are computed on the full text. A cut output is also ``truncated`` there."""
    update: dict[str, object] = {}
    cut: list[str] = []
    for name, cap in _CAPS:
        value = getattr(record, name)
        if isinstance(value, Output):
            if len(value.text) > cap:
                update[name] = Output(text=value.text[:cap], truncated=True)
                cut.append(name)
        elif isinstance(value, str) and len(value) > cap:
            update[name] = value[:cap]
            cut.append(name)
    if not cut:
        return record
    return record.model_copy(update={**update, "truncated": [*(record.truncated or []), *cut]})


def new_id() -> str:
    return uuid.uuid4().hex[:16]


def reply_id_for(task_id: str, text: str, salt: str = "") -> str:
    """A stable id for a reply that arrived without one (same text, same id)."""
    return "r-" + hashlib.sha256(f"{salt}\0{task_id}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()[:16]


@lru_cache(maxsize=1)
def suite_digest() -> str:
    h = hashlib.sha256()
    for d in (FAMILIES_DIR, TOOLS_DIR):
        for p in sorted(d.iterdir()):
            if p.is_file():
                h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:12]


@lru_cache(maxsize=1)
def versions() -> dict[str, str]:
    try:
        qb = metadata.version("quotebench")
    except metadata.PackageNotFoundError:
        qb = "0+unknown"
    return {"quotebench": qb, "suite": f"{SUITE_VERSION}-{suite_digest()}"}
