"""Webhook ingestion gateway for payment platforms."""

__version__ = "0.1.0"
