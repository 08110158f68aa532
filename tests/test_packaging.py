"""A built wheel carries every package and the task files (the suite is data, shipped inside the package)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_contains_packages_and_task_data(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True, timeout=300)
    wheel = next(tmp_path.glob("quotebench-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    families = {p.name for p in (ROOT / "tasks" / "families").glob("*.toml")}
    assert len(families) == 14
    assert {f"tasks/families/{f}" for f in families} <= names
    assert {f"tasks/tools/{t}" for t in ("show-args", "show-env", "remote", "cexec")} <= names
    for module in ("qb_client/cli/__init__.py", "qb_client/report/compute.py", "qb_client/adapters/providers/factory.py",
                   "qb_client/adapters/agents/habits.py", "qb_server/app.py", "transports/ssh/transport.py", "tasks/validate.py",
                   "transports/harnesses/courier.py"):  # the courier is read as a file and run in the sandbox
        assert module in names, module
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "quotebench = qb_client.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()
