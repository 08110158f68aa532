"""One execution's record as a reader sees it (``quotebench exec``, ``lint``, the report's damaged list).

* :mod:`.damage`: what a transport did to a command: invisible characters marked, a character diff,
  the cell a record belongs to;
* :mod:`.route`: why a route changed it: its boundary, the rules that explain a known change, and the
  intermediate text it built, each from the transport's own public function;
* :mod:`.execution`: one record as a newcomer reads it, or several side by side;
* :mod:`.lint`: what ``quotebench lint`` prints for one prediction, marked the way ``exec`` marks a record.

May import: ``tasks``, ``transports``; of ``qb_client`` only :mod:`qb_client.console`. The campaign writes
records and never shows them; the report and the CLI import this room.
"""
