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

import os

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

TIERS: tuple[str, ...] = ("control", "h1", "h2", "h3")


def relative_path(v: str) -> str:
    """``v`` if it is a relative path that stays inside the working directory, else ValueError.

    Every path a task file names (fixture files, directories, repositories, the files of a
    fixture commit, the paths checks read) goes through this, so a malformed task file can
    neither make the fixture builder write outside the sandbox nor point a check at the host.
    """
    if not v or v.startswith("/") or ".." in v.split("/") or "\0" in v:
        raise ValueError("must be a relative path inside the working directory")
    return v


def _no_git_dir(v: str) -> str:
    """A path of a file in a fixture repository: relative, and never inside ``.git``."""
    relative_path(v)
    if ".git" in v.split("/"):
        raise ValueError("may not point into .git")
    return v


RelPath = Annotated[str, AfterValidator(relative_path)]
RepoPath = Annotated[str, AfterValidator(_no_git_dir)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------- fixture


class FixtureFile(_Strict):
    """A file of the fixture: exact UTF-8 text, or a helper program from ``tasks/tools``."""

    path: RelPath
    text: str | None = None
    source: str | None = None
    mode: int = 0o644
    _data: bytes | None = PrivateAttr(default=None)
    """The bytes of ``source``, read once and checked when the family file is loaded (:func:`tasks.load.source_bytes`)."""


class GitCommit(_Strict):
    message: str
    files: dict[RepoPath, str] = Field(default_factory=dict)


class GitRepo(_Strict):
    """A repository built with a fixed identity and fixed dates, so hashes are reproducible."""

    path: RepoPath = "."
    commits: list[GitCommit] = Field(default_factory=list)
    staged: dict[RepoPath, str] = Field(default_factory=dict)


class Fixture(_Strict):
    files: list[FixtureFile] = Field(default_factory=list)
    dirs: list[RelPath] = Field(default_factory=list)
    git: GitRepo | None = None


# ---------------------------------------------------------------- checks


class FileBytes(_Strict):
    """The file holds exactly these bytes (the UTF-8 encoding of ``text``)."""

    kind: Literal["file-bytes"]
    path: RelPath
    text: str


class FileAbsent(_Strict):
    kind: Literal["file-absent"]
    path: RelPath


class DirListing(_Strict):
    """The directory holds exactly these entry names (hidden ones included)."""

    kind: Literal["dir-listing"]
    path: RelPath = "."
    names: list[str]


class Argv(_Strict):
    """``show-args`` recorded exactly this argument vector (NUL-separated record)."""

    kind: Literal["argv"]
    record: RelPath = ".qb-args"
    args: list[str]


class EnvValue(_Strict):
    """``show-env`` recorded the variable set, with exactly this value."""

    kind: Literal["env"]
    record: RelPath = ".qb-env"
    name: str
    value: str


class Ran(_Strict):
    """The fixture's wrapper program was called at least once: its ``record`` (which the wrapper
    appends a NUL-terminated entry to on every call) holds at least one entry."""

    kind: Literal["ran"]
    record: RelPath
    program: str = "the wrapper"


class JsonEqual(_Strict):
    """The file parses as JSON equal to ``value`` (types compared too: 1 != 1.0 != true)."""

    kind: Literal["json-equal"]
    path: RelPath
    value: Any


class GitHistory(_Strict):
    """The repository has ``count`` commits, HEAD's raw message is exact, HEAD holds ``files`` with
    exactly these contents (so an empty commit with the right message does not pass), and nothing
    is left staged.

    Against the fixture's own repository (which must then be at ``path``): ``same_branch``, HEAD is
    still the fixture's branch (``refs/heads/main``); ``on_fixture_head``, HEAD's only parent is the
    fixture's HEAD commit (no parent when the fixture had no commit); ``exact_tree``, HEAD's tree is
    exactly the tree of the fixture's index (the staged change, nothing added, nothing removed)."""

    kind: Literal["git"]
    path: RelPath = "."
    count: int
    message: str
    files: dict[str, str] = Field(default_factory=dict)
    clean_index: bool = True
    same_branch: bool = True
    on_fixture_head: bool = True
    exact_tree: bool = True

    @property
    def needs_fixture(self) -> bool:
        return self.same_branch or self.on_fixture_head or self.exact_tree


class FixtureUnchanged(_Strict):
    """Every fixture file except ``except_paths`` still has its bytes and mode. With ``new_paths``
    set, the whole tree (recursively, hidden entries included, the fixture repository's ``.git``
    excluded) also holds exactly the fixture's files and directories plus these paths."""

    kind: Literal["fixture-unchanged"]
    except_paths: list[RelPath] = Field(default_factory=list)
    new_paths: list[RelPath] | None = None


Check = Annotated[
    Union[FileBytes, FileAbsent, DirListing, Argv, EnvValue, Ran, JsonEqual, GitHistory, FixtureUnchanged],
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
    suite: str = "public"  # the suite id: "public", or a generated suite's (tasks.suiteid)

    @model_validator(mode="after")
    def _git_checks_have_their_fixture(self) -> "Task":
        for i, c in enumerate(self.checks):
            if isinstance(c, GitHistory) and c.needs_fixture:
                repo = self.fixture.git
                if repo is None or os.path.normpath(repo.path) != os.path.normpath(c.path):
                    raise ValueError(
                        f"checks.{i}: the git check compares with the fixture's repository at '{c.path}', "
                        "but the fixture has none there (or set same_branch, on_fixture_head, exact_tree = false)"
                    )
        return self
