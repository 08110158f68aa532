"""The QuoteBench driver: contracts, providers, campaigns, replay, reports, the CLI.

Imports between the four packages flow one way: ``tasks <- transports <- qb_server <- qb_client``;
this package may import the other three and is imported by none of them. Inside it, one room per
concern, listed so that each may import only the rooms above it (``tests/test_architecture.py``
checks this order, ``QB_CLIENT_ROOMS``):

* :mod:`.console`: terminal plumbing (stdout for results, stderr for messages, safe text);
* :mod:`.replies`: what the model is told (contracts) and how replies are read back and stored;
* :mod:`.agents`: offline agents that reply without a model (the habits baseline);
* :mod:`.views`: how one execution is shown (damage, route, the record);
* :mod:`.providers`: model providers behind one interface;
* :mod:`.report`: the decomposition and statistics from results files;
* :mod:`.campaign`: generation and execution of replies (campaigns, chains, native, replay);
* :mod:`.inspect_ext`: QuoteBench inside Inspect AI (optional);
* :mod:`.harbor`: QuoteBench tasks as a Harbor dataset, and ATIF trajectories into reply stores (optional);
* :mod:`.suite_check`, :mod:`.doctor`, :mod:`.bench`, :mod:`.bench_harness`, :mod:`.demo`: one command's
  logic each (``tasks check``, ``doctor``/``components install``, ``bench``, ``bench harnesses``, ``demo``);
* :mod:`.audit`: the harness audit (``harness audit NAME``): probes sent through a harness route, measured;
* :mod:`.cli`: the command line, the only room that sees all the others.
"""
