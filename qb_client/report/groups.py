"""Which configs are ranked together: one suite, one userland, one design.

Rank agreement and selection regret order configs against each other, so they only make sense among
configs measured the same way:

* **suite and userland**: a task id names another task in a private split, and busybox is not GNU;
  the records of each (suite, userland) are never pooled (labels end with ``[suite, userland]`` when
  several are present).
* **design**: a config of the multi-turn arm (variant ``turns=K``, label ``...+turns=K``) is scored on
  the state its chain left after up to K turns, the model seeing each command's result; a one-shot
  config is scored on one reply. In one ranking a model would win by its budget, not by how its
  commands survive the path. Budgets differ the same way (K = 5 has more chances to recover than
  K = 3), so each K is a design of its own. The label already names the variant, so configs of
  different designs never share a label.

Records written before ``suite`` and ``userland`` existed count as (``public``, ``gnu``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .load import config_label
from .turns import variant_turns

ONE_SHOT = "one-shot"
MULTI_TURN = "multi-turn"
"""A chain whose config names no ``turns=K`` (a hand-written record): multi-turn, budget unknown."""

Key = tuple[str, str, str]
"""(suite, userland, design)."""


def stratum(r: dict[str, Any]) -> tuple[str, str]:
    """(suite, userland) of a record; records written before these fields existed are (public, gnu)."""
    return str(r.get("suite") or "public"), str(r.get("userland") or "gnu")


def design(r: dict[str, Any]) -> str:
    """``one-shot``, or ``turns=K`` for the multi-turn arm (from the config's variant, which the label
    carries)."""
    k = variant_turns(r.get("config"))
    if k is not None:
        return f"turns={k}"
    return MULTI_TURN if r.get("turns") else ONE_SHOT


def key_of(r: dict[str, Any]) -> Key:
    return (*stratum(r), design(r))


def _design_order(d: str) -> tuple[int, int]:
    if d == ONE_SHOT:
        return 0, 0
    return (1, int(d.removeprefix("turns="))) if d.startswith("turns=") else (2, 0)


def keys_of(records: list[dict[str, Any]]) -> list[Key]:
    """The groups present: the public suite and gnu first, then by name; one-shot before turns=K (by K)."""
    return sorted({key_of(r) for r in records},
                  key=lambda k: (k[0] != "public", k[0], k[1] != "gnu", k[1], _design_order(k[2])))


def group(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Records by config label; when the records span more than one (suite, userland), each label names
    its own, ``provider:model@effort [suite, userland]``."""
    many = len({stratum(r) for r in records}) > 1
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        label = config_label(r["config"])
        groups[f"{label} [{', '.join(stratum(r))}]" if many else label].append(r)
    return {k: groups[k] for k in sorted(groups)}


def apart_reason(keys: list[Key]) -> str:
    """Why the top-level rank agreement is null when there are several groups (the JSON's ``reason``)."""
    pairs = sorted({k[:2] for k in keys})
    designs = sorted({k[2] for k in keys}, key=_design_order)
    parts = []
    if len(pairs) > 1:
        parts.append(f"{len(pairs)} suite/userland combinations")
    if len(designs) > 1:
        parts.append(f"{len(designs)} designs ({', '.join(designs)})")
    return (f"the results span {' and '.join(parts)}, which are never ranked together; see each group's "
            "rank agreement")


def heading(s: dict[str, Any]) -> str:
    """One group's title, for the terminal and the page: ``Suite public, userland gnu, one-shot (2 configs)``."""
    d = s.get("design") or ONE_SHOT
    shown = d if d in (ONE_SHOT, MULTI_TURN) else f"multi-turn, {d}"
    return f"Suite {s['suite']}, userland {s['userland']}, {shown} ({len(s['configs'])} config(s))"


DESIGNS_APART = ("Multi-turn configs (+turns=K) are ranked apart from one-shot configs, and each K apart: a chain "
                 "is scored on its state after up to K turns with the model seeing each result, not on one reply.")


def designs_note(strata: list[dict[str, Any]]) -> str | None:
    """The sentence saying that designs are ranked apart, when a multi-turn group is among several."""
    if len(strata) > 1 and any((s.get("design") or ONE_SHOT) != ONE_SHOT for s in strata):
        return DESIGNS_APART
    return None
