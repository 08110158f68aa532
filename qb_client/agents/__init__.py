"""Offline agents that reply to QuoteBench tasks without a model.

``habits`` holds :func:`~qb_client.agents.habits.habitual_reply`, a deterministic
BASELINE that writes commands the way a hurried human with common quoting habits
would. It is a reference point for the scores, not a model and not a solver.
"""
