"""Offline agents that reply to QuoteBench tasks without a model.

``habits`` holds :func:`~qb_client.adapters.agents.habits.habitual_reply`, a deterministic
BASELINE that writes commands the way a hurried human with common quoting habits
would. It is a reference point for the scores, not a model and not a solver;
``habits_loop`` is the same baseline for the multi-turn arm.

May import: ``tasks``. Nothing of ``qb_client``: the habits provider
(:mod:`qb_client.adapters.providers.habits`) reads this room, never the other way.
"""
