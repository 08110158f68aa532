"""The lint's predictions equal what the real routes deliver (tests/lint_oracle.py): on the hostile corpus and
the suite's replies (reference solutions and the habits agent, raw and disclosed contracts) and the lint's own
edge texts (``lint_oracle.EXTRA``), for every lab
transport and deployment path, every exact prediction equals the traced ``received`` (and ``split``, and the
transport error), every sure-damage prediction meets a damaged delivery, and every escaped safe text arrives
as exactly R.

Routes whose ``received`` is R's own text by construction (raw, tempscript, the JSON layers over raw,
shlex-sh, the gha routes, the ``-safe`` twins that read R from a file) are run on the hostile corpus only:
their prediction and their delivery call the same function, so the suite's replies add runs, not evidence.
"""

from __future__ import annotations

import anyio
import pytest

import lint_oracle as oracle

BY_CONSTRUCTION = frozenset({"raw", "tempscript", "json-naive", "json-correct", "shlex-sh", "shlex-sh-safe",
                             "gha-run", "gha-run-safe", "gha-block", "gha-block-safe", "tmux-safe",
                             "shell-quote-eval-safe"})
NEEDS = {"ssh": ("openssh",), "ssh-safe": ("openssh",), "json-naive+ssh": ("openssh",), "make": ("make",),
         "make-safe": ("make",), "tmux": ("tmux",), "tmux-safe": ("tmux",), "nested@dash": ("dash",),
         "docker-sh": ("dash",), "docker-sh-safe": ("dash",), "shell-quote-eval": ("node", "npm", "shell-quote")}
CORPUS = oracle.corpus()
HOSTILE_ONLY = [(c, t) for c, t in CORPUS if t is None]


@pytest.mark.needs("bwrap")
@pytest.mark.parametrize("route", oracle.ROUTES)
def test_every_prediction_of_the_lint_is_what_the_route_delivers(route: str, require) -> None:
    for component in NEEDS.get(route, ()):
        require(component)
    items = HOSTILE_ONLY if route in BY_CONSTRUCTION else CORPUS
    tally = anyio.run(oracle.run, (route,), items)
    assert tally.wrong == []
    checked = tally.exact[route] + tally.damage_only[route]
    assert checked + tally.skipped[route] == len(items)
    assert tally.exact[route] >= len(items) // 2  # the model decides most of what the suite sends


def test_the_corpus_holds_the_hostile_commands_and_every_task_reply() -> None:
    assert len(HOSTILE_ONLY) == 37 + len(oracle.EXTRA)
    tasks = {t.id for _, t in CORPUS if t is not None}
    assert len(tasks) == 56
