"""`gateway forward` and `gateway listen`: delivery of accepted events to HTTP services,
re-signed, durable across restarts, at least once, in order per key."""
