"""Loading family files into :class:`~tasks.schema.Task` objects.

A malformed file is refused as a whole with :class:`TaskFileError`, whose text
is one line naming the file and the field, so a user who edits a task sees what
to fix rather than a pydantic dump.

A suite directory may come from another team, so it is hostile input: only
regular files are read (a FIFO named ``x.toml`` hung ``tasks list``, a link to
``/dev/zero`` never ended), never through a symlink, at most
:data:`MAX_TASK_FILE` bytes each. A fixture file's ``source`` (a helper program
copied into the sandbox) is a relative path resolved inside the suite's own
directory, else inside ``tasks/tools``, with no component a symlink: an
absolute path or ``..`` could name ``/proc/self/environ`` and copy the
harness's API keys into the sandbox and the record.
"""

from __future__ import annotations

import fnmatch
import tomllib
from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from .render import RenderError, render
from .safefs import UnsafeRead, list_regular, read_capped, read_under
from .schema import TIERS, FamilyFile, Fixture, FixtureFile, Task, relative_path
from .suiteid import MANIFEST, suite_id

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


MAX_TASK_FILE = 1 << 20
"""The largest family file (or suite manifest) read; the public ones are ~10 KB."""
MAX_TOOL = 1 << 20
"""The largest helper program a fixture file's ``source`` may name."""


def _loc(error: dict) -> str:
    return ".".join(str(p) for p in error["loc"]) or "(top level)"


def read_task_file(path: Path) -> bytes:
    """The bytes of a family file: a regular file, not through a symlink, at most :data:`MAX_TASK_FILE`."""
    try:
        return read_capped(path, MAX_TASK_FILE)
    except UnsafeRead as e:
        raise TaskFileError(str(e)) from None
    except OSError as e:
        raise TaskFileError(f"{path}: cannot read: {e.strerror or e}") from None


def source_bytes(name: str, family_file: Path, source: str) -> bytes:
    """The bytes of the helper program ``source``: relative, found inside the family file's own directory
    first, else inside ``tasks/tools``; never through a symlink, never a FIFO or device, at most
    :data:`MAX_TOOL` bytes. Anything else is a :class:`TaskFileError` naming the file and the field."""
    where = f"{name}: fixture.files: source '{source}'"
    try:
        relative_path(source)
    except ValueError:
        raise TaskFileError(f"{where}: must be a relative path inside the suite's directory or {TOOLS_DIR} "
                            "(not absolute, no '..')") from None
    roots = list(dict.fromkeys((family_file.parent.absolute(), TOOLS_DIR)))
    for root in roots:
        try:
            return read_under(root, source, MAX_TOOL)
        except FileNotFoundError:
            continue
        except UnsafeRead as e:
            raise TaskFileError(f"{where}: {e}") from None
        except OSError as e:
            raise TaskFileError(f"{where}: cannot read: {e.strerror or e}") from None
    raise TaskFileError(f"{where}: is in neither {' nor '.join(map(str, roots))}")


def _attach_sources(name: str, path: Path, files: list[FixtureFile]) -> None:
    """Read every ``source`` once, at load, into its fixture file (what the sandbox later gets)."""
    for f in files:
        if f.source is not None:
            f._data = source_bytes(name, path, f.source)


def load_family(path: Path, suite: str = "public", data: bytes | None = None) -> list[Task]:
    """Read one family file and resolve its four tiers (``suite``: the id its tasks carry; ``data``: its
    bytes, when the caller has read them already)."""
    name = str(path)
    try:
        raw = tomllib.loads((data if data is not None else read_task_file(path)).decode("utf-8"))
    except UnicodeDecodeError as e:
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
            if (f.source is None) == (f.text is None):
                raise TaskFileError(f"{name}: fixture.files: '{f.path}' needs exactly one of text, source")
        _attach_sources(name, path, task.fixture.files)
        tasks.append(task)
    return tasks


def suite_files(directory: Path) -> dict[Path, bytes]:
    """The family files of ``directory`` and their bytes, each checked (regular, no link, capped) before
    it is read; a manifest that is there must be a regular file too. :class:`TaskFileError` otherwise."""
    try:
        files = list_regular(directory, "*.toml")
        list_regular(directory, MANIFEST)
    except UnsafeRead as e:
        raise TaskFileError(str(e)) from None
    except OSError as e:
        raise TaskFileError(f"{directory}: cannot read: {e.strerror or e}") from None
    return {f: read_task_file(f) for f in files}


def load_suite(directory: Path | None = None) -> list[Task]:
    """Every task of every family file in ``directory``, in suite order."""
    directory = directory or FAMILIES_DIR
    contents = suite_files(directory)
    if not contents:
        raise TaskFileError(f"{directory}: holds no family files (*.toml)")
    order = {f: i for i, f in enumerate(FAMILY_ORDER)}
    files = sorted(contents, key=lambda p: (order.get(p.stem, len(order)), p.stem))
    try:
        sid = suite_id(directory, {p.name: b for p, b in contents.items()})
    except UnsafeRead as e:
        raise TaskFileError(str(e)) from None
    return [t for f in files for t in load_family(f, sid, contents[f])]


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
