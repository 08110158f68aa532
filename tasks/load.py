"""Loading family files into :class:`~tasks.schema.Task` objects.

A malformed file is refused as a whole with :class:`TaskFileError`, whose text
is one line naming the file and the field, so a user who edits a task sees what
to fix rather than a pydantic dump.
"""

from __future__ import annotations

import fnmatch
import tomllib
from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from .render import RenderError, render
from .schema import TIERS, FamilyFile, Fixture, Task
from .suiteid import suite_id

FAMILIES_DIR = Path(__file__).parent / "families"
TOOLS_DIR = Path(__file__).parent / "tools"

FAMILY_ORDER: tuple[str, ...] = (
    "file-write", "file-append", "hostile-filenames", "find-glob", "grep-count", "sed-replace",
    "heredoc", "argv-pass", "env-pass", "json-write", "json-edit", "git-commit",
    "remote-exec", "container-exec",
)


class TaskFileError(ValueError):
    """A task file is malformed; the message is one line: ``file: field: problem``."""


class UnknownTaskError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; a CLI wants it plain
        return str(self.args[0])


def _loc(error: dict) -> str:
    return ".".join(str(p) for p in error["loc"]) or "(top level)"


def load_family(path: Path, suite: str = "public") -> list[Task]:
    """Read one family file and resolve its four tiers (``suite``: the id its tasks carry)."""
    name = str(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise TaskFileError(f"{name}: cannot read: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise TaskFileError(f"{name}: not valid TOML: {e}") from None
    try:
        family = FamilyFile.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        raise TaskFileError(f"{name}: {_loc(err)}: {err['msg']}") from None
    if family.family != path.stem:
        raise TaskFileError(f"{name}: family: '{family.family}' does not match the file name '{path.stem}'")
    tasks = []
    for tier in TIERS:
        spec = family.tiers[tier]
        where = f"tiers.{tier}"
        try:
            fixture = Fixture.model_validate(render(family.fixture, spec.payload, "fixture"))
        except RenderError as e:
            raise TaskFileError(f"{name}: {where}: {e}") from None
        except ValidationError as e:
            err = e.errors()[0]
            raise TaskFileError(f"{name}: {where}: fixture.{_loc(err)}: {err['msg']}") from None
        try:
            checks = render(family.checks, spec.payload, "checks")
            instruction = render(family.instruction, spec.payload, "instruction")
            task = Task.model_validate(
                dict(
                    id=f"{family.family}/{tier}", family=family.family, tier=tier,
                    operation=family.operation, instruction=instruction, payload=spec.payload,
                    fixture=fixture, checks=checks, solution=spec.solution,
                    solution_disclosed=spec.solution_disclosed, note=spec.note, source=name, suite=suite,
                )
            )
        except RenderError as e:
            raise TaskFileError(f"{name}: {where}: {e}") from None
        except ValidationError as e:
            err = e.errors()[0]
            raise TaskFileError(f"{name}: {where}: {_loc(err)}: {err['msg']}") from None
        for f in task.fixture.files:
            if f.source is not None and not (TOOLS_DIR / f.source).is_file():
                raise TaskFileError(f"{name}: fixture.files: source '{f.source}' is not in {TOOLS_DIR}")
            if (f.source is None) == (f.text is None):
                raise TaskFileError(f"{name}: fixture.files: '{f.path}' needs exactly one of text, source")
        tasks.append(task)
    return tasks


def load_suite(directory: Path | None = None) -> list[Task]:
    """Every task of every family file in ``directory``, in suite order."""
    directory = directory or FAMILIES_DIR
    files = sorted(directory.glob("*.toml"))
    if not files:
        raise TaskFileError(f"{directory}: holds no family files (*.toml)")
    order = {f: i for i, f in enumerate(FAMILY_ORDER)}
    files.sort(key=lambda p: (order.get(p.stem, len(order)), p.stem))
    sid = suite_id(directory)
    return [t for f in files for t in load_family(f, sid)]


@lru_cache(maxsize=4)
def _cached_suite(directory: str) -> tuple[Task, ...]:
    return tuple(load_suite(Path(directory)))


_active: list[Path] = []


def use_suite(directory: Path | None) -> None:
    """Make ``directory`` (None: the public suite) the suite every later lookup without a directory uses:
    the CLI's ``--suite``, set once per process, like its ``--memory``."""
    _active[:] = [directory] if directory is not None else []


def select_suite(value: str) -> str:
    """``--suite``: make ``public`` or a directory of family files the active suite; its id.

    A missing or empty directory, or a bad family file in it, is a one-line ``ValueError`` naming the option."""
    if value == "public":
        use_suite(None)
    else:
        d = Path(value)
        if not d.is_dir():
            raise ValueError(f"--suite {value}: not a directory (give 'public' or a directory written by "
                             f"`quotebench tasks generate`)")
        if not any(d.glob("*.toml")):
            raise ValueError(f"--suite {value}: holds no family files (*.toml); write one with "
                             f"`quotebench tasks generate`")
        use_suite(d.resolve())
    try:
        tasks = suite()
    except TaskFileError as e:
        raise ValueError(f"--suite {value}: {e}") from None
    return tasks[0].suite


def active_directory() -> Path:
    return _active[0] if _active else FAMILIES_DIR


def suite(directory: Path | None = None) -> tuple[Task, ...]:
    """The loaded suite (``directory``, else the active one), parsed once per process."""
    return _cached_suite(str(directory or active_directory()))


def get_task(task_id: str, directory: Path | None = None) -> Task:
    for t in suite(directory):
        if t.id == task_id:
            return t
    raise UnknownTaskError(f"unknown task '{task_id}' (see `quotebench tasks list`)")


def select(pattern: str | None, directory: Path | None = None) -> list[Task]:
    """Tasks whose id matches a shell-style glob (comma-separated globs allowed)."""
    tasks = list(suite(directory))
    if not pattern:
        return tasks
    globs = [p.strip() for p in pattern.split(",") if p.strip()]
    chosen = [t for t in tasks if any(fnmatch.fnmatchcase(t.id, g) for g in globs)]
    if not chosen:
        raise UnknownTaskError(f"--tasks '{pattern}' matches no task")
    return chosen
