"""Guards that look redundant from their callers and are not: each test fails if its guard is removed.

* ``gate.takes`` checks for Perl on every call: the locale's probe is cached for the process's life, so a
  Perl removed (or installed) meanwhile would otherwise go unnoticed.
* ``ahead.take`` refuses a launcher owned by another process: a forked child's copy of a sandbox must
  neither take nor end its parent's launcher, whoever calls it.
* ``StandIns.close`` in a forked child leaves the parent's directory alone, whoever calls it.
"""

from __future__ import annotations

import os
import shutil
import threading
import types
from pathlib import Path

import pytest

from transports import template
from transports.sandbox import ahead, gate


def test_a_perl_made_unrunnable_after_its_probe_stops_the_gate(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    perl = tmp_path / "perl"
    shutil.copy(gate.PROGRAM, perl)
    perl.chmod(0o755)
    monkeypatch.setattr(gate, "PROGRAM", str(perl))
    env = {"LC_QB_FORK_GUARDS": "x"}  # a locale of its own: probed here, not answered from another test's cache
    assert gate.takes(env)
    perl.chmod(0o644)
    assert not gate.takes(env)
    perl.unlink()
    assert not gate.takes(env)


def test_a_perl_installed_after_a_first_refusal_is_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    perl = tmp_path / "perl"
    monkeypatch.setattr(gate, "PROGRAM", str(perl))
    env = {"LC_QB_FORK_GUARDS_LATE": "x"}
    assert not gate.takes(env)
    shutil.copy("/usr/bin/perl", perl)
    perl.chmod(0o755)
    assert gate.takes(env)


def test_a_launcher_owned_by_another_process_is_never_taken() -> None:
    tracer = types.SimpleNamespace(main_exited=threading.Event())
    theirs = ahead.Ahead(tracer, None, ["bwrap"], {}, -1, owner=os.getpid() + 1)  # type: ignore[arg-type]
    assert ahead.take(theirs, ["/bin/true"]) is None
    assert not theirs.ended and not theirs.used


def test_stand_ins_closed_in_a_forked_child_keep_the_parents_directory() -> None:
    made = template.StandIns()
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            made.close()
            os._exit(0)
        os.waitpid(pid, 0)
        assert made.dir.is_dir()
    finally:
        made.close()
    assert not made.dir.exists()
