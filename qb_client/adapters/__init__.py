"""What faces the outside of QuoteBench: where replies come from, and the frameworks it runs inside.

A group of rooms, not a room: each subpackage has its own place in ``QB_CLIENT_ROOMS`` (see
:mod:`qb_client`) and its own ``May import``, because they sit on both sides of the campaign:

* :mod:`.agents` and :mod:`.providers` are reply sources the campaign calls (offline agents, model
  providers), so they may import only :mod:`qb_client.console` and :mod:`qb_client.replies`
  (providers also :mod:`.agents`);
* :mod:`.inspect_ext` and :mod:`.harbor` put QuoteBench inside another framework (Inspect AI, Harbor),
  so they may import the campaign (its replay) and everything before it; only the CLI imports them.

This ``__init__`` imports nothing, so it can never carry an import around that order.
"""
