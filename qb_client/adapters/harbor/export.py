"""``quotebench export harbor DIR``: the suite's tasks as a Harbor dataset, one task directory each.

The layout is Harbor 0.26.0's (``harbor.models.task.paths.TaskPaths``), and every exported task is loaded
back by Harbor's own loader in the tests:

    <family>.<tier>/task.toml            [task] name "quotebench/<family>.<tier>", timeouts, [metadata] with
                                         the QuoteBench task id, suite, and the validator's digest
    <family>.<tier>/instruction.md       the task's instruction, exactly
    <family>.<tier>/environment/         Dockerfile + fixture.tar (the fixture as the sandbox gets it:
                                         bytes, modes, the git repository), unpacked into /app, the workdir
    <family>.<tier>/solution/            solve.sh runs the reference solution R as ``bash -c R`` in /app
    <family>.<tier>/tests/               test.sh runs OUR validator on /app and writes the reward

Why the tests carry our validator's source, not a reimplementation and not ``pip install quotebench``
    The reward must come from the same exact validator that scores every QuoteBench record. A payload
    generated from the validator spec would be a second implementation, free to drift; installing quotebench in
    the container at verification time needs a published release and the network. So ``tests/validator/``
    holds byte-identical copies of the modules ``tasks.validate`` imports (:data:`VALIDATOR_MODULES`; the
    tests compare them with the source), ``tests/task.json`` the task exactly as our loader resolved it, and
    ``tests/qb_verify.py`` (:mod:`.verify_entry`) calls ``tasks.validate.validate`` on the working directory:
    reward 1 when every check passes, 0 otherwise, the checks in ``/logs/verifier/verdict.json``. The image
    provides Python 3.11, pydantic at our pinned version, and git (the validator reads git fixtures through
    a copy, as on the host).

Nothing half-written: the dataset is built in a sibling staging directory and renamed onto DIR (which must
be missing or empty).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tasks.fixture import file_bytes, materialize
from tasks.gen_toml import table
from tasks.schema import Task

from ...console import BadInput

VALIDATOR_MODULES = ("__init__", "render", "safefs", "schema", "suiteid", "load", "forking", "fixture", "gitread",
                     "validate")
"""The modules of ``tasks`` that ``import tasks.validate`` loads (the tests hold this list to the import)."""
BASE_IMAGE = "python:3.11-slim-bookworm"
"""Debian 12, as the sandbox's gnu userland, with the Python our validator runs on."""
WORKDIR = "/app"
AGENT_TIMEOUT_S = 600
VERIFIER_TIMEOUT_S = 120
FIXED_MTIME = 1_700_000_000
"""Every member of fixture.tar gets this mtime, so an export is the same bytes every time."""


@dataclass
class Exported:
    out: Path
    tasks: list[str]
    validator_sha256: str


def dir_name(task: Task) -> str:
    return f"{task.family}.{task.tier}"


def _pydantic_version() -> str:
    import pydantic

    return str(pydantic.VERSION)


def validator_files() -> dict[str, bytes]:
    """Relative path under ``tests/validator`` -> the bytes of our own module."""
    import tasks

    root = Path(tasks.__file__).parent
    return {f"tasks/{m}.py": (root / f"{m}.py").read_bytes() for m in VALIDATOR_MODULES}


def validator_digest(files: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + hashlib.sha256(files[rel]).digest())
    return h.hexdigest()


def _write(path: Path, data: bytes | str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    os.chmod(path, mode)


def _fixture_tar(task: Task, dest: Path) -> None:
    """The fixture, materialized by our own code, as a tar with exact modes and fixed owner and times."""
    with tempfile.TemporaryDirectory(prefix="qb-harbor-fixture-") as tmp:
        root = Path(tmp) / "w"
        root.mkdir()
        materialize(task.fixture, root)

        def fixed(info: tarfile.TarInfo) -> tarfile.TarInfo:
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = FIXED_MTIME
            return info

        with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix()):
                tar.add(path, arcname=path.relative_to(root).as_posix(), recursive=False, filter=fixed)


def dockerfile() -> str:
    return (f"# QuoteBench task environment: the fixture in {WORKDIR}; Python, pydantic and git for the validator\n"
            f"FROM {BASE_IMAGE}\n"
            "RUN apt-get update && apt-get install -y --no-install-recommends git jq \\\n"
            "    && rm -rf /var/lib/apt/lists/* \\\n"
            f"    && pip install --no-cache-dir pydantic=={_pydantic_version()}\n"
            f"WORKDIR {WORKDIR}\n"
            f"ADD fixture.tar {WORKDIR}/\n")


TEST_SH = f"""#!/bin/bash
# QuoteBench's own validator judges the final state of the working directory; an exit code never does.
# Reward 0 is written first, so a validator that cannot run leaves a failing reward, never a stale pass.
here="$(cd -- "$(dirname -- "$0")" && pwd)"
workdir="${{QB_WORKDIR:-{WORKDIR}}}"
logs="${{QB_LOGS:-/logs/verifier}}"
python="${{QB_PYTHON:-/usr/local/bin/python3}}"
mkdir -p "$logs"
echo 0 > "$logs/reward.txt"
exec "$python" -I "$here/qb_verify.py" "$workdir" "$logs"
"""

SOLVE_SH = f"""#!/bin/bash
# The task's reference solution R, run as `bash -c R` in {WORKDIR} (R is read from the file `command`
# beside this script, byte for byte: a shell read would drop trailing newlines).
here="$(cd -- "$(dirname -- "$0")" && pwd)"
cd -- "${{QB_WORKDIR:-{WORKDIR}}}" || exit 1
exec python3 -I -c 'import os, sys; os.execvp("bash", ["bash", "-c", open(sys.argv[1], encoding="utf-8", newline="").read()])' "$here/command"
"""


def task_toml(task: Task, digest: str, version: str) -> str:
    head = table("task", {"name": f"quotebench/{dir_name(task)}",
                          "description": f"QuoteBench {task.id}: {task.operation}",
                          "keywords": ["quotebench", task.family, task.tier]})
    meta = table("metadata", {"quotebench_task_id": task.id, "quotebench_suite": task.suite,
                              "quotebench_version": version, "family": task.family, "tier": task.tier,
                              "validator_sha256": digest})
    return ('schema_version = "1.4"\n\n' + head + "\n" + meta + "\n"
            + table("verifier", {"timeout_sec": VERIFIER_TIMEOUT_S}) + "\n"
            + table("agent", {"timeout_sec": AGENT_TIMEOUT_S}) + "\n"
            + table("environment", {"build_timeout_sec": 600, "workdir": WORKDIR}))


def write_task(task: Task, where: Path, files: dict[str, bytes], digest: str, version: str) -> None:
    from . import verify_entry

    _write(where / "task.toml", task_toml(task, digest, version))
    _write(where / "instruction.md", task.instruction)
    _write(where / "environment" / "Dockerfile", dockerfile())
    _fixture_tar(task, where / "environment" / "fixture.tar")
    _write(where / "solution" / "solve.sh", SOLVE_SH, 0o755)
    _write(where / "solution" / "command", task.solution)
    tests = where / "tests"
    _write(tests / "test.sh", TEST_SH, 0o755)
    _write(tests / "qb_verify.py", Path(verify_entry.__file__).read_bytes())
    _write(tests / "task.json", task.model_dump_json(indent=1))
    for rel, data in files.items():
        _write(tests / "validator" / rel, data)
    for f in task.fixture.files:
        if f.source is not None:  # what file_bytes reads where a source's bytes were not loaded with the task
            _write(tests / "validator" / "tasks" / "tools" / f.source, file_bytes(f), 0o755)
    _write(tests / "validator" / "MANIFEST.json",
           json.dumps({"validator_sha256": digest, "quotebench_version": version,
                       "files": {r: hashlib.sha256(d).hexdigest() for r, d in sorted(files.items())}}, indent=1))


def export(tasks: list[Task], out: Path, version: str) -> Exported:
    """Write every task of ``tasks`` under ``out`` (missing or empty), all or nothing."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise BadInput(f"{out}: not a directory")
    if out.is_dir() and any(out.iterdir()):
        raise BadInput(f"{out}: not empty; export into a new or empty directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    files = validator_files()
    digest = validator_digest(files)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        for t in tasks:
            write_task(t, staging / dir_name(t), files, digest, version)
        _write(staging / "README.md", readme(tasks, digest, version))
        if out.is_dir():
            out.rmdir()
        os.rename(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Exported(out, [t.id for t in tasks], digest)


def readme(tasks: list[Task], digest: str, version: str) -> str:
    suites = sorted({t.suite for t in tasks})
    return (f"# QuoteBench tasks as a Harbor dataset\n\n{len(tasks)} tasks of suite {', '.join(suites)}, exported by "
            f"quotebench {version}. Each task's tests run QuoteBench's own validator (sha256 {digest} over its "
            f"modules) on the final state of {WORKDIR}.\n\n"
            "    harbor run -p . -a oracle            # the reference solutions: every reward 1\n"
            "    harbor run -p . -a claude-code -m MODEL\n\n"
            "Then `quotebench import-atif` turns the runs' trajectories into a reply store for `quotebench replay`.\n")
