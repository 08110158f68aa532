"""The task file format, as pydantic models.

A family file holds one operation and its four payload tiers. Everything that
depends on the payload (instruction, fixture, checks) is written once, at family
level, as a template with ``{{name}}`` placeholders; a tier supplies only the
payload values and its two reference solutions. Keeping the payload apart from
the operation is what lets a seeded generator make held-out payload sets later
without touching the operation or the validator.

Placeholders: a string that is exactly ``{{name}}`` is replaced by the payload
value itself (any JSON type, so an argv list or a JSON document can be a
payload); inside a longer string ``{{name}}`` inserts a string value and
``{{name|filter}}`` renders it (see :mod:`tasks.render`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

TIERS: tuple[str, ...] = ("control", "h1", "h2", "h3")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------- fixture


class FixtureFile(_Strict):
    """A file of the fixture: exact UTF-8 text, or a helper program from ``tasks/tools``."""

    path: str
    text: str | None = None
    source: str | None = None
    mode: int = 0o644

    @field_validator("path")
    @classmethod
    def _relative(cls, v: str) -> str:
        if not v or v.startswith("/") or ".." in v.split("/"):
            raise ValueError("must be a relative path inside the working directory")
        return v


class GitCommit(_Strict):
    message: str
    files: dict[str, str] = Field(default_factory=dict)


class GitRepo(_Strict):
    """A repository built with a fixed identity and fixed dates, so hashes are reproducible."""

    path: str = "."
    commits: list[GitCommit] = Field(default_factory=list)
    staged: dict[str, str] = Field(default_factory=dict)


class Fixture(_Strict):
    files: list[FixtureFile] = Field(default_factory=list)
    dirs: list[str] = Field(default_factory=list)
    git: GitRepo | None = None


# ---------------------------------------------------------------- checks


class FileBytes(_Strict):
    """The file holds exactly these bytes (the UTF-8 encoding of ``text``)."""

    kind: Literal["file-bytes"]
    path: str
    text: str


class FileAbsent(_Strict):
    kind: Literal["file-absent"]
    path: str


class DirListing(_Strict):
    """The directory holds exactly these entry names (hidden ones included)."""

    kind: Literal["dir-listing"]
    path: str = "."
    names: list[str]


class Argv(_Strict):
    """``show-args`` recorded exactly this argument vector (NUL-separated record)."""

    kind: Literal["argv"]
    record: str = ".qb-args"
    args: list[str]


class EnvValue(_Strict):
    """``show-env`` recorded the variable set, with exactly this value."""

    kind: Literal["env"]
    record: str = ".qb-env"
    name: str
    value: str


class JsonEqual(_Strict):
    """The file parses as JSON equal to ``value`` (types compared too: 1 != 1.0 != true)."""

    kind: Literal["json-equal"]
    path: str
    value: Any


class GitHistory(_Strict):
    """The repository has ``count`` commits, HEAD's raw message is exact, HEAD holds ``files`` with
    exactly these contents (so an empty commit with the right message does not pass), and nothing
    is left staged."""

    kind: Literal["git"]
    path: str = "."
    count: int
    message: str
    files: dict[str, str] = Field(default_factory=dict)
    clean_index: bool = True


class FixtureUnchanged(_Strict):
    """Every fixture file except ``except_paths`` still has its bytes and mode."""

    kind: Literal["fixture-unchanged"]
    except_paths: list[str] = Field(default_factory=list)


Check = Annotated[
    Union[FileBytes, FileAbsent, DirListing, Argv, EnvValue, JsonEqual, GitHistory, FixtureUnchanged],
    Field(discriminator="kind"),
]


# ---------------------------------------------------------------- family file


class TierSpec(_Strict):
    payload: dict[str, Any]
    solution: str
    solution_disclosed: str
    note: str = ""

    @field_validator("solution", "solution_disclosed")
    @classmethod
    def _not_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("a reference solution may not be empty")
        return v


class FamilyFile(_Strict):
    """One file under ``tasks/families``: an operation and its four tiers."""

    family: str
    operation: str
    instruction: str
    fixture: dict[str, Any] = Field(default_factory=dict)
    checks: list[dict[str, Any]]
    tiers: dict[str, TierSpec]

    @field_validator("tiers")
    @classmethod
    def _four_tiers(cls, v: dict[str, TierSpec]) -> dict[str, TierSpec]:
        if sorted(v) != sorted(TIERS):
            raise ValueError(f"needs exactly the tiers {', '.join(TIERS)}; found {', '.join(sorted(v)) or 'none'}")
        return v


# ---------------------------------------------------------------- resolved task


class Task(_Strict):
    """One task with its payload substituted: what every later stage consumes."""

    id: str
    family: str
    tier: str
    operation: str
    instruction: str
    payload: dict[str, Any]
    fixture: Fixture
    checks: list[Check]
    solution: str
    solution_disclosed: str
    note: str = ""
    source: str = ""
