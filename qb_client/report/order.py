"""The order the report lists contracts, transports and families in: the suite's, never alphabetical.

Shared by the computation (:mod:`.compute`) and the renderers (:mod:`.fmt`, :mod:`.plots`), which list the
same names in the same order. A name the order does not know (a composed transport such as ``ssh+nested``)
comes after the known ones, by name.
"""

from __future__ import annotations

CONTRACT_ORDER = ("raw", "native", "disclosed", "disclosed-single")
TRANSPORT_ORDER = ("raw", "nested", "nested-single", "escaped", "tempscript", "json-naive", "json-correct", "ssh")
try:  # the suite's family order, when the tasks package can tell it
    from tasks.load import FAMILY_ORDER
except Exception:  # pragma: no cover - the report still works from records alone
    FAMILY_ORDER = ()


def ordered(names, order) -> list[str]:
    rank = {n: i for i, n in enumerate(order)}
    return sorted(set(names), key=lambda n: (rank.get(n, len(rank)), n))


def family_order(names) -> list[str]:
    return ordered(names, FAMILY_ORDER)
