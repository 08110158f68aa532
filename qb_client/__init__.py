"""The QuoteBench driver: contracts, providers, campaigns, replay, reports, the CLI."""
