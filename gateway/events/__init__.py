"""Accepted events: `gateway events list|show|replay` over `processed_webhooks`."""
