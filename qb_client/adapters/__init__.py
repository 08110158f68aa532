"""Adapters: reply sources and outside frameworks."""
