"""Retention: payloads and dedup keys removed after their configured age, in small
batches, by one process at a time (`gateway retention run`, or a task of `gateway serve`)."""
