"""Run mutmut on one module of the measurement core, with only the tests that exercise it.

Why a driver: mutmut 3 reads its configuration from ``[tool.mutmut]`` of the
``pyproject.toml`` in the current directory and has no command-line option for the
files to mutate or the tests to run. A full run (every core module against the union
of their tests) is correct but takes hours on a small machine, and its first phase
runs every selected test once. So this script gives each module a work directory,
``.mutation/<module>/``, holding symlinks to the packages and tests of the checkout
and a ``pyproject.toml`` whose ``[tool.mutmut]`` is the project's, narrowed to that
module (``only_mutate``) and its tests (``pytest_add_cli_args_test_selection``).
mutmut copies the tree into ``.mutation/<module>/mutants/`` and keeps its results
there, so a module can be rerun incrementally after its tests change.

``PYTHONPATH`` points at the mutated copy, so a test that starts a Python
subprocess (the ``quotebench`` CLI, a helper script) runs the mutant too, not the
checkout.

Usage (docs/mutation.md)::

    python tools/mutation.py --list
    python tools/mutation.py report-stats            # run, then print the score
    python tools/mutation.py report-stats --workers 1
    python tools/mutation.py report-stats --survivors  # each survivor's diff
    python tools/mutation.py report-stats --rerun-survivors  # after adding tests: rerun only the survivors

Each full run writes ``.mutation/<module>/summary.json`` (total, killed, the survivors' names). Adding a
test changes mutmut's test selection, which makes mutmut forget every result; ``--rerun-survivors``
therefore reruns only the mutants that survived (a new test cannot revive a killed mutant) and adds
the newly killed ones to the summary: the score after.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutation"
# what the tests import or read, linked into each work directory
LINKED = ["tasks", "transports", "qb_server", "qb_client", "tests", "docs", "README.md"]


@dataclass(frozen=True)
class Module:
    """One mutation target: the files mutated and the tests that must kill their mutants."""

    files: tuple[str, ...]
    tests: tuple[str, ...]
    pytest_args: tuple[str, ...] = ()  # added to mutmut's pytest_add_cli_args, e.g. a -k that drops slow renderers


REPORT_TESTS = ("tests/test_report.py", "tests/test_report_paths.py", "tests/test_report_sharing.py",
                "tests/test_measure_intervals.py", "tests/test_mut_report.py")
WRAP_TESTS = ("tests/test_transport_properties.py", "tests/test_mut_transports.py")
CAPTURE_TESTS = ("tests/test_capture_channel.py", "tests/test_mut_transports.py", "tests/test_kernel_received.py")
LIMIT_TESTS = ("tests/test_limits.py", "tests/test_sandbox.py", "tests/test_mut_limits.py")

MODULES: dict[str, Module] = {
    "report-stats": Module(("qb_client/report/stats.py",), REPORT_TESTS),
    # the CLI and HTML/terminal tests run a subprocess or render plots (10-20 s each) and judge text
    "report-compute": Module(("qb_client/report/compute.py", "qb_client/report/order.py"),
                             ("tests/test_report.py", "tests/test_measure_intervals.py", "tests/test_mut_report.py"),
                             ("-k", "not html and not terminal and not bad_path")),
    "report-paths": Module(("qb_client/report/paths.py",), REPORT_TESTS),
    "validate": Module(("tasks/validate.py",),
                       ("tests/test_validators.py", "tests/test_validator_safety.py", "tests/test_mut_validate.py")),
    "gitread": Module(("tasks/gitread.py",),
                      ("tests/test_validators.py", "tests/test_validator_safety.py", "tests/test_mut_validate.py")),
    "wrap": Module(("transports/nested.py", "transports/nested_single.py", "transports/escaped.py",
                    "transports/json_embed.py", "transports/raw.py", "transports/tempscript.py"), WRAP_TESTS),
    "capture": Module(("transports/capture.py", "transports/sandbox/exectrace.py"), CAPTURE_TESTS),
    "limits": Module(("transports/sandbox/box.py", "transports/sandbox/cgroups.py"), LIMIT_TESTS),
}


def _toml_value(v: object) -> str:
    """TOML for the values a [tool.mutmut] table holds (strings, numbers, booleans, lists of those)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise SystemExit(f"pyproject.toml: [tool.mutmut] holds a value this script cannot copy: {v!r}")


def prepare(name: str, module: Module) -> Path:
    """The module's work directory: links to the checkout and its narrowed mutmut configuration."""
    base = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["mutmut"]
    tests = [t for t in module.tests if (ROOT / t).exists()]
    config = dict(base, only_mutate=list(module.files), pytest_add_cli_args_test_selection=tests,
                  pytest_add_cli_args=list(base.get("pytest_add_cli_args", [])) + list(module.pytest_args))
    work = WORK / name
    work.mkdir(parents=True, exist_ok=True)
    for entry in LINKED:
        link = work / entry
        if not link.is_symlink():
            link.symlink_to(ROOT / entry)
    lines = ["# written by tools/mutation.py: the project's [tool.mutmut], narrowed to one module", "[tool.mutmut]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in config.items()]
    (work / "pyproject.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return work


def statuses(work: Path) -> dict[str, str]:
    """Every mutant mutmut knows of in ``work``, with its status (killed, survived, no tests, not checked...)."""
    out = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=work, check=True,
                         capture_output=True, text=True).stdout
    pairs = (line.strip().rsplit(": ", 1) for line in out.splitlines() if ": " in line)
    return {name: status for name, status in pairs}


ALIVE = ("survived", "no tests")
DEAD = ("killed", "timeout", "caught by type check")


def summarize(work: Path, name: str, only: list[str]) -> dict[str, object]:
    """The score of a run (of the mutants matching ``only``, when given), saved to ``summary.json``."""
    st = {k: v for k, v in statuses(work).items() if not only or any(fnmatch.fnmatch(k, g) for g in only)}
    killed = sum(s in DEAD for s in st.values())
    summary = {"module": name, "only": only, "total": len(st), "killed": killed,
               "survivors": sorted(k for k, s in st.items() if s in ALIVE),
               "unchecked": sorted(k for k, s in st.items() if s not in ALIVE + DEAD)}
    (work / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return summary


def rerun_survivors(work: Path, env: dict[str, str], workers: int) -> dict[str, object]:
    """Rerun the survivors of the last summary; those killed now are added to its killed count."""
    summary = json.loads((work / "summary.json").read_text("utf-8"))
    alive = list(summary["survivors"])
    if alive:
        subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(workers), *alive],
                       cwd=work, env=env, check=True)
    st = statuses(work)
    now_dead = [k for k in alive if st.get(k) in DEAD]
    summary["killed"] = int(summary["killed"]) + len(now_dead)
    summary["survivors"] = [k for k in alive if k not in now_dead]
    summary["killed_by_rerun"] = sorted(set(summary.get("killed_by_rerun", [])) | set(now_dead))
    (work / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("module", nargs="?", choices=sorted(MODULES))
    parser.add_argument("--list", action="store_true", help="list the modules, their files and tests")
    parser.add_argument("--workers", type=int, default=2, help="mutmut --max-children (default 2)")
    parser.add_argument("--survivors", action="store_true", help="show every surviving mutant's diff, run nothing")
    parser.add_argument("--only", nargs="+", default=[], metavar="GLOB",
                        help="run only the mutants whose names match, e.g. 'qb_client.report.compute.x__decomposition*'")
    parser.add_argument("--rerun-survivors", action="store_true",
                        help="rerun only the last summary's survivors (after adding tests) and update the score")
    args = parser.parse_args(argv)
    if args.list or not args.module:
        for name, m in MODULES.items():
            print(f"{name}: {' '.join(m.files)}\n    tests: {' '.join(m.tests)} {' '.join(m.pytest_args)}")
        return 0
    work = prepare(args.module, MODULES[args.module])
    # the directory must exist before Python starts: an import-path entry that is missing at the first
    # import is cached as "no finder", and the checkout (editable install) would then be tested instead
    (work / "mutants").mkdir(exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(work / "mutants"))
    if args.survivors:
        summary = json.loads((work / "summary.json").read_text("utf-8"))
        for name in summary["survivors"]:
            subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=work, env=env)
        return 0
    if args.rerun_survivors:
        summary = rerun_survivors(work, env, args.workers)
    else:
        done = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(args.workers),
                               *args.only], cwd=work, env=env)
        if done.returncode != 0:
            return done.returncode
        summary = summarize(work, args.module, args.only)
    killed, total = int(summary["killed"]), int(summary["total"])
    print(f"{args.module}: {killed}/{total} killed = {100.0 * killed / total:.1f}%; "
          f"{len(summary['survivors'])} survivors (.mutation/{args.module}/summary.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
