"""How one execution is shown to a reader (``quotebench exec``, the report's damaged list).

* :mod:`.damage`: what a transport did to a command: invisible characters marked, a character diff,
  the cell a record belongs to;
* :mod:`.route`: why a route changed it: its boundary, the rules that explain a known change, and the
  intermediate text it built, each from the transport's own public function;
* :mod:`.execution`: one record as a newcomer reads it, or several side by side.

May import: ``tasks``, ``transports``; of ``qb_client`` only :mod:`qb_client.console`.
"""
