"""tests/conftest.py's rule, run on a throwaway suite: a missing component skips locally and fails under CI=true.

bubblewrap is made "missing" the way a user would (QB_NO_BWRAP=1), so this runs on any machine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

SUITE = '''
import pytest

@pytest.mark.needs("bwrap")
def test_marked():
    pass

def test_required(require):
    require("bwrap")

@pytest.mark.skipif(True, reason="a skip that bypassed needs")
def test_plain_skip():
    pass

def test_ordinary():
    pass
'''


def run_suite(tmp_path: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_throwaway.py").write_text(SUITE)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["QB_NO_BWRAP"] = "1"
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rsfE", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def outcome_counts(out: str) -> dict[str, int]:
    last = out.strip().splitlines()[-1]
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|skipped|failed|errors?)", last)}


def test_locally_a_missing_component_is_a_skip_that_names_it(tmp_path: Path) -> None:
    r = run_suite(tmp_path, ci=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert outcome_counts(r.stdout) == {"passed": 1, "skipped": 3}
    assert re.search(r"SKIPPED \[2\] conftest\.py:\d+: missing component: bwrap: bubblewrap \(bwrap\) is not "
                     r"available, or QB_NO_BWRAP is set\n", r.stdout), r.stdout


def test_under_ci_every_skip_is_a_failure(tmp_path: Path) -> None:
    r = run_suite(tmp_path, ci=True)
    assert r.returncode == 1, r.stdout + r.stderr
    # the mark and the skipif act in setup (errors), require() in the test body (a failure)
    assert outcome_counts(r.stdout) == {"passed": 1, "failed": 1, "errors": 2}
    assert r.stdout.count("(CI=true: a missing component is a failure, not a skip)") == 4  # two, and their summary
    assert "skipped under CI=true, which counts as a failure" in r.stdout and "a skip that bypassed needs" in r.stdout
