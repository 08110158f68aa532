"""The QuoteBench driver: a reply's way from a model to the report, and the command line on top.

Imports between the four packages flow one way: ``tasks <- transports <- qb_server <- qb_client``;
this package may import the other three and is imported by none of them.

Its top level is the flow of a reply, ``replies -> campaign -> records -> report``, with ``cli`` on top,
``ops`` for the commands that are not a campaign, and ``adapters/`` for what faces the outside (a model
provider, an offline agent, Inspect AI, Harbor). Each room may import only the rooms before it in this
list (``tests/test_architecture.py`` checks the order, ``QB_CLIENT_ROOMS``). The rooms of ``adapters/``
have places of their own in it, since providers feed the campaign while Inspect and Harbor run on it:

* :mod:`.console`: terminal plumbing every room shares (stdout for results, stderr for messages, safe text);
* :mod:`.replies`: what the model is told (contracts), how R is read back, how replies are stored;
* :mod:`.adapters.agents`: offline agents that reply without a model (the habits baseline);
* :mod:`.adapters.providers`: model providers (Anthropic, OpenAI, OpenAI-compatible, replay, offline)
  behind one interface;
* :mod:`.campaign`: replies generated and executed through transports (one-shot and multi-turn
  campaigns, the native path, replay, harness runs);
* :mod:`.records`: one execution's record as a reader sees it (damage, route, lint);
* :mod:`.report`: the decomposition and statistics, from results files alone;
* :mod:`.adapters.inspect_ext`: QuoteBench inside Inspect AI (optional), on the campaign's replay;
* :mod:`.adapters.harbor`: the suite as a Harbor dataset, ATIF trajectories into reply stores (optional);
* :mod:`.ops`: the logic of the commands that are not a campaign (``tasks check``, ``doctor`` and
  ``components install``, ``bench``, ``demo``, ``harness audit``), one module or subpackage each;
* :mod:`.cli`: the ``quotebench`` command, the only room that sees all the others.
"""
