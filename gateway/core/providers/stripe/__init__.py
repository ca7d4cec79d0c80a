"""Stripe: its snapshot events (`snapshot`, the events that carry their object) and its
thin events (`thin`, confirmed by a fetch of the object they name)."""
