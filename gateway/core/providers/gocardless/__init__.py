"""GoCardless: its signed batches of events (`webhooks`) and the objects fetched to
confirm the events that move money (`answer`)."""
