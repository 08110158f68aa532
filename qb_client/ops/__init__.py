"""The logic of the commands that are not a campaign, one module (or subpackage) each, beside the CLI.

* :mod:`.suite_check`: ``quotebench tasks check``, the suite's own exactness proof;
* :mod:`.doctor`: ``quotebench doctor`` and ``components install``;
* :mod:`.bench`: ``quotebench bench``, the harness's cost as ratios to a bare ``bash -c true``;
* :mod:`.bench_harness`: ``quotebench bench harnesses``, each agent harness route against its own bare start;
* :mod:`.bench_lint`: ``quotebench bench lint``, the lint's commands per second per core on each lab transport;
* :mod:`.demo`: ``quotebench demo``, the crossed design offline, then the report;
* :mod:`.audit`: ``quotebench harness audit NAME``, probes sent through a harness route, measured.

They sit apart from :mod:`qb_client.cli` so the command line stays parsing and printing, and each can be
called and tested without it. May import: ``tasks``, ``transports``, ``qb_server`` and every room of
``qb_client`` before it (:mod:`qb_client.campaign`, :mod:`qb_client.report`, the adapters); never
:mod:`qb_client.cli`. The modules here do not import each other, but for the harness bench, which reuses
the bench's floor (``bash -c true``) and memory reading.
"""
